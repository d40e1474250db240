"""Issue 4 benchmark: a warm load in a fresh process, beyond `import torch`.

Run with the project venv's interpreter (it needs torch and the installed
`abicache` package; GPTQModel's loader needs the sdist that bench.sh
downloads and PyPcre/LogBar from benches/requirements.txt):

    .venv/bin/python benches/bench_load.py --work benches/.work [--runs 15]

The same extension (examples/cpu_muladd: two units, one torch.ops library)
is built once by each loader into its own fresh cache, then loaded warm in
`--runs` fresh processes per loader, interleaved. Each process imports torch,
starts the clock, imports the loader and loads the extension, stops the
clock: the figure is the time spent beyond `import torch`, median.

1. `abicache.TorchOpsExtension(...).load()`;
2. `torch.utils.cpp_extension.load(..., is_python_module=False)` (ninja
   checks the build is up to date, then `torch.ops.load_library`);
3. GPTQModel 7.7.0's `TorchOpsJitExtension(...).load()` from the sdist
   (`gptqmodel.utils.cpp` imported alone, as in gptq_reference.py), when the
   sdist is there.

Target: abicache ≥ 5× less than torch's. Writes `load.json` in the work dir.
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
from pathlib import Path

from bench_common import EPILOGUE, PRELUDE

REPO = Path(__file__).resolve().parent.parent
EXAMPLE = REPO / "examples" / "cpu_muladd"
SOURCES = [str(EXAMPLE / "ops.cpp"), str(EXAMPLE / "kernel.cpp")]


LOADERS = {
    "abicache": """
import abicache
abicache.TorchOpsExtension("muladd_example", {sources!r}, required_ops=["muladd"], cache_dir={cache!r}).load()
""",
    "torch": """
from torch.utils.cpp_extension import load
load("muladd_example", {sources!r}, build_directory={cache!r}, is_python_module=False, verbose=False)
""",
    "gptqmodel": """
import types, importlib
for pkg in ["gptqmodel", "gptqmodel.utils"]:
    m = types.ModuleType(pkg); m.__path__ = [{sdist!r} + "/" + pkg.replace(".", "/")]; sys.modules[pkg] = m
cpp = importlib.import_module("gptqmodel.utils.cpp")
ext = cpp.TorchOpsJitExtension(
    name="muladd_example", namespace="muladd_example", required_ops=["muladd"],
    sources={sources!r}, build_root_env=None, default_build_root={cache!r},
    display_name="muladd example", python_abi_dependent=False)
assert ext.load(), ext._last_error
""",
}


def child(python: str, loader: str, cache: Path, sdist: Path) -> float:
    code = PRELUDE + LOADERS[loader].format(sources=SOURCES, cache=str(cache), sdist=str(sdist)) + EPILOGUE
    env = dict(os.environ, MAX_JOBS=os.environ.get("MAX_JOBS", str(os.cpu_count() or 2)))
    env.pop("ABICACHE_REBUILD", None)
    # torch's load() runs `ninja` from PATH: the venv's, as an activated venv has it.
    env["PATH"] = str(Path(python).parent) + os.pathsep + env.get("PATH", "")
    cache.mkdir(parents=True, exist_ok=True)  # torch's load() wants its build directory to exist
    out = subprocess.run([python, "-c", code], capture_output=True, text=True, env=env)
    if out.returncode != 0:
        raise SystemExit(f"bench_load: {loader} failed:\n{out.stderr[-3000:]}")
    return float(out.stdout.strip().splitlines()[-1])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--work", type=Path, default=REPO / "benches" / ".work")
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--python", default=sys.executable)
    args = parser.parse_args()
    sdist = args.work / "gptqmodel-7.7.0"
    loaders = [name for name in LOADERS if name != "gptqmodel" or sdist.is_dir()]
    root = Path(tempfile.mkdtemp(prefix="abicache-bench-load-", dir=args.work))
    try:
        caches = {name: root / name for name in loaders}
        cold = {}
        for name in loaders:
            print(f"bench_load: building with {name} (cold)", file=sys.stderr)
            cold[name] = child(args.python, name, caches[name], sdist)
        warm: dict[str, list[float]] = {name: [] for name in loaders}
        for _ in range(args.runs):
            for name in loaders:
                warm[name].append(child(args.python, name, caches[name], sdist))
    finally:
        shutil.rmtree(root, ignore_errors=True)
    med = {name: statistics.median(times) for name, times in warm.items()}
    result = {
        "runs": args.runs,
        "cold_seconds": cold,
        "warm_median_ms": {name: 1000 * t for name, t in med.items()},
        "warm_min_ms": {name: 1000 * min(t) for name, t in warm.items()},
        "torch_over_abicache": med["torch"] / med["abicache"],
    }
    if "gptqmodel" in med:
        result["gptqmodel_over_abicache"] = med["gptqmodel"] / med["abicache"]
    (args.work / "load.json").write_text(json.dumps(result, indent=1))
    print("\nwarm load in a fresh process, beyond `import torch` (median of %d)" % args.runs)
    for name in loaders:
        print(f"  {name:<10} {1000 * med[name]:8.1f} ms   (cold build {cold[name]:.1f} s)")
    print(f"  torch / abicache     = {result['torch_over_abicache']:.1f}x  (target >= 5x)")
    if "gptqmodel_over_abicache" in result:
        print(f"  gptqmodel / abicache = {result['gptqmodel_over_abicache']:.1f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
