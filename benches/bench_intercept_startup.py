"""What the wheel's start-up hook (`abicache-intercept.pth`) costs every
interpreter start. Target: at most 0.1 ms with `ABICACHE_INTERCEPT` unset.

Two measurements, both against the same interpreter without the file:

1. In process (precise): `site.addpackage` of the shipped `.pth` (what
   `site` does for it at start-up: open, read, `exec` its line), against
   an empty `.pth` (the floor every `.pth` pays) and against no file.
2. Whole processes (noisy, a check of the first): `python -c pass` in two
   venvs that differ only by the `.pth`, interleaved; also with
   `ABICACHE_INTERCEPT=1` (the hook then imports `_abicache_intercept`).

    python benches/bench_intercept_startup.py [--python PY] [--runs N] [--work DIR]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Dict, List

REPO = Path(__file__).resolve().parents[1]
PTH = REPO / "python" / "abicache-intercept.pth"
HOOK = REPO / "python" / "_abicache_intercept.py"
TARGET_MS = 0.1


def in_process(python: str, loops: int) -> Dict[str, float]:
    """Microseconds per `site.addpackage` of the `.pth`, of an empty one."""
    code = f"""
import os, site, sys, tempfile, time
d = tempfile.mkdtemp()
open(os.path.join(d, "abicache-intercept.pth"), "w").write(open({str(PTH)!r}).read())
open(os.path.join(d, "empty.pth"), "w").close()
os.environ.pop("ABICACHE_INTERCEPT", None)
out = []
for name in ("abicache-intercept.pth", "empty.pth"):
    best = float("inf")
    for _ in range(7):
        t = time.perf_counter()
        for _ in range({loops}):
            site.addpackage(d, name, set())
        best = min(best, (time.perf_counter() - t) / {loops})
    out.append(best * 1e6)
print(*out)
"""
    env = {k: v for k, v in os.environ.items() if k != "ABICACHE_INTERCEPT"}
    ours, empty = map(float, subprocess.run([python, "-c", code], capture_output=True, text=True, check=True,
                                            env=env).stdout.split())
    return {"pth_us": ours, "empty_pth_us": empty}


def make_venv(python: str, where: Path, with_hook: bool) -> str:
    if where.exists():
        shutil.rmtree(where)
    subprocess.run([python, "-m", "venv", "--without-pip", str(where)], check=True)
    exe = str(where / "bin" / "python")
    site_dir = subprocess.run([exe, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                              capture_output=True, text=True, check=True).stdout.strip()
    if with_hook:
        shutil.copy(PTH, site_dir)
        shutil.copy(HOOK, site_dir)
    return exe


def processes(exes: Dict[str, str], runs: int, env_for: Dict[str, Dict[str, str]]) -> Dict[str, List[float]]:
    """Wall milliseconds of `python -c pass` per label, runs interleaved."""
    times: Dict[str, List[float]] = {label: [] for label in exes}
    for _ in range(runs):
        for label, exe in exes.items():
            t = time.perf_counter()
            subprocess.run([exe, "-c", "pass"], env=env_for[label], check=True)
            times[label].append((time.perf_counter() - t) * 1e3)
    return times


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--python", default=sys.executable)
    parser.add_argument("--runs", type=int, default=300)
    parser.add_argument("--loops", type=int, default=2000)
    parser.add_argument("--work", type=Path, default=REPO / "benches" / ".work")
    args = parser.parse_args()

    ip = in_process(args.python, args.loops)
    extra = ip["pth_us"] - ip["empty_pth_us"]
    print(f"intercept start-up, in process: site.addpackage of abicache-intercept.pth {ip['pth_us']:.1f} us "
          f"(an empty .pth {ip['empty_pth_us']:.1f} us, so {extra:.1f} us for its line); "
          f"{ip['pth_us'] / 1e3:.4f} ms against the {TARGET_MS} ms target "
          f"({'met' if ip['pth_us'] / 1e3 <= TARGET_MS else 'MISSED'})")

    work = args.work / "intercept-startup"
    work.mkdir(parents=True, exist_ok=True)
    without = make_venv(args.python, work / "without", with_hook=False)
    with_hook = make_venv(args.python, work / "with", with_hook=True)
    base = {k: v for k, v in os.environ.items() if k not in ("ABICACHE_INTERCEPT", "PYTHONPATH")}
    exes = {"without": without, "with, unset": with_hook, "with, ABICACHE_INTERCEPT=1": with_hook}
    envs = {"without": base, "with, unset": base, "with, ABICACHE_INTERCEPT=1": dict(base, ABICACHE_INTERCEPT="1")}
    times = processes(exes, args.runs, envs)
    # The minimum is the least disturbed run (other processes only ever add
    # time); the median shows how noisy the machine was.
    floor_min, floor_median = min(times["without"]), statistics.median(times["without"])
    for label, values in times.items():
        low, median = min(values), statistics.median(values)
        print(f"intercept start-up, python -c pass ({args.runs} runs, interleaved): {label}: min {low:.2f} ms "
              f"({low - floor_min:+.2f} ms against without), median {median:.2f} ms ({median - floor_median:+.2f} ms)")
    shutil.rmtree(work)
    return 0


if __name__ == "__main__":
    sys.exit(main())
