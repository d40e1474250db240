"""PyTorch's own JIT-extension tests under torch's and abicache's
``load``/``load_inline``: which tests pass, and the time of a cold and a warm
run of the file under each implementation, measured in one run.

    .venv/bin/python benches/bench_torch_jit.py [--work DIR] [--impl torch --impl abicache] [--timeout S]

Runs ``pytest tests/torch_jit`` (PyTorch's unmodified
``test_cpp_extensions_jit.py``, see ``tests/torch_jit/README.md``) four
times, each in a fresh process: cold (empty ``ABICACHE_DIR`` and
``TORCH_EXTENSIONS_DIR``) for each implementation, then warm (the same
directories again) for each. A run still going after ``--timeout`` seconds
is stopped; the outcomes it printed are kept. PyTorch's test class deletes ``TORCH_EXTENSIONS_DIR`` in
``setUpClass``/``tearDownClass``, so torch's warm run rebuilds everything:
that is what this file does with torch's own functions, and it is reported
as measured. Prints a table and writes ``torch_jit.json`` into ``--work``.
Exits 0 whenever the runs happened, whatever they found.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any, Dict, List

REPO = Path(__file__).resolve().parents[1]
TESTS = REPO / "tests" / "torch_jit"


# `path::Class::test_name PASSED` lines of `pytest -v`: the outcomes of a run
# that was stopped before pytest wrote its JUnit file.
VERBOSE_LINE = re.compile(r"::(\w+) (PASSED|FAILED|ERROR|SKIPPED)")


def run_once(impl: str, work: Path, label: str, timeout: float) -> Dict[str, Any]:
    """One pytest run of the upstream file; returns wall time and per-test
    outcomes (``timed out`` for the test running when ``timeout`` expired)."""
    junit = work / f"{impl}-{label}.xml"
    env = dict(
        os.environ,
        ABICACHE_TORCH_JIT_IMPL=impl,
        ABICACHE_DIR=str(work / f"{impl}-abicache"),
        TORCH_EXTENSIONS_DIR=str(work / f"{impl}-torch-extensions"),
    )
    env.setdefault("MAX_JOBS", str(os.cpu_count() or 1))
    cmd = [sys.executable, "-m", "pytest", "-v", "-p", "no:cacheprovider", str(TESTS), f"--junitxml={junit}"]
    load_before = os.getloadavg()[0]
    started = time.perf_counter()
    proc = subprocess.Popen(
        cmd, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True
    )
    try:
        output, _ = proc.communicate(timeout=timeout)
        timed_out = False
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        output, _ = proc.communicate()
        timed_out = True
    seconds = time.perf_counter() - started
    load = f"{load_before:.1f} -> {os.getloadavg()[0]:.1f}"
    (work / f"{impl}-{label}.log").write_text(output)
    outcomes: Dict[str, str] = {}
    if timed_out or not junit.exists():
        for name, outcome in VERBOSE_LINE.findall(output):
            outcomes[name] = outcome.lower() if outcome != "ERROR" else "failed"
        if timed_out:
            outcomes["(run stopped)"] = f"timed out at {timeout:.0f} s"
        return {"seconds": round(seconds, 1), "returncode": None, "load": load, "outcomes": outcomes}
    if junit.exists():
        for case in ET.parse(junit).getroot().iter("testcase"):
            outcome = "passed"
            for child in case:
                if child.tag in ("failure", "error"):
                    outcome = "failed"
                elif child.tag == "skipped":
                    outcome = "skipped"
            outcomes[case.get("name", "?")] = outcome
    return {"seconds": round(seconds, 1), "returncode": proc.returncode, "load": load, "outcomes": outcomes}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--work", type=Path, default=REPO / "benches" / ".work" / "torch_jit")
    parser.add_argument("--impl", action="append", choices=["torch", "abicache"])
    parser.add_argument(
        "--timeout", type=float, default=3600.0, help="seconds one run of the file may take before it is stopped"
    )
    args = parser.parse_args()
    impls: List[str] = args.impl or ["torch", "abicache"]
    if not (TESTS / "upstream" / "test_cpp_extensions_jit.py").exists():
        print(f"bench_torch_jit: skipped: no PyTorch test file in `{TESTS / 'upstream'}` (see tests/torch_jit/README.md)")
        return 0
    work: Path = args.work
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    results: Dict[str, Dict[str, Dict[str, Any]]] = {impl: {} for impl in impls}
    # Both implementations' cold runs first, then both warm runs: the machine's
    # load drifts, and this keeps each pair that is compared close in time.
    for label in ("cold", "warm"):
        for impl in impls:
            print(f"bench_torch_jit: {impl} {label} ...", file=sys.stderr, flush=True)
            results[impl][label] = run_once(impl, work, label, args.timeout)
    (work / "torch_jit.json").write_text(json.dumps(results, indent=2))

    names = sorted({n for r in results.values() for run in r.values() for n in run["outcomes"]})
    print("\nPyTorch test_cpp_extensions_jit.py, per test (cold run / warm run):")
    print(f"  {'test':<66}" + "".join(f"{impl:>20}" for impl in impls))
    for n in names:
        cells = ""
        for impl in impls:
            cold = results[impl]["cold"]["outcomes"].get(n, "-")
            warm = results[impl]["warm"]["outcomes"].get(n, "-")
            cells += f"{cold + ' / ' + warm:>20}"
        print(f"  {n:<66}{cells}")
    print("\nwall time of the file (seconds):")
    for impl in impls:
        cold, warm = results[impl]["cold"], results[impl]["warm"]
        passed = sum(1 for o in cold["outcomes"].values() if o == "passed")
        print(
            f"  {impl:<9} cold {cold['seconds']:>7}  warm {warm['seconds']:>7}  passed (cold) {passed}"
            f"  (1-min load average, start -> end: cold {cold['load']}, warm {warm['load']})"
        )
    if "torch" in results and "abicache" in results:
        baseline = {n for n, o in results["torch"]["cold"]["outcomes"].items() if o == "passed"}
        for label in ("cold", "warm"):
            ours = results["abicache"][label]["outcomes"]
            lost = sorted(n for n in baseline if ours.get(n) != "passed")
            print(f"  passing with torch: {len(baseline)}; of those failing with abicache ({label}): {lost or 'none'}")
        for label in ("cold", "warm"):
            t, a = results["torch"][label]["seconds"], results["abicache"][label]["seconds"]
            print(f"  {label}: abicache / torch = {float(a) / float(t):.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
