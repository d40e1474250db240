"""Ctrl-C during a build from Python (issue 11, finding 8).

A real SIGINT is sent to a Python process while abicache is compiling a real
extension in it. The compile is held open by a launcher script
(``ABICACHE_COMPILER_LAUNCHER``) that records its pid and the pid of a child
it starts (as a compiler driver starts ``cc1plus``), then waits 60 s before
running the real compiler: so the interrupt lands while the "compiler" runs.

The build process is started as a terminal starts a foreground command: with
SIGINT at its default, so Python installs its ``KeyboardInterrupt`` handler.
A test run started in the background (``scripts/test.sh > log &`` from a
script: a shell without job control starts background commands with SIGINT
and SIGQUIT ignored) hands the ignored SIGINT down to every child, and a
Python started with SIGINT ignored keeps ignoring it: the interrupt then
never lands, and the build runs on (issue 47; the second test pins it).
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
from typing import Any, Dict, List, Tuple

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

# Puts SIGINT back to its default, then execs `python ARGS` in the same
# process (exec keeps a default disposition; what a terminal's shell does for
# a foreground command). Not `preexec_fn`, which is unsafe in a threaded parent.
DEFAULT_SIGINT = (
    "import os, signal, sys; signal.signal(signal.SIGINT, signal.SIG_DFL); "
    "os.execv(sys.executable, [sys.executable, *sys.argv[1:]])"
)


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return False


def _signal_masks(pid: int) -> Dict[str, str]:
    """``SigIgn``, ``SigCgt`` (per process) and each thread's ``SigBlk`` of `pid`."""
    masks: Dict[str, str] = {}
    for task in sorted(Path(f"/proc/{pid}/task").iterdir()):
        fields = dict(line.split(":\t", 1) for line in (task / "status").read_text().splitlines() if ":\t" in line)
        masks["SigIgn"], masks["SigCgt"] = fields["SigIgn"], fields["SigCgt"]
        masks[f"SigBlk[{task.name}]"] = fields["SigBlk"]
    return masks


def _has(mask: str, signum: int) -> bool:
    return bool(int(mask, 16) >> (signum - 1) & 1)


def _interrupt_a_build(
    tmp_path: Path, parent_ignores_sigint: bool = False
) -> Tuple[List[Dict[str, Any]], str, str, List[int]]:
    """Starts a build in a new Python, sends it SIGINT while its compiler
    runs, and returns its ``RESULT`` lines, its stdout and stderr, and the
    pids of the compiler and its child. With `parent_ignores_sigint`, this
    process ignores SIGINT while it starts the build, as a test run started
    in the background does."""
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
    previous = signal.getsignal(signal.SIGINT)
    if parent_ignores_sigint:
        assert previous is not None, "SIGINT's handler was set outside Python: it could not be put back"
        signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        child = subprocess.Popen(
            [sys.executable, "-c", DEFAULT_SIGINT, "-c", textwrap.dedent(CHILD)],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
        )
    finally:
        if parent_ignores_sigint:
            signal.signal(signal.SIGINT, previous)
    try:
        deadline = time.monotonic() + 120
        while not (marker.exists() and len(marker.read_text().split()) >= 2):
            assert child.poll() is None, child.communicate()
            assert time.monotonic() < deadline, "the compile never started"
            time.sleep(0.05)
        pids = [int(p) for p in marker.read_text().split()]
        masks = _signal_masks(child.pid)
        # Said at once, rather than as a 30 s wait for a process that ignores the signal.
        assert _has(masks["SigCgt"], signal.SIGINT) and not _has(masks["SigIgn"], signal.SIGINT), (
            f"the building process does not catch SIGINT, so Ctrl-C cannot stop its build: {masks}"
        )
        child.send_signal(signal.SIGINT)
        stdout, stderr = child.communicate(timeout=30)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    results = [json.loads(line[len("RESULT "):]) for line in stdout.splitlines() if line.startswith("RESULT ")]
    return results, stdout, stderr, pids


def test_ctrl_c_during_a_build_raises_keyboard_interrupt_after_stopping_the_compilers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cache = tmp_path / "cache"
    results, stdout, stderr, pids = _interrupt_a_build(tmp_path)
    assert results == [{"outcome": "KeyboardInterrupt", "tmp": []}], f"stdout:\n{stdout}\nstderr:\n{stderr}"
    assert "lost sys.stderr" not in stderr and "Fatal" not in stderr, stderr
    for pid in pids:
        assert not _alive(pid), f"compiler process {pid} survived the interrupt"
    assert not list((cache / "v1" / "entries").iterdir()), "nothing was published"

    # The key's lock was released: the next build takes it at once and succeeds.
    monkeypatch.setenv("ABICACHE_LOCK_TIMEOUT", "5")
    import abicache

    handler, before = signal.getsignal(signal.SIGINT), _signal_masks(os.getpid())
    path = abicache.TorchOpsExtension("tiny", [str(TINY)], cache_dir=cache).load()
    assert Path(path).is_file()
    # An in-process build leaves this process's Ctrl-C as it found it: its
    # handler, and SIGINT in the ignored and caught sets and in the blocked
    # set of each thread that was there before (children inherit all three).
    after = _signal_masks(os.getpid())
    assert signal.getsignal(signal.SIGINT) is handler
    changed = {
        k: (before[k], after[k])
        for k in before
        if k in after and _has(before[k], signal.SIGINT) != _has(after[k], signal.SIGINT)
    }
    assert not changed, f"the build changed SIGINT in (before, after): {changed}"


def test_ctrl_c_stops_a_build_even_when_the_test_run_was_started_with_sigint_ignored(tmp_path: Path) -> None:
    # Issue 47: the full test command, started in the background, ignored
    # SIGINT; the build process inherited that and ran on after its SIGINT.
    results, stdout, stderr, pids = _interrupt_a_build(tmp_path, parent_ignores_sigint=True)
    assert results == [{"outcome": "KeyboardInterrupt", "tmp": []}], f"stdout:\n{stdout}\nstderr:\n{stderr}"
    for pid in pids:
        assert not _alive(pid), f"compiler process {pid} survived the interrupt"
