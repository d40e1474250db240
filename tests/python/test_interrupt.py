"""Ctrl-C during a build from Python (issue 11, finding 8).

A real SIGINT is sent to a Python process while abicache is compiling a real
extension in it. The compile is held open by a launcher script
(``ABICACHE_COMPILER_LAUNCHER``) that records its pid and the pid of a child
it starts (as a compiler driver starts ``cc1plus``), then waits 60 s before
running the real compiler: so the interrupt lands while the "compiler" runs.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from _util import REPO

TINY = REPO / "tests" / "fixtures" / "tiny" / "tiny.cpp"

LAUNCHER = """#!/bin/sh
echo $$ >> "$MARKER"
sleep 60 &
echo $! >> "$MARKER"
wait
exec "$@"
"""

CHILD = """
import json, os, sys
import abicache
cache = os.environ["CACHE"]
ext = abicache.TorchOpsExtension("tiny", [os.environ["TINY"]], cache_dir=cache)
try:
    ext.load()
    print("RESULT " + json.dumps({"outcome": "loaded"}), flush=True)
except KeyboardInterrupt:
    tmp = os.path.join(cache, "v1", "tmp")
    print("RESULT " + json.dumps({"outcome": "KeyboardInterrupt", "tmp": os.listdir(tmp)}), flush=True)
"""


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return False


def test_ctrl_c_during_a_build_raises_keyboard_interrupt_after_stopping_the_compilers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cache = tmp_path / "cache"
    marker = tmp_path / "pids"
    launcher = tmp_path / "launcher.sh"
    launcher.write_text(LAUNCHER)
    launcher.chmod(0o755)
    env = dict(
        os.environ,
        CACHE=str(cache),
        TINY=str(TINY),
        MARKER=str(marker),
        ABICACHE_COMPILER_LAUNCHER=str(launcher),
    )
    env.pop("ABICACHE_REMOTE", None)
    child = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(CHILD)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
    )
    try:
        deadline = time.monotonic() + 120
        while not (marker.exists() and len(marker.read_text().split()) >= 2):
            assert child.poll() is None, child.communicate()
            assert time.monotonic() < deadline, "the compile never started"
            time.sleep(0.05)
        pids = [int(p) for p in marker.read_text().split()]
        child.send_signal(signal.SIGINT)
        stdout, stderr = child.communicate(timeout=30)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    results = [json.loads(line[len("RESULT "):]) for line in stdout.splitlines() if line.startswith("RESULT ")]
    assert results == [{"outcome": "KeyboardInterrupt", "tmp": []}], f"stdout:\n{stdout}\nstderr:\n{stderr}"
    assert "lost sys.stderr" not in stderr and "Fatal" not in stderr, stderr
    for pid in pids:
        assert not _alive(pid), f"compiler process {pid} survived the interrupt"
    assert not list((cache / "v1" / "entries").iterdir()), "nothing was published"

    # The key's lock was released: the next build takes it at once and succeeds.
    monkeypatch.setenv("ABICACHE_LOCK_TIMEOUT", "5")
    import abicache

    path = abicache.TorchOpsExtension("tiny", [str(TINY)], cache_dir=cache).load()
    assert Path(path).is_file()
