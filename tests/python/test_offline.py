"""Offline mode and the miss report, end to end with real processes and a
real compiler.

One library (`answer.cpp`, no torch header: a compile of well under a
second) is built once, under interception with ``ABICACHE_OFFLINE=warn``
(the staging setting: it builds and reports). Then the same extension with
one changed flag (``-O2`` instead of ``-O1``) is asked for offline through
``abicache run --offline``, ``TorchOpsExtension.load()``, ``abicache.load``
and (for its own library) ``load_inline``: each raises
``abicache.CacheMiss`` naming the differing field (``cflag``), and no
compiler process starts. Compiler starts are counted by wrappers named
``c++``, ``g++``, ``cc``, ``gcc`` and ``ninja`` put first on ``PATH``: each
appends one line to a log, then runs the real program. ``abicache build
--offline`` and concurrent appends to the report are tested in
``crates/abicache-cli/tests/it/offline.rs``. The interception hook is the
wheel's, so these tests need the wheel installed (``scripts/test.sh`` does that).
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any, Dict, List

import pytest

import abicache

SOURCE = '// No torch header: a compile of well under a second.\nextern "C" int offline_answer() { return 7; }\n'
NAME = "offline_answer"

PROGRAM = """
import json, sys
import torch.utils.cpp_extension as cpp_extension
source, flags = sys.argv[1], sys.argv[2:]
try:
    if flags == ["--standalone"]:
        path = cpp_extension.load("offline_standalone", [source], is_python_module=False, is_standalone=True)
    else:
        path = cpp_extension.load("offline_answer", [source], extra_cflags=flags, is_python_module=False)
    out = {"path": path}
except Exception as e:
    import abicache
    out = {"error": type(e).__name__, "cache_miss": isinstance(e, abicache.CacheMiss), "message": str(e),
           "differs": list(getattr(e, "differs", None) or ()), "key": getattr(e, "key", None)}
print("RESULT " + json.dumps(out), flush=True)
"""

COMPILERS = ("c++", "g++", "cc", "gcc", "ninja")


class Work:
    """The module's files: the source, the program, the cache, the miss
    report, and the counting compiler wrappers."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.source = root / "answer.cpp"
        self.source.write_text(SOURCE)
        self.program = root / "program.py"
        self.program.write_text(PROGRAM)
        self.cache = root / "cache"
        self.report = root / "misses.jsonl"
        self.log = root / "compiler-starts.log"
        self.log.write_text("")
        self.bin = root / "bin"
        self.bin.mkdir()
        venv_bin = os.path.dirname(sys.executable)
        search = venv_bin + os.pathsep + os.environ.get("PATH", "")
        for name in COMPILERS:
            real = shutil.which(name, path=search)
            if real is None:
                continue
            wrapper = self.bin / name
            # A compile or a link (`-c`, `-shared`) is logged, and every
            # ninja start; a probe (`-dM -E`, `-E -v`, `--version`: the
            # compiler's predefined macros and version, which the key
            # reads) compiles nothing and is not.
            log = f'echo "{name} $$" >> "{self.log}"'
            if name != "ninja":
                log = f'case " $* " in *" -c "*|*" -shared "*) {log};; esac'
            wrapper.write_text(f'#!/bin/sh\n{log}\nexec "{real}" "$@"\n')
            wrapper.chmod(wrapper.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
        self.path = str(self.bin) + os.pathsep + search

    def compiler_starts(self) -> List[str]:
        return self.log.read_text().splitlines()

    def report_lines(self) -> List[Dict[str, Any]]:
        return [json.loads(line) for line in self.report.read_text().splitlines()]

    def env(self, **extra: str) -> Dict[str, str]:
        """This process's environment without abicache's settings, the
        wrappers first on PATH, and the miss report."""
        env = {k: v for k, v in os.environ.items() if not k.startswith("ABICACHE_") or k == "ABICACHE_PCH"}
        env.pop("CXX", None)
        env.pop("CC", None)
        env.update(PATH=self.path, ABICACHE_MISS_REPORT=str(self.report), PYTHONWARNINGS="ignore",
                   TORCH_EXTENSIONS_DIR=str(self.root / "torch_extensions"))
        env.update(extra)
        return env

    def run(self, run_args: List[str], flags: List[str], **extra: str) -> "tuple[Dict[str, Any], str]":
        """``python PROGRAM SOURCE FLAGS`` under ``abicache run RUN_ARGS``."""
        argv = [sys.executable, "-m", "abicache", "run", "--cache-dir", str(self.cache), *run_args, "--",
                sys.executable, str(self.program), str(self.source), *flags]
        proc = subprocess.run(argv, capture_output=True, text=True, env=self.env(**extra), timeout=600)
        for line in proc.stdout.splitlines():
            if line.startswith("RESULT "):
                return json.loads(line[len("RESULT "):]), proc.stderr
        raise AssertionError(f"exited {proc.returncode} without a result\n{proc.stdout}\n{proc.stderr}")


@pytest.fixture(scope="module")
def staged(tmp_path_factory: pytest.TempPathFactory) -> Work:
    """The staging run: ``abicache run`` with ``ABICACHE_OFFLINE=warn`` builds
    the library with ``-O1`` (and reports the miss)."""
    work = Work(tmp_path_factory.mktemp("offline"))
    result, stderr = work.run([], ["-O1"], ABICACHE_OFFLINE="warn")
    assert "path" in result, result
    work.staging_stderr = stderr  # type: ignore[attr-defined]
    work.staging_result = result  # type: ignore[attr-defined]
    return work


def test_warn_builds_reports_on_stderr_and_in_the_report(staged: Work) -> None:
    result = staged.staging_result  # type: ignore[attr-defined]
    assert Path(result["path"]).resolve().is_relative_to(staged.cache.resolve()), result
    starts = staged.compiler_starts()
    # The wrappers see the build: a count of 0 later means something.
    assert any(s.split()[0] in ("c++", "g++") for s in starts), starts
    stderr = staged.staging_stderr  # type: ignore[attr-defined]
    assert f"abicache: cache miss (`ABICACHE_OFFLINE=warn`): extension `{NAME}` key " in stderr, stderr
    assert "building it" in stderr, stderr
    (line,) = staged.report_lines()
    assert (line["extension"], line["offline"], line["reason"]) == (NAME, "warn", "not-cached"), line
    assert len(line["key"]) == 32 and line["time"].endswith("Z") and line["pid"] > 0, line
    rebuild = line["rebuild"]
    assert rebuild["spec"]["name"] == NAME and rebuild["spec"]["extra_cflags"] == ["-O1"], rebuild
    assert rebuild["environment"]["torch_version"] and rebuild["root"], rebuild
    assert "ABICACHE_OFFLINE" in rebuild["command"], rebuild


def test_abicache_run_offline_raises_cache_miss_and_starts_no_compiler(staged: Work) -> None:
    before = staged.compiler_starts()
    hit, _ = staged.run(["--offline"], ["-O1"])
    assert hit.get("path") == staged.staging_result["path"], hit  # type: ignore[attr-defined]
    miss, stderr = staged.run(["--offline"], ["-O2"])
    assert miss["cache_miss"], (miss, stderr)
    assert "cflag: [-O1] -> [-O2]" in miss["differs"], miss
    assert "cflag: [-O1] -> [-O2]" in miss["message"] and f"extension `{NAME}`" in miss["message"], miss
    # Offline: abicache does not hand the call to torch's own compile.
    assert "falling back" not in stderr, stderr
    standalone, _ = staged.run(["--offline"], ["--standalone"])
    assert standalone["cache_miss"] and "is_standalone" in standalone["message"], standalone
    assert staged.compiler_starts() == before, "a compiler started offline"
    last = staged.report_lines()[-1]
    assert (last["offline"], last["reason"], last["key"]) == ("1", "key-differs", miss["key"]), last
    assert "cflag: [-O1] -> [-O2]" in last["closest"]["differs"], last


def _offline_in_process(staged: Work, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ABICACHE_OFFLINE", "1")
    monkeypatch.setenv("PATH", staged.path)
    monkeypatch.delenv("CXX", raising=False)
    monkeypatch.delenv("ABICACHE_MISS_REPORT", raising=False)


def _assert_names_the_flag(miss: abicache.CacheMiss, staged: Work) -> None:
    assert isinstance(miss, abicache.Error)
    assert miss.extension == NAME and miss.key and len(miss.key) == 32, miss
    assert miss.closest_key == staged.report_lines()[0]["key"], miss
    assert "cflag: [-O1] -> [-O2]" in miss.differs, miss.differs
    message = str(miss)
    assert f"extension `{NAME}` key {miss.key}" in message and "cflag: [-O1] -> [-O2]" in message, message
    assert "nothing was compiled" in message and "ABICACHE_OFFLINE" in message, message


def test_torch_ops_extension_load_raises_cache_miss_offline(staged: Work, monkeypatch: pytest.MonkeyPatch) -> None:
    _offline_in_process(staged, monkeypatch)
    before = staged.compiler_starts()
    ext = abicache.TorchOpsExtension(NAME, [str(staged.source)], extra_cflags=["-O2"], cache_dir=staged.cache)
    with pytest.raises(abicache.CacheMiss) as raised:
        ext.load()
    _assert_names_the_flag(raised.value, staged)
    assert staged.compiler_starts() == before


def test_abicache_load_raises_cache_miss_offline(staged: Work, monkeypatch: pytest.MonkeyPatch) -> None:
    _offline_in_process(staged, monkeypatch)
    before = staged.compiler_starts()
    with pytest.raises(abicache.CacheMiss) as raised:
        abicache.load(NAME, [str(staged.source)], extra_cflags=["-O2"], is_python_module=False,
                      cache_dir=staged.cache)
    _assert_names_the_flag(raised.value, staged)
    assert staged.compiler_starts() == before


def test_load_inline_raises_cache_miss_offline(staged: Work, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", staged.path)
    monkeypatch.delenv("CXX", raising=False)
    inline = dict(cpp_sources=[SOURCE], is_python_module=False, no_implicit_headers=True, cache_dir=staged.cache)
    path = abicache.load_inline("offline_inline", extra_cflags=["-O1"], **inline)
    assert Path(path).is_file()
    monkeypatch.setenv("ABICACHE_OFFLINE", "1")
    before = staged.compiler_starts()
    # The same call is a hit offline.
    assert abicache.load_inline("offline_inline", extra_cflags=["-O1"], **inline) == path
    with pytest.raises(abicache.CacheMiss) as raised:
        abicache.load_inline("offline_inline", extra_cflags=["-O2"], **inline)
    assert raised.value.extension == "offline_inline"
    assert "cflag: [-O1] -> [-O2]" in raised.value.differs, raised.value.differs
    assert "cflag: [-O1] -> [-O2]" in str(raised.value)
    assert staged.compiler_starts() == before


def test_cache_miss_is_exported_and_an_error() -> None:
    assert "CacheMiss" in abicache.__all__
    assert issubclass(abicache.CacheMiss, abicache.Error)
    assert abicache.CacheMiss.differs == () and abicache.CacheMiss.key is None
