"""The production recipe end to end with a real client (slow: run by
scripts/bench.sh, not by scripts/test.sh): DeepSpeed 0.19.8's CPU
optimizers (``tests/fixtures/record_plan/deepspeed_program.py``: CPUAdam,
Adagrad and Lion through their op builders' ``.load()``)

1. run under ``abicache run --record PLAN`` (each op compiled);
2. the plan prebuilt into an empty cache (``abicache prebuild --plan``);
3. exported as a cache wheel and installed into a fresh venv (another
   overlay of the same torch, with DeepSpeed and abicache installed again:
   other paths, same bytes);
4. the same program run there offline (``abicache run --offline``, an empty
   local cache): 0 compiles, and every optimizer's step bit-for-bit the
   first run's;
5. with one flag changed (``RECORD_DS_EXTRA_CFLAG``): the offline run fails
   with ``abicache.CacheMiss`` naming ``cflag``, still 0 compiles.

The venvs are overlays (a ``.pth`` to this interpreter's torch) with
scripts/requirements-bench-deepspeed.txt installed with ``--no-deps`` (from
PyPI or pip's cache). Compiles are counted by a ``CXX`` wrapper. Each
phase's seconds are printed and written to ``record-deepspeed.json`` under
``ABICACHE_BENCH_OUT`` when set.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Dict, List

import pytest

from _util import abicache_wheel

REPO = Path(__file__).resolve().parents[2]
PROGRAM = REPO / "tests" / "fixtures" / "record_plan" / "deepspeed_program.py"
REQUIREMENTS = REPO / "scripts" / "requirements-bench-deepspeed.txt"


def _overlay_venv(where: Path, wheels: List[Path]) -> Path:
    """A venv at ``where`` that sees this interpreter's torch (a ``.pth``),
    with DeepSpeed's requirements and ``wheels`` installed without their dependencies."""
    import torch

    subprocess.run([sys.executable, "-m", "venv", str(where)], check=True, timeout=300)
    python = where / "bin" / "python"
    site = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          capture_output=True, text=True, check=True).stdout.strip()
    (Path(site) / "_record_deepspeed_torch.pth").write_text(str(Path(torch.__file__).parents[1]) + "\n")
    env = dict(os.environ, DS_BUILD_OPS="0", DS_ACCELERATOR="cpu")
    pip = [str(python), "-m", "pip", "install", "--quiet", "--no-deps", "--disable-pip-version-check"]
    subprocess.run([*pip, "-r", str(REQUIREMENTS)], check=True, env=env, timeout=900)
    # `--ignore-installed`: the torch venv seen through the `.pth` may have its own abicache.
    subprocess.run([*pip, "--ignore-installed", *map(str, wheels)], check=True, env=env, timeout=300)
    return python


def _counting_cxx(where: Path) -> Path:
    wrapper = where / "counting-c++"
    real = shutil.which("c++") or "/usr/bin/c++"
    wrapper.write_text(f'#!/bin/sh\nprintf "%s\\n" "$*" >> "$RECORD_DS_COMPILE_LOG"\nexec {real} "$@"\n')
    wrapper.chmod(0o755)
    return wrapper


def _compiles(log: Path) -> int:
    if not log.exists():
        return 0
    return sum(1 for line in log.read_text().splitlines() if " -c " in f" {line} ")


def _env(python: Path, tmp: Path, log: Path, **extra: str) -> Dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("ABICACHE_") and k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env.update(
        CXX=str(_counting_cxx(tmp)),
        RECORD_DS_COMPILE_LOG=str(log),
        DS_ACCELERATOR="cpu",
        DS_BUILD_OPS="0",
        TORCH_EXTENSIONS_DIR=str(tmp / "torch-extensions"),
        ABICACHE_PCH="0",
        PYTHONWARNINGS="ignore",
        VIRTUAL_ENV=str(python.parents[1]),
        # The venv's own commands first; ninja (which DeepSpeed checks for) from the project venv.
        PATH=os.pathsep.join([str(python.parent), str(Path(sys.executable).parent), os.environ.get("PATH", "")]),
    )
    env.update(extra)
    return env


def _run(argv: List[str], env: Dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run(argv, capture_output=True, text=True, env=env, timeout=1800)


def _result(proc: subprocess.CompletedProcess) -> Dict[str, Any]:
    for line in proc.stdout.splitlines():
        if line.startswith("RESULT "):
            return json.loads(line[len("RESULT "):])
    raise AssertionError(f"exited {proc.returncode} without a result\n--- stdout\n{proc.stdout}\n--- stderr\n{proc.stderr}")


@pytest.mark.slow
def test_deepspeed_recorded_prebuilt_shipped_and_run_offline_with_no_compile(tmp_path: Path) -> None:
    times: Dict[str, float] = {}

    def timed(phase: str, started: float) -> None:
        times[phase] = round(time.perf_counter() - started, 2)

    started = time.perf_counter()
    stage = _overlay_venv(tmp_path / "stage-venv", [abicache_wheel()])
    timed("stage venv (pip --no-deps)", started)
    plan, stage_cache, prebuilt = tmp_path / "plan", tmp_path / "stage-cache", tmp_path / "prebuilt-cache"

    log = tmp_path / "record.compiles"
    started = time.perf_counter()
    proc = _run([str(stage), "-m", "abicache", "run", "--cache-dir", str(stage_cache), "--record", str(plan), "--",
                 str(stage), str(PROGRAM)], _env(stage, tmp_path, log))
    timed("1 record (3 builds)", started)
    first = _result(proc)
    assert _compiles(log) >= 3, proc.stderr
    text = (plan / "plan.toml").read_text()
    assert text.count("[[extension]]") == 3, text
    for name in ("cpu_adam", "cpu_adagrad", "cpu_lion"):
        assert f'name = "{name}"' in text, text
    assert str(tmp_path) not in text, text

    log = tmp_path / "prebuild.compiles"
    started = time.perf_counter()
    proc = _run([str(stage), "-m", "abicache", "--cache-dir", str(prebuilt), "prebuild", "--plan", str(plan),
                 "--json"], _env(stage, tmp_path, log))
    timed("2 prebuild into an empty cache", started)
    assert proc.returncode == 0, proc.stderr
    coverage = json.loads(proc.stdout)
    assert coverage["built"] == 3 and coverage["failed"] == 0, coverage
    assert _compiles(log) >= 3

    started = time.perf_counter()
    dist = tmp_path / "dist"
    proc = _run([str(stage), "-m", "abicache", "--cache-dir", str(prebuilt), "export",
                 "--wheel", "record-deepspeed-cache==1.0", "--out", str(dist)], _env(stage, tmp_path, log))
    assert proc.returncode == 0, proc.stderr
    (cache_wheel,) = dist.glob("*.whl")
    timed("3a export the cache wheel", started)

    started = time.perf_counter()
    prod = _overlay_venv(tmp_path / "prod-venv", [abicache_wheel(), cache_wheel])
    timed("3b fresh venv with the cache wheel", started)

    log = tmp_path / "offline.compiles"
    offline = [str(prod), "-m", "abicache", "run", "--offline", "--cache-dir", str(tmp_path / "prod-cache"), "--",
               str(prod), str(PROGRAM)]
    started = time.perf_counter()
    proc = _run(offline, _env(prod, tmp_path, log))
    timed("4 offline run in the fresh venv", started)
    again = _result(proc)
    assert _compiles(log) == 0, log.read_text()
    assert again["after"] == first["after"]

    started = time.perf_counter()
    proc = _run(offline, _env(prod, tmp_path, log, RECORD_DS_EXTRA_CFLAG="-DRECORD_DS_CHANGED=1"))
    timed("5 offline run, one flag changed", started)
    assert proc.returncode != 0 and "RESULT " not in proc.stdout, proc.stdout
    assert "CacheMiss" in proc.stderr and "cpu_adam" in proc.stderr, proc.stderr
    assert "cflag" in proc.stderr and "-DRECORD_DS_CHANGED=1" in proc.stderr, proc.stderr
    assert _compiles(log) == 0, log.read_text()

    report = {"seconds": times, "load_seconds": {"record": first["load_seconds"], "offline": again["load_seconds"]}}
    print("record-deepspeed: " + json.dumps(report, indent=1))
    out = os.environ.get("ABICACHE_BENCH_OUT")
    if out:
        Path(out, "record-deepspeed.json").write_text(json.dumps(report, indent=1))
