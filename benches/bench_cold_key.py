"""Issue 12's "a cold key no slower than today", measured against today's code.

    python3 benches/bench_cold_key.py --key-time target/release/examples/key_time \
        --reference-key-time "$(benches/build_reference_key_time.sh)" \
        --spec benches/.work/gptqmodel-7.7.0/abicache-bench-machete.toml \
        --env benches/.work/gptq-env.toml [--rounds 8] [--runs 11]

Three keys of the same spec, in-process (`key_time`: `Session::prepare`, no
process start), medians over `--runs` runs per process:

- **reference**: the `key_time` of the commit before issue 12 (no stat cache,
  no key memo, no absent lookups: "today" when the issue was filed), built
  by `benches/build_reference_key_time.sh`;
- **cold**: this tree's first key with both caches empty, until the key is
  known (the caches are then written on another thread);
- **no cache**: this tree's scan and key without any stat cache;
- **floor**: read + BLAKE3 of the files the key visited, on one thread and on two
  (the faster counts), timed by the same `key_time` process: the cold key's ratio to
  it is printed too.

Reference and current processes alternate, the first of each round
alternating too, so neither profits from running later (page cache, CPU
frequency). Ratios are medians of the per-round ratios. Prints a table and
writes `cold-key-NAME.json` into `--out` (default: the spec's directory;
NAME: `--name`, default the spec's file stem).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
from pathlib import Path


def key_time(binary: Path, spec: Path, env: Path, runs: int, floor: bool = False) -> dict:
    extra = ["--floor"] if floor else []
    out = subprocess.run([str(binary), str(spec), str(env), "--runs", str(runs), *extra],
                         check=True, capture_output=True, text=True).stdout
    return json.loads(out)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--key-time", type=Path, required=True, help="this tree's key_time example")
    ap.add_argument("--reference-key-time", type=Path, required=True,
                    help="the reference commit's key_time (benches/build_reference_key_time.sh)")
    ap.add_argument("--spec", type=Path, required=True)
    ap.add_argument("--env", type=Path, required=True)
    ap.add_argument("--rounds", type=int, default=8)
    ap.add_argument("--runs", type=int, default=11)
    ap.add_argument("--out", type=Path, help="directory for cold-key-NAME.json (default: the spec's)")
    ap.add_argument("--name", help="what the spec is, in the output (default: its file stem)")
    ap.add_argument("--reference-label", default="91db52b",
                    help="what the reference key_time was built from, in the output (default: 91db52b)")
    args = ap.parse_args()
    for path in (args.key_time, args.reference_key_time, args.spec, args.env):
        if not path.exists():
            raise SystemExit(f"bench_cold_key: `{path}` does not exist")

    rounds = []
    for n in range(args.rounds):
        def reference() -> float:
            return key_time(args.reference_key_time, args.spec, args.env, args.runs)["median_ms"]

        def current() -> dict:
            # The raw floor (read + BLAKE3 of the same files, one thread and two; the
            # faster counts) in the same process, for the cold key's ratio to it.
            return key_time(args.key_time, args.spec, args.env, args.runs, floor=True)

        if n % 2 == 0:
            ref, cur = reference(), current()
        else:
            cur = current()
            ref = reference()
        row = {"reference_ms": ref, "cold_ms": cur["median_ms"], "no_cache_ms": cur["uncached_ms"],
               "cold_settled_ms": cur["cold_settled_ms"],
               "floor_ms": min(cur["floor_1t_ms"], cur["floor_2t_ms"])}
        rounds.append(row)
        print(f"round {n + 1}/{args.rounds}: reference {ref:.1f} ms, cold {row['cold_ms']:.1f} ms, "
              f"no cache {row['no_cache_ms']:.1f} ms, floor {row['floor_ms']:.1f} ms", flush=True)

    def med(field: str) -> float:
        return statistics.median(r[field] for r in rounds)

    def ratio(a: str, b: str) -> float:
        return statistics.median(r[a] / r[b] for r in rounds)

    result = {
        "spec": str(args.spec), "rounds": rounds, "runs_per_process": args.runs,
        "reference_ms": med("reference_ms"), "cold_ms": med("cold_ms"), "no_cache_ms": med("no_cache_ms"),
        "cold_settled_ms": med("cold_settled_ms"), "floor_ms": med("floor_ms"),
        "cold_vs_floor": ratio("cold_ms", "floor_ms"),
        "cold_vs_reference": ratio("cold_ms", "reference_ms"),
        "no_cache_vs_reference": ratio("no_cache_ms", "reference_ms"),
        "cold_vs_no_cache": ratio("cold_ms", "no_cache_ms"),
        "cold_settled_vs_reference": ratio("cold_settled_ms", "reference_ms"),
        "rounds_cold_not_slower_than_reference": sum(r["cold_ms"] <= r["reference_ms"] for r in rounds),
    }
    name = args.name or args.spec.stem
    result["name"] = name
    result["reference"] = args.reference_label
    out = (args.out or args.spec.parent) / f"cold-key-{name}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2) + "\n")
    print()
    print(f"Cold key, {name} ({args.rounds} rounds x {args.runs} runs, medians):")
    print("| key | median | / reference |")
    print("|---|---|---|")
    print(f"| reference ({args.reference_label}) | {result['reference_ms']:.1f} ms | 1.00x |")
    print(f"| cold (caches empty; until the key is known) | {result['cold_ms']:.1f} ms "
          f"| **{result['cold_vs_reference']:.2f}x** |")
    print(f"| no cache (this tree's scan + key) | {result['no_cache_ms']:.1f} ms "
          f"| {result['no_cache_vs_reference']:.2f}x |")
    print(f"| cold + cache writes (what `abicache key` waits for) | {result['cold_settled_ms']:.1f} ms "
          f"| {result['cold_settled_vs_reference']:.2f}x |")
    print(f"| raw floor (read + BLAKE3 of the same files, the faster of 1 and 2 threads) "
          f"| {result['floor_ms']:.1f} ms | cold / floor **{result['cold_vs_floor']:.2f}x** |")
    verdict = "met" if result["cold_vs_reference"] <= 1.0 else "MISSED"
    print(f"cold / no cache: {result['cold_vs_no_cache']:.2f}x; cold no slower than the reference in "
          f"{result['rounds_cold_not_slower_than_reference']}/{args.rounds} rounds; "
          f"target (cold <= reference): {verdict}")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
