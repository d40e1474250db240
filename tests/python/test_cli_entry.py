"""Issue 14: `pip install abicache` gives the `abicache` command and `python -m
abicache` (both run the command line compiled into ``abicache._native``), and
in an activated venv ``abicache build SPEC`` needs no ``--python``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from _util import EXAMPLES

SCRIPT = Path(sys.executable).parent / "abicache"


def _run(args, cache: Path, **env_extra: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ABICACHE_") and k != "VIRTUAL_ENV"}
    env.update(ABICACHE_DIR=str(cache), **env_extra)
    return subprocess.run(args, capture_output=True, text=True, env=env, timeout=600)


def test_console_script_and_module_are_the_same_command(tmp_path: Path) -> None:
    assert SCRIPT.is_file(), f"the wheel installs no `abicache` script next to {sys.executable}"
    script = _run([str(SCRIPT), "--version"], tmp_path)
    module = _run([sys.executable, "-m", "abicache", "--version"], tmp_path)
    assert script.returncode == module.returncode == 0, script.stderr + module.stderr
    assert script.stdout == module.stdout and script.stdout.startswith("abicache ")
    # Exit codes and messages are the native binary's: a bad size is bad input (2).
    bad = _run([str(SCRIPT), "gc", "--max-size", "lots"], tmp_path)
    assert bad.returncode == 2 and "invalid size `lots`" in bad.stderr, bad.stderr
    zero = _run([sys.executable, "-m", "abicache", "stats", "-z", "--json"], tmp_path)
    assert zero.returncode == 0, zero.stderr
    assert json.loads(zero.stdout)["hits"] == 0


def test_the_console_script_names_the_venv_by_its_real_directory() -> None:
    # The project's venvs are shared by every checkout on a machine and
    # linked into each (scripts/setup-venv.sh). A script installed through a
    # checkout's `.venv` link names that checkout's path in its `#!` line and
    # breaks in every other checkout once that one is removed (CI clones into
    # a new folder each run): this test then failed with FileNotFoundError
    # in a second checkout. scripts/install-python-package.sh installs through
    # the venv's real directory (dev_venv_python) and reinstalls a script that
    # does not name it.
    python = os.path.realpath(sys.prefix) + "/bin/python"
    head = SCRIPT.read_text(errors="replace").split("\n", 3)[:3]
    # Where pip cannot write the path in a `#!` line (a blank, or too long)
    # it writes a `/bin/sh` launcher that names it quoted.
    assert head[0] == f"#!{python}" or head[0] == "#!/bin/sh" and f'"{python}"' in "\n".join(head), (
        f"{SCRIPT} starts {head!r}, not the venv's own `{python}`; "
        "reinstall with scripts/install-python-package.sh"
    )


def test_build_in_an_activated_venv_needs_no_python_flag(cache_dir: Path, cpu_loaded: str) -> None:
    # The session's cache already holds the CPU example (built through the
    # Python API), so this is usually a hit: the CLI and the package share entries.
    venv = Path(sys.prefix)
    spec = EXAMPLES / "cpu_muladd" / "abicache.toml"
    out = _run([str(SCRIPT), "-v", "build", str(spec), "--json", "--quiet"], cache_dir, VIRTUAL_ENV=str(venv))
    assert out.returncode == 0, out.stderr
    assert f"python: {venv / 'bin' / 'python'} (from $VIRTUAL_ENV)" in out.stderr
    built = json.loads(out.stdout)
    assert Path(built["path"]).is_file(), built


def test_a_failed_prebuild_returns_1_to_the_calling_interpreter_instead_of_ending_it(tmp_path: Path) -> None:
    # `abicache._cli.main` returns the exit code; the command line once ended
    # the whole Python process (`process::exit`) when a prebuild cell failed.
    (tmp_path / "broken.cpp").write_text("this is not C++;\n")
    spec = tmp_path / "abicache.toml"
    spec.write_text('[[extension]]\nname = "broken"\nsources = ["broken.cpp"]\n')
    code = (
        "import sys, abicache._cli as cli\n"
        f"code = cli.main(['prebuild', {str(spec)!r}, '--python', sys.executable, '--quiet'])\n"
        "print('still running, exit code', code)\n"
    )
    run = _run([sys.executable, "-c", code], tmp_path / "cache")
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip().endswith("still running, exit code 1"), run.stdout + run.stderr


def test_a_bundle_that_cannot_be_written_is_an_io_error_naming_the_directory(tmp_path: Path) -> None:
    # An I/O failure, not bad input: the message names the directory and the OS error.
    missing = tmp_path / "no" / "such"
    out = _run([sys.executable, "-m", "abicache", "export", "-o", str(missing / "out.bundle")], tmp_path / "cache")
    assert out.returncode == 2, out.stderr
    assert f"cannot create a file for the bundle in `{missing}`" in out.stderr, out.stderr
    assert "No such file or directory" in out.stderr, out.stderr
    assert not missing.exists()
