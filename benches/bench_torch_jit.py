"""PyTorch's own JIT-extension tests under torch's and abicache's
``load``/``load_inline``: which tests pass, and the time of a cold and a warm
run of the file under each implementation, measured in one run.

    .venv/bin/python benches/bench_torch_jit.py [--work DIR] [--impl torch --impl abicache]

Runs ``pytest tests/torch_jit`` (PyTorch's unmodified
``test_cpp_extensions_jit.py``, see ``tests/torch_jit/README.md``) four
times, each in a fresh process: cold (empty ``ABICACHE_DIR`` and
``TORCH_EXTENSIONS_DIR``) then warm (the same directories again), for each
implementation. PyTorch's test class deletes ``TORCH_EXTENSIONS_DIR`` in
``setUpClass``/``tearDownClass``, so torch's warm run rebuilds everything:
that is what this file does with torch's own functions, and it is reported
as measured. Prints a table and writes ``torch_jit.json`` into ``--work``.
Exits 0 whenever the runs happened, whatever they found.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Dict, List

REPO = Path(__file__).resolve().parents[1]
TESTS = REPO / "tests" / "torch_jit"


def run_once(impl: str, work: Path, label: str) -> Dict[str, object]:
    """One pytest run of the upstream file; returns wall time and per-test outcomes."""
    junit = work / f"{impl}-{label}.xml"
    env = dict(
        os.environ,
        ABICACHE_TORCH_JIT_IMPL=impl,
        ABICACHE_DIR=str(work / f"{impl}-abicache"),
        TORCH_EXTENSIONS_DIR=str(work / f"{impl}-torch-extensions"),
    )
    env.setdefault("MAX_JOBS", str(os.cpu_count() or 1))
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(TESTS), f"--junitxml={junit}"]
    started = time.perf_counter()
    proc = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True)
    seconds = time.perf_counter() - started
    (work / f"{impl}-{label}.log").write_text(proc.stdout + proc.stderr)
    outcomes: Dict[str, str] = {}
    if junit.exists():
        for case in ET.parse(junit).getroot().iter("testcase"):
            outcome = "passed"
            for child in case:
                if child.tag in ("failure", "error"):
                    outcome = "failed"
                elif child.tag == "skipped":
                    outcome = "skipped"
            outcomes[case.get("name", "?")] = outcome
    return {"seconds": round(seconds, 1), "returncode": proc.returncode, "outcomes": outcomes}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--work", type=Path, default=REPO / "benches" / ".work" / "torch_jit")
    parser.add_argument("--impl", action="append", choices=["torch", "abicache"])
    args = parser.parse_args()
    impls: List[str] = args.impl or ["torch", "abicache"]
    if not (TESTS / "upstream" / "test_cpp_extensions_jit.py").exists():
        print(f"bench_torch_jit: skipped: no PyTorch test file in `{TESTS / 'upstream'}` (see tests/torch_jit/README.md)")
        return 0
    work: Path = args.work
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    results: Dict[str, Dict[str, Dict[str, object]]] = {}
    for impl in impls:
        results[impl] = {}
        for label in ("cold", "warm"):
            print(f"bench_torch_jit: {impl} {label} ...", file=sys.stderr, flush=True)
            results[impl][label] = run_once(impl, work, label)
    (work / "torch_jit.json").write_text(json.dumps(results, indent=2))

    names = sorted({n for r in results.values() for run in r.values() for n in run["outcomes"]})  # type: ignore[union-attr]
    print("\nPyTorch test_cpp_extensions_jit.py, per test (cold run / warm run):")
    print(f"  {'test':<66}" + "".join(f"{impl:>20}" for impl in impls))
    for n in names:
        cells = ""
        for impl in impls:
            cold = results[impl]["cold"]["outcomes"].get(n, "-")  # type: ignore[union-attr]
            warm = results[impl]["warm"]["outcomes"].get(n, "-")  # type: ignore[union-attr]
            cells += f"{cold + ' / ' + warm:>20}"
        print(f"  {n:<66}{cells}")
    print("\nwall time of the file (seconds):")
    for impl in impls:
        cold, warm = results[impl]["cold"], results[impl]["warm"]
        passed = sum(1 for o in cold["outcomes"].values() if o == "passed")  # type: ignore[union-attr]
        print(f"  {impl:<9} cold {cold['seconds']:>7}  warm {warm['seconds']:>7}  passed (cold) {passed}")
    if "torch" in results and "abicache" in results:
        baseline = {n for n, o in results["torch"]["cold"]["outcomes"].items() if o == "passed"}  # type: ignore[union-attr]
        for label in ("cold", "warm"):
            ours = results["abicache"][label]["outcomes"]
            lost = sorted(n for n in baseline if ours.get(n) != "passed")  # type: ignore[union-attr]
            print(f"  passing with torch: {len(baseline)}; of those failing with abicache ({label}): {lost or 'none'}")
        for label in ("cold", "warm"):
            t, a = results["torch"][label]["seconds"], results["abicache"][label]["seconds"]
            print(f"  {label}: abicache / torch = {float(a) / float(t):.2f}")  # type: ignore[arg-type]
    return 0


if __name__ == "__main__":
    sys.exit(main())
