"""Issue 12 benchmark: a warm load against the `torch.ops.load_library` floor.

Run with the project venv's interpreter (it needs torch and the installed
`abicache` package):

    .venv/bin/python benches/bench_warm.py --work benches/.work [--runs 15]

Two libraries, each built once by abicache into a fresh cache:

* small: examples/cpu_muladd (two units, ~0.5 MiB);
* large: the same op plus a `.incbin` of a random blob (`--blob-mib`, default
  256: the size of a multi-arch CUDA kernel library), as read-only data.

Then, per library, `--runs` rounds of two fresh processes each, in
alternating order (A-B, then B-A): each imports torch, starts the clock, and
either imports abicache and calls `TorchOpsExtension(...).load()` (hit,
verification, `torch.ops.load_library`, `required_ops` check) or calls
`torch.ops.load_library(path)` on the very file the hit returned; the clock
stops when the op is registered. The figure is the time beyond
`import torch`, median; the ratio is abicache over the floor (target ≤ 2×).

A warm load is answered by the warm-load record (`python/abicache/_warm_record.py`):
no native call, so `abicache._native` is never imported; each library's row
says which path answered (`record` or `native`), checked in a separate,
untimed process first.

`--breakdown` also prints where one warm abicache load spends its time
(median over the runs, fresh processes): `import abicache`, the extension
object, the record's name (this interpreter and torch), the record's checks
(environment variables, one `stat` per dependency, the entry's stamps), the
hit's writes (the counter log, the entry's last-used mark),
`torch.ops.load_library`, the `required_ops` check.

Writes `warm.json` in the work dir. The blob and the caches are deleted at
the end.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from bench_common import EPILOGUE, PRELUDE

REPO = Path(__file__).resolve().parent.parent
EXAMPLE = REPO / "examples" / "cpu_muladd"

ABICACHE = """
import abicache
path = abicache.TorchOpsExtension("muladd_example", {sources!r}, required_ops=["muladd"], cache_dir={cache!r}).load()
"""
FLOOR = """
torch.ops.load_library({path!r})
"""
BREAKDOWN = """
import sys, time, json, warnings
warnings.filterwarnings("ignore")
import torch
T = [time.perf_counter()]
def lap(): T.append(time.perf_counter())
import abicache
lap()
ext = abicache.TorchOpsExtension("muladd_example", {sources!r}, required_ops=["muladd"], cache_dir={cache!r})
lap()
from abicache import _warm_record as X
name = X.record_name(ext._spec, ext._root, ext.cache_dir)
lap()
record = X.check_record(name, ext.cache_dir)
assert record is not None, "no warm record"
lap()
assert X.count_hit(record)
lap()
torch.ops.load_library(record["library"])
lap()
ext._check_required_ops()
lap()
assert "abicache._native" not in sys.modules
names = ["import abicache", "TorchOpsExtension(...)", "record name (interpreter + torch)",
         "record checks (variables, stats)", "hit writes (counter, last-used)", "torch.ops.load_library",
         "required_ops check"]
print(json.dumps(dict(zip(names, [b - a for a, b in zip(T, T[1:])]))))
"""
WARM_CHECK = """
import sys, warnings
warnings.filterwarnings("ignore")
import torch, abicache
abicache.TorchOpsExtension("muladd_example", {sources!r}, required_ops=["muladd"], cache_dir={cache!r}).load()
print("native" if "abicache._native" in sys.modules else "record")
"""

BLOB_SOURCE = """// A read-only blob the size of a multi-arch kernel library (bench only).
asm(".section .rodata.abicache_bench_blob,\\"a\\"\\n"
    ".balign 64\\n"
    ".incbin \\"{blob}\\"\\n"
    ".previous\\n");
"""


def run(python: str, code: str, env: dict) -> str:
    out = subprocess.run([python, "-c", code], capture_output=True, text=True, env=env)
    if out.returncode != 0:
        raise SystemExit(f"bench_warm: a child failed:\n{out.stderr[-3000:]}")
    return out.stdout.strip().splitlines()[-1]


def write_blob(path: Path, mib: int) -> None:
    with open(path, "wb") as f:
        for _ in range(mib):
            f.write(os.urandom(1 << 20))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--work", type=Path, default=REPO / "benches" / ".work")
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--blob-mib", type=int, default=256)
    parser.add_argument("--breakdown", action="store_true")
    parser.add_argument("--python", default=sys.executable)
    args = parser.parse_args()
    # A time-out (SIGTERM) still removes the 256 MiB blob and the caches.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    args.work.mkdir(parents=True, exist_ok=True)
    # Absolute: the assembler resolves `.incbin` from the compiler's directory.
    root = Path(tempfile.mkdtemp(prefix="abicache-bench-warm-", dir=args.work)).resolve()
    env = dict(os.environ, MAX_JOBS=os.environ.get("MAX_JOBS", "2"))
    env.pop("ABICACHE_REBUILD", None)
    result: dict = {"runs": args.runs, "blob_mib": args.blob_mib, "libraries": {}}
    try:
        src = root / "src"
        shutil.copytree(EXAMPLE, src)
        blob = root / "blob.bin"
        write_blob(blob, args.blob_mib)
        (src / "blob.cpp").write_text(BLOB_SOURCE.replace("{blob}", str(blob)))
        libs = {
            "small": [str(src / "ops.cpp"), str(src / "kernel.cpp")],
            "large": [str(src / "ops.cpp"), str(src / "kernel.cpp"), str(src / "blob.cpp")],
        }
        for name, sources in libs.items():
            cache = str(root / f"cache-{name}")
            print(f"bench_warm: building the {name} library (cold)", file=sys.stderr)
            abicache_code = PRELUDE + ABICACHE.format(sources=sources, cache=cache) + "\nprint(path)\n"
            path = run(args.python, abicache_code, env)
            size = os.path.getsize(path)
            # The first warm load stamps the library; wait out the racy window
            # so the stamps (library and sources) can be trusted.
            import time

            time.sleep(2.2)
            run(args.python, PRELUDE + ABICACHE.format(sources=sources, cache=cache) + EPILOGUE, env)
            # That load wrote the warm record: from now on a load takes no native call.
            path_taken = run(args.python, WARM_CHECK.format(sources=sources, cache=cache), env)
            codes = {
                "abicache": PRELUDE + ABICACHE.format(sources=sources, cache=cache) + EPILOGUE,
                "load_library": PRELUDE + FLOOR.format(path=path) + EPILOGUE,
            }
            times: dict = {k: [] for k in codes}
            for i in range(args.runs):
                order = list(codes) if i % 2 == 0 else list(reversed(codes))
                for k in order:
                    times[k].append(float(run(args.python, codes[k], env)))
            med = {k: 1000 * statistics.median(v) for k, v in times.items()}
            row = {
                "library_mib": size / 2**20,
                "median_ms": med,
                "min_ms": {k: 1000 * min(v) for k, v in times.items()},
                "ratio": med["abicache"] / med["load_library"],
                "warm_path": path_taken,
            }
            if args.breakdown:
                laps: dict = {}
                for _ in range(args.runs):
                    d = json.loads(run(args.python, BREAKDOWN.format(sources=sources, cache=cache), env))
                    for k, v in d.items():
                        laps.setdefault(k, []).append(v)
                row["breakdown_ms"] = {k: 1000 * statistics.median(v) for k, v in laps.items()}
            result["libraries"][name] = row
    finally:
        shutil.rmtree(root, ignore_errors=True)
    (args.work / "warm.json").write_text(json.dumps(result, indent=1))
    print(f"\nIssue 12: warm load beyond `import torch`, fresh processes, alternating order (median of {args.runs})")
    for name, row in result["libraries"].items():
        m = row["median_ms"]
        ok = "ok" if row["ratio"] <= 2 else "MISSED"
        print(f"  {name:<6} {row['library_mib']:7.1f} MiB  abicache {m['abicache']:6.2f} ms  "
              f"load_library {m['load_library']:6.2f} ms  ratio {row['ratio']:5.2f}x  target <= 2x {ok}  "
              f"(answered by the {row['warm_path']})")
    for name, row in result["libraries"].items():
        if "breakdown_ms" in row:
            print(f"  where a warm abicache load of the {name} library goes (median ms, separate runs):")
            for k, v in row["breakdown_ms"].items():
                print(f"    {k:<42}{v:7.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
