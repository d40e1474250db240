"""Free-threaded CPython: the cp314t wheel in a real 3.14t interpreter with the
GIL disabled (slow: builds that wheel; run by scripts/free-threaded-check.sh
from scripts/bench.sh), and the same threaded stress, with the GIL, on the
interpreter the tests run in (here, in every run).

The free-threaded interpreter is ``ABICACHE_FREE_THREADED_PYTHON``, else
``python3.14t`` on PATH. None could be had on this project's machines (see
docs/index.md, "Free-threaded CPython"): the test says so when it skips.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any, Dict, List, Optional

import pytest

from _util import EXAMPLES, REPO

PROBE = Path(__file__).with_name("free_threaded_probe.py")


def run_probe(python: Path, cache: Path, extra: List[str]) -> Dict[str, Any]:
    proc = subprocess.run(
        [str(python), str(PROBE), "--cache", str(cache), *extra],
        capture_output=True, text=True, timeout=1800,
    )
    for line in proc.stdout.splitlines():
        if line.startswith("RESULT "):
            assert proc.returncode == 0, proc.stderr
            return json.loads(line[len("RESULT "):])
    raise AssertionError(f"the probe exited {proc.returncode} without a result\n--- stdout\n{proc.stdout}\n--- stderr\n{proc.stderr}")


def test_threaded_stress_of_the_python_api(tmp_path: Path) -> None:
    # The probe's stress in this interpreter (the abi3 wheel, with the GIL):
    # 8 threads x 20 rounds, every descriptor path new, one directory per content.
    result = run_probe(Path(sys.executable), tmp_path / "cache", ["--threads", "8", "--rounds", "20"])
    assert result["stress"] == {"calls": 160, "threads": 8, "rounds": 20}
    assert result["native_module"].startswith("_native.")


def free_threaded_python() -> Optional[str]:
    given = os.environ.get("ABICACHE_FREE_THREADED_PYTHON")
    if given:
        return given
    return shutil.which("python3.14t")


@pytest.mark.slow
def test_free_threaded_wheel_runs_without_the_gil(tmp_path: Path) -> None:
    python = free_threaded_python()
    if python is None:
        pytest.skip(
            "no free-threaded CPython 3.14 here (ABICACHE_FREE_THREADED_PYTHON unset, no `python3.14t` on PATH): "
            "Debian (trixie, sid, experimental) packages none, python.org's sources are unreachable for pyenv, "
            "and PyPI ships no interpreter"
        )
    wheel = os.environ.get("ABICACHE_TEST_FREE_THREADED_WHEEL")
    if not wheel:
        out = subprocess.run(
            [str(REPO / "scripts" / "build-free-threaded-wheels.sh")],
            capture_output=True, text=True, timeout=3600, cwd=REPO,
        )
        assert out.returncode == 0, out.stderr
        wheel = out.stdout.strip().splitlines()[-1]
    assert "-cp314t-" in Path(wheel).name, wheel
    venv = tmp_path / "venv"
    subprocess.run([python, "-m", "venv", str(venv)], check=True)
    vpython = venv / "bin" / "python"
    subprocess.run([str(vpython), "-m", "pip", "install", "--quiet", "--no-index", "--no-deps", wheel], check=True)
    # torch, where a requirement is named (PyPI has cp314t wheels of torch 2.15: ~540 MB and its CUDA libraries).
    torch_requirement = os.environ.get("ABICACHE_FREE_THREADED_TORCH")
    if torch_requirement:
        subprocess.run([str(vpython), "-m", "pip", "install", "--quiet", torch_requirement], check=True)
    result = run_probe(vpython, tmp_path / "cache", ["--require-gil-disabled", "--example", str(EXAMPLES / "cpu_muladd")])
    print("free-threaded probe:", json.dumps(result))
    assert result["free_threaded_build"] is True
    assert result["gil_enabled_after_import"] is False
    assert result["native_module"].startswith("_native.cpython-314t-")
    assert result["stress"]["calls"] == 8 * 20
    if torch_requirement:
        assert result["example"]["muladd"] == [1.0, 2.0, 5.0, 10.0]
        assert result["example"]["builds"] == 1
