"""Record, then prebuild (docs/fleet.md, "Record, then prebuild"): a real
program (``tests/fixtures/record_plan``: one ``load`` whose source includes a
header from another directory, as a plain library; one ``load_inline``) runs under
``abicache run --record PLAN``; ``abicache prebuild --plan PLAN`` builds the
plan into an empty cache from the plan's own copy of the sources (the
project is moved away meanwhile); the same program then runs on that cache
offline (``abicache run --offline``) with 0 compiles, and with a changed
flag fails with ``CacheMiss``. Compiles are counted by a ``CXX`` wrapper that logs every
compiler call with ``-c`` (abicache compiles with ``CXX``)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any, Dict, List, Optional

REPO = Path(__file__).resolve().parents[2]
FIXTURE = REPO / "tests" / "fixtures" / "record_plan"


def _env(compile_log: Path, extra: Optional[Dict[str, str]] = None) -> Dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("ABICACHE_INTERCEPT", "ABICACHE_DIR", "ABICACHE_RECORD")}
    env.update(
        CXX=str(_wrapper(compile_log.parent)),
        RECORD_PLAN_COMPILE_LOG=str(compile_log),
        PYTHONWARNINGS="ignore",
        ABICACHE_PCH="0",
        VIRTUAL_ENV=sys.prefix,
    )
    env.update(extra or {})
    return env


def _wrapper(where: Path) -> Path:
    """A ``c++`` that appends its arguments to ``$RECORD_PLAN_COMPILE_LOG``, then runs the real one."""
    wrapper = where / "counting-c++"
    if not wrapper.exists():
        real = shutil.which("c++") or "/usr/bin/c++"
        wrapper.write_text(f'#!/bin/sh\nprintf "%s\\n" "$*" >> "$RECORD_PLAN_COMPILE_LOG"\nexec {real} "$@"\n')
        wrapper.chmod(0o755)
    return wrapper


def _compiles(log: Path) -> int:
    if not log.exists():
        return 0
    return sum(1 for line in log.read_text().splitlines() if " -c " in f" {line} ")


def _abicache(*args: str) -> List[str]:
    return [sys.executable, "-m", "abicache", *args]


def _run(argv: List[str], env: Dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run(argv, capture_output=True, text=True, env=env, timeout=900)


def _result(proc: subprocess.CompletedProcess) -> Dict[str, Any]:
    for line in proc.stdout.splitlines():
        if line.startswith("RESULT "):
            return json.loads(line[len("RESULT "):])
    raise AssertionError(f"exited {proc.returncode} without a result\n--- stdout\n{proc.stdout}\n--- stderr\n{proc.stderr}")


def _program(tmp: Path) -> Path:
    shutil.copytree(FIXTURE, tmp / "app")
    return tmp / "app" / "project" / "program.py"


def test_a_recorded_plan_round_trips_into_an_empty_cache_with_no_compile(tmp_path: Path) -> None:
    program = _program(tmp_path)
    plan, first_cache, second_cache = tmp_path / "plan", tmp_path / "cache-1", tmp_path / "cache-2"
    record_log = tmp_path / "record.compiles"
    argv = _abicache("run", "--cache-dir", str(first_cache), "--record", str(plan), "--", sys.executable, str(program))
    recorded = _result(_run(argv, _env(record_log)))
    assert recorded == {"answer": 42, "scale": [1.0, 4.0, 7.0, 10.0]}
    assert _compiles(record_log) >= 2, record_log.read_text()
    # Recording the same extensions again (both hits now) keeps one entry each.
    assert _result(_run(argv, _env(record_log))) == recorded

    text = (plan / "plan.toml").read_text()
    entries = text.count("[[extension]]")
    assert entries == 2, text
    assert 'name = "record_plan_answer"' in text and 'name = "record_plan_scale"' in text, text
    # Plain, portable text: no path of this machine's test directory, the
    # header from the other directory listed with its hash, and each file once by content.
    assert str(tmp_path) not in text, text
    assert '"outside/offset.h"' in text, text
    assert "torch=" in text and "python_abi=" in text, text
    stored = sorted(p.name for p in (plan / "sources").iterdir())
    assert len(stored) == 3, stored  # answer.cpp, offset.h, the generated main.cpp
    for name in stored:
        assert name in text

    # Prebuild from the plan alone: the project is gone while it runs.
    shutil.move(str(tmp_path / "app"), str(tmp_path / "away"))
    prebuild_log = tmp_path / "prebuild.compiles"
    proc = _run(_abicache("--cache-dir", str(second_cache), "prebuild", "--plan", str(plan), "--json"),
                _env(prebuild_log))
    assert proc.returncode == 0, proc.stderr
    coverage = json.loads(proc.stdout)
    assert coverage["built"] == 2 and coverage["failed"] == 0, coverage
    keys = {cell["key"] for cell in coverage["cells"]}
    assert keys == set(_plan_keys(text)), (keys, text)
    assert _compiles(prebuild_log) >= 2
    shutil.move(str(tmp_path / "away"), str(tmp_path / "app"))

    # The same program on the prebuilt cache, offline: two hits, no compile.
    run_log = tmp_path / "run.compiles"
    import abicache

    offline = _abicache("run", "--offline", "--cache-dir", str(second_cache), "--", sys.executable, str(program))
    before = abicache.stats(str(second_cache))
    again = _result(_run(offline, _env(run_log)))
    after = abicache.stats(str(second_cache))
    assert again == recorded
    assert _compiles(run_log) == 0, run_log.read_text()
    assert after["builds"] == before["builds"] and after["hits"] == before["hits"] + 2, (before, after)

    # What the plan did not record is a miss offline, naming the changed flag.
    proc = _run(offline, _env(run_log, {"RECORD_PLAN_FLAG": "-O2"}))
    assert proc.returncode != 0 and "RESULT " not in proc.stdout, proc.stdout
    assert "CacheMiss" in proc.stderr and "record_plan_scale" in proc.stderr and "-O2" in proc.stderr, proc.stderr
    assert _compiles(run_log) == 0, run_log.read_text()


def _plan_keys(text: str) -> List[str]:
    return [line.split('"')[1] for line in text.splitlines() if line.startswith("key = ")]


def test_processes_recording_into_one_plan_at_once_lose_no_entry(tmp_path: Path) -> None:
    # Four processes of one run, each loading the same library with its own
    # `-D` value (four keys; no torch header, so quick compiles), all
    # recording into one plan at once.
    program = _program(tmp_path).parent / "plain_program.py"
    plan, cache = tmp_path / "plan", tmp_path / "cache"
    values = ["11", "12", "13", "14"]
    script = " & ".join(f'RECORD_PLAN_VALUE={v} "$0" "$1"' for v in values) + " & wait"
    argv = _abicache("run", "--cache-dir", str(cache), "--record", str(plan), "--", "sh", "-c", script,
                     sys.executable, str(program))
    proc = _run(argv, _env(tmp_path / "compiles"))
    assert sorted(json.loads(line[len("RESULT "):])["value"] for line in proc.stdout.splitlines()
                  if line.startswith("RESULT ")) == [11, 12, 13, 14], proc.stdout + proc.stderr
    text = (plan / "plan.toml").read_text()
    assert text.count("[[extension]]") == 4, text
    assert len(set(_plan_keys(text))) == 4, text
    for v in values:
        assert f'"-DPLAIN_VALUE={v}"' in text, text
    # One source, stored once.
    assert len(list((plan / "sources").iterdir())) == 1


def test_prebuild_plan_refuses_a_damaged_plan_naming_the_file(tmp_path: Path) -> None:
    (tmp_path / "plan").mkdir()
    (tmp_path / "plan" / "plan.toml").write_text("format = 7\n")
    proc = _run(_abicache("--cache-dir", str(tmp_path / "cache"), "prebuild", "--plan", str(tmp_path / "plan")),
                _env(tmp_path / "log"))
    assert proc.returncode == 2, proc.stderr
    assert "plan format 7" in proc.stderr and "plan.toml" in proc.stderr, proc.stderr


def test_prebuild_plan_without_a_plan_says_how_to_record_one(tmp_path: Path) -> None:
    proc = _run(_abicache("--cache-dir", str(tmp_path / "cache"), "prebuild", "--plan", str(tmp_path / "none")),
                _env(tmp_path / "log"))
    assert proc.returncode == 2, proc.stderr
    assert "plan.toml" in proc.stderr and "abicache run --record" in proc.stderr, proc.stderr
