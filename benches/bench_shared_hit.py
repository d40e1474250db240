"""Issue 51 benchmark: hit latency on a shared (network) mount against a
local cache, in one run.

Run as root with the project venv's interpreter (it needs torch, the
installed `abicache` package and the two-node test bed's packages, which
scripts/setup-services.sh installs):

    .venv/bin/python benches/bench_shared_hit.py --work benches/.work [--runs 15]

The two-node test bed (tests/python/two_node_bed.py) stands for a cluster: a
cache at `<bed>/shared/cache` is an sshfs (FUSE) mount of one export seen
from node A, with sshfs's default attribute cache. The CPU example
(examples/cpu_muladd) is built once into a local cache (a directory on
node A's local disk), and that cache is copied to the export, so both hold the
same entry. Then, interleaved, `--runs` fresh processes on node A each:

1. `local`: load from the local cache (`ABICACHE_SHARED` unset: `auto`,
   which calls a local disk local);
2. `shared`: load from the shared mount (`auto`: detected as shared);
3. `shared-off`: load from the shared mount with `ABICACHE_SHARED=off`
   (the single-machine rules on the mount, as before issue 51).

Each process imports torch, starts the clock, imports abicache, loads the
extension, checks the op: the figure is the time beyond `import torch`,
median. The same for `abicache build` (the Rust command, a hit: the whole
process). Prints the ratios shared / local; writes `shared_hit.json` in the
work dir. No target: the figure is reported (issue 51 asks for it measured).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Dict, List

from bench_common import EPILOGUE, PRELUDE

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests" / "python"))
from two_node_bed import TwoNodeBed, unavailable  # noqa: E402

EXAMPLE = REPO / "examples" / "cpu_muladd"
SOURCES = [str(EXAMPLE / "ops.cpp"), str(EXAMPLE / "kernel.cpp")]
LOAD = """
import abicache
abicache.TorchOpsExtension("muladd_example", {sources!r}, required_ops=["muladd"], cache_dir={cache!r}).load()
"""
CASES = {"local": {}, "shared": {}, "shared-off": {"ABICACHE_SHARED": "off"}}


def env(extra: Dict[str, str]) -> Dict[str, str]:
    e = {k: v for k, v in os.environ.items() if not k.startswith("ABICACHE_")}
    e.update(ABICACHE_PCH="0", PATH=f"{Path(sys.executable).parent}{os.pathsep}{e.get('PATH', '')}")
    e.update(extra)
    return e


def load_once(bed: TwoNodeBed, cache: Path, extra: Dict[str, str]) -> float:
    code = PRELUDE + LOAD.format(sources=SOURCES, cache=str(cache)) + EPILOGUE
    out = bed.run("A", [sys.executable, "-c", code], env=env(extra), timeout=900)
    if out.returncode != 0:
        raise SystemExit(f"bench_shared_hit: a load from {cache} failed:\n{out.stderr[-3000:]}")
    return float(out.stdout.strip().splitlines()[-1])


def build_once(bed: TwoNodeBed, abicache: str, cache: Path, extra: Dict[str, str]) -> float:
    t = time.perf_counter()
    out = bed.run("A", [abicache, "--cache-dir", str(cache), "build", str(EXAMPLE / "abicache.toml"),
                        "--python", sys.executable, "--json", "--quiet"], env=env(extra), timeout=900)
    took = time.perf_counter() - t
    if out.returncode != 0:
        raise SystemExit(f"bench_shared_hit: `abicache build` on {cache} failed:\n{out.stderr[-3000:]}")
    return took


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--work", type=Path, default=REPO / "benches" / ".work")
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--abicache", default=shutil.which("abicache", path=str(Path(sys.executable).parent)))
    args = parser.parse_args()
    reason = unavailable()
    if reason is not None:
        print(f"bench_shared_hit: skipped: {reason}", file=sys.stderr)
        return 0
    args.work.mkdir(parents=True, exist_ok=True)
    root = Path(tempfile.mkdtemp(prefix="abicache-bench-shared-", dir=args.work)).resolve()
    try:
        with TwoNodeBed(root / "bed") as bed:
            local = root / "local-cache"
            caches = {"local": local, "shared": bed.shared / "cache", "shared-off": bed.shared / "cache"}
            print("bench_shared_hit: building the CPU example into the local cache (cold)", file=sys.stderr)
            cold = load_once(bed, local, {})
            build_once(bed, args.abicache, local, {})
            # The same entries on the shared export (copied on the server's side).
            shutil.copytree(local, bed.export / "cache", symlinks=True)
            loads: Dict[str, List[float]] = {name: [] for name in CASES}
            builds: Dict[str, List[float]] = {name: [] for name in CASES}
            # One unmeasured round: each cache's first hit re-verifies what the copy changed.
            for name, extra in CASES.items():
                load_once(bed, caches[name], extra)
                build_once(bed, args.abicache, caches[name], extra)
            for _ in range(args.runs):
                for name, extra in CASES.items():
                    loads[name].append(load_once(bed, caches[name], extra))
                    builds[name].append(build_once(bed, args.abicache, caches[name], extra))
    finally:
        shutil.rmtree(root, ignore_errors=True)
    load_ms = {name: 1000 * statistics.median(t) for name, t in loads.items()}
    build_ms = {name: 1000 * statistics.median(t) for name, t in builds.items()}
    result = {
        "runs": args.runs,
        "cold_seconds": cold,
        "load_median_ms": load_ms,
        "load_min_ms": {name: 1000 * min(t) for name, t in loads.items()},
        "build_median_ms": build_ms,
        "shared_over_local_load": load_ms["shared"] / load_ms["local"],
        "shared_over_local_build": build_ms["shared"] / build_ms["local"],
    }
    (args.work / "shared_hit.json").write_text(json.dumps(result, indent=1))
    print(f"\nhit latency, local cache vs the shared (sshfs) mount, node A (median of {args.runs})")
    print(f"  {'':<12} {'load beyond import torch':>26} {'abicache build (process)':>26}")
    for name in CASES:
        print(f"  {name:<12} {load_ms[name]:23.1f} ms {build_ms[name]:23.1f} ms")
    print(f"  shared / local = {result['shared_over_local_load']:.2f}x (load), "
          f"{result['shared_over_local_build']:.2f}x (abicache build)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
