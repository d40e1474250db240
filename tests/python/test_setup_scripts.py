"""The per-machine set-up scripts are safe to run at once and after a kill.

Regression tests for a fresh machine's failing test command: two tests that
each ran ``scripts/setup-uv.sh`` at the same moment both found no stamp, and
each ran ``rm -rf`` on the venv the other was filling. These run the real
scripts (the uv tools venv is a real ``pip install uv``, ~20 MB from pip's
cache) on an empty ``ABICACHE_DEV_HOME``. The torch venvs (5 GB each) are
raced by ``scripts/fresh-machine-check.sh`` instead.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Dict, List

from _util import abicache_wheel

REPO = Path(__file__).resolve().parents[2]
SCRIPTS = REPO / "scripts"


def dev_env(home: Path) -> Dict[str, str]:
    env = dict(os.environ)
    env["ABICACHE_DEV_HOME"] = str(home)
    env.pop("ABICACHE_TEST_UV", None)
    return env


def run_at_once(argv: List[str], env: Dict[str, str], count: int = 2) -> List[subprocess.CompletedProcess]:
    procs = [
        subprocess.Popen(argv, env=env, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for _ in range(count)
    ]
    results = []
    for p in procs:
        out, err = p.communicate(timeout=600)
        results.append(subprocess.CompletedProcess(argv, p.returncode, out, err))
    return results


def test_two_setup_uv_runs_at_once_on_an_empty_home_both_succeed_with_one_venv(tmp_path: Path) -> None:
    home = tmp_path / "dev-home"
    runs = run_at_once([str(SCRIPTS / "setup-uv.sh")], dev_env(home))
    for run in runs:
        assert run.returncode == 0, run.stderr
    uv = {run.stdout.strip() for run in runs}
    assert len(uv) == 1, uv
    # One of them created it; the other waited for the lock (or found it done).
    created = [run for run in runs if "creating the uv tools venv" in run.stderr]
    assert len(created) == 1, [run.stderr for run in runs]
    version = subprocess.run([uv.pop(), "--version"], capture_output=True, text=True, check=True)
    assert version.stdout.startswith("uv 0.13"), version.stdout
    assert len(list(home.glob("tools-uv-*/.abicache-stamp"))) == 1


def test_a_killed_set_up_neither_blocks_the_next_nor_leaves_a_half_made_venv_in_use(tmp_path: Path) -> None:
    home = tmp_path / "dev-home"
    env = dev_env(home)
    first = subprocess.Popen(
        [str(SCRIPTS / "setup-uv.sh")], env=env, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        start_new_session=True,
    )
    # Killed while it fills the venv (its directory exists, its stamp does not).
    deadline = time.monotonic() + 120
    while not list(home.glob("tools-uv-*/bin/python")) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert first.poll() is None, "setup-uv.sh finished before it could be killed"
    os.killpg(first.pid, signal.SIGKILL)
    first.wait()
    assert not list(home.glob("tools-uv-*/.abicache-stamp"))
    env["ABICACHE_DEV_LOCK_TIMEOUT"] = "60"
    again = subprocess.run([str(SCRIPTS / "setup-uv.sh")], env=env, cwd=REPO, capture_output=True, text=True)
    assert again.returncode == 0, again.stderr
    assert "creating the uv tools venv" in again.stderr
    subprocess.run([again.stdout.strip(), "--version"], check=True, capture_output=True)


def test_a_lock_held_by_another_process_is_waited_for_and_named(tmp_path: Path) -> None:
    lock = tmp_path / "state.lock"
    holder = subprocess.Popen(
        ["bash", "-c", f'. "{SCRIPTS}/dev-env.sh"; dev_lock l -x "{lock}" holder; echo held; sleep 30'],
        env=dev_env(tmp_path / "home"), stdout=subprocess.PIPE, text=True,
    )
    assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
    env = dev_env(tmp_path / "home")
    env["ABICACHE_DEV_LOCK_TIMEOUT"] = "1"
    waiter = subprocess.run(
        ["bash", "-c", f'. "{SCRIPTS}/dev-env.sh"; dev_lock l -x "{lock}" waiter; echo got it'],
        env=env, capture_output=True, text=True,
    )
    assert waiter.returncode == 1
    assert f"waiter: waiting for the lock `{lock}`" in waiter.stderr
    assert "timed out after 1 s" in waiter.stderr and "ABICACHE_DEV_LOCK_TIMEOUT" in waiter.stderr
    holder.kill()
    holder.wait()
    # The holder's death released it.
    env["ABICACHE_DEV_LOCK_TIMEOUT"] = "5"
    after = subprocess.run(
        ["bash", "-c", f'. "{SCRIPTS}/dev-env.sh"; dev_lock l -x "{lock}" waiter; echo got it'],
        env=env, capture_output=True, text=True,
    )
    assert after.returncode == 0 and after.stdout.strip() == "got it", after.stderr


def test_links_made_at_once_are_replaced_atomically(tmp_path: Path) -> None:
    # Many processes re-pointing one link at once: every one succeeds and the
    # link always resolves (rm + ln would fail with "File exists" or leave a gap).
    for name in ("a", "b"):
        (tmp_path / name).mkdir()
    link = tmp_path / "link"
    script = f'. "{SCRIPTS}/dev-env.sh"; for i in $(seq 50); do dev_link "{tmp_path}/$1" "{link}"; done'
    procs = [
        subprocess.Popen(["bash", "-c", script, "-", name], env=dev_env(tmp_path / "home"), stderr=subprocess.PIPE,
                         text=True)
        for name in ("a", "b", "a", "b")
    ]
    for p in procs:
        _, err = p.communicate(timeout=120)
        assert p.returncode == 0, err
    assert link.is_symlink() and link.resolve().name in ("a", "b")
    assert sorted(x.name for x in tmp_path.iterdir()) == ["a", "b", "home", "link"]


def test_a_pip_install_through_dev_venv_python_outlives_the_checkout_that_made_it(tmp_path: Path) -> None:
    # The shared venvs are linked into every checkout. pip writes the path the
    # interpreter was started by into each console script's `#!` line, so a
    # script installed through one checkout's `.venv` link broke in every
    # other checkout once that one was removed (CI clones into a new folder
    # each run). The scripts install through dev_venv_python: the venv's
    # real directory. A real venv, a real pip install of the abicache wheel.
    real = tmp_path / "dev-home" / "venv-dev-x"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(real)], check=True, timeout=120)
    checkout = tmp_path / "checkout"
    checkout.mkdir()
    (checkout / ".venv").symlink_to(real)
    python = subprocess.run(
        ["bash", "-c", f'. "{SCRIPTS}/dev-env.sh"; dev_venv_python "$1"', "-", str(checkout / ".venv")],
        env=dev_env(tmp_path / "home"), capture_output=True, text=True, check=True, timeout=60,
    ).stdout.strip()
    assert python == os.path.realpath(real) + "/bin/python"
    installed = subprocess.run(
        [sys.executable, "-m", "pip", "--python", python, "install", "--quiet", "--no-deps", "--no-index",
         str(abicache_wheel())],
        capture_output=True, text=True, timeout=600,
    )
    assert installed.returncode == 0, installed.stdout + installed.stderr
    shutil.rmtree(checkout)
    script = real / "bin" / "abicache"
    assert script.read_text().splitlines()[0] == f"#!{python}"
    version = subprocess.run([str(script), "--version"], capture_output=True, text=True, timeout=120)
    assert version.returncode == 0 and version.stdout.startswith("abicache "), version.stderr


def test_the_build_venv_pins_the_maturin_of_the_dev_venv() -> None:
    # scripts/demo.sh builds the wheel with .venv-build's maturin, the other
    # scripts with .venv's: one source state must make one wheel either way.
    def maturin_pin(name: str) -> List[str]:
        lines = (SCRIPTS / name).read_text().splitlines()
        return [line.split("#")[0].strip() for line in lines if line.startswith("maturin")]

    dev = maturin_pin("requirements-dev.txt")
    assert len(dev) == 1 and dev[0].startswith("maturin=="), dev
    assert maturin_pin("requirements-build.txt") == dev
    # And its zig is the packaging file's, not a second pin.
    assert "-r requirements-packaging.txt" in (SCRIPTS / "requirements-build.txt").read_text().splitlines()


def test_a_run_names_its_cargo_target_directory_once_and_where_it_came_from(tmp_path: Path) -> None:
    # Every script sources dev-env.sh and they call each other: the first
    # says it, on stderr, and the ones it starts do not repeat it.
    env = dev_env(tmp_path / "home")
    env.pop("CARGO_TARGET_DIR", None)
    env.pop("ABICACHE_DEV_TARGET_SHOWN", None)
    nested = f'. "{SCRIPTS}/dev-env.sh"; bash -c \'. "{SCRIPTS}/dev-env.sh"; echo "$CARGO_TARGET_DIR"\''
    run = subprocess.run(["bash", "-c", nested], env=env, capture_output=True, text=True, check=True)
    assert run.stdout.strip() == str(tmp_path / "home" / "target")
    said = [line for line in run.stderr.splitlines() if "Cargo's target directory" in line]
    assert said == [f"bash: Cargo's target directory is {tmp_path / 'home' / 'target'} (the per-machine default, "
                    "$ABICACHE_DEV_HOME/target; set CARGO_TARGET_DIR to use another)"], run.stderr
    env["CARGO_TARGET_DIR"] = str(tmp_path / "mine")
    run = subprocess.run(["bash", "-c", nested], env=env, capture_output=True, text=True, check=True)
    assert run.stdout.strip() == str(tmp_path / "mine")
    said = [line for line in run.stderr.splitlines() if "Cargo's target directory" in line]
    assert said == [f"bash: Cargo's target directory is {tmp_path / 'mine'} (CARGO_TARGET_DIR, set by the caller)"]


def test_the_test_command_documents_its_modes_and_refuses_what_it_cannot_do(tmp_path: Path) -> None:
    env = dev_env(tmp_path / "home")
    help_ = subprocess.run([str(SCRIPTS / "test.sh"), "--help"], env=env, capture_output=True, text=True)
    assert help_.returncode == 0, help_.stderr
    for mode in ("--quick [-p CRATE]...", "--python-dev", "mkdocs build --strict"):
        assert mode in help_.stdout, mode
    for argv, says in (
        (["-p", "abicache-key"], "-p selects crates for --quick only"),
        (["--quick", "-p"], "`-p` needs a crate name"),
        (["--bogus"], "unknown argument `--bogus`"),
    ):
        run = subprocess.run([str(SCRIPTS / "test.sh"), *argv], env=env, capture_output=True, text=True)
        assert run.returncode == 2 and says in run.stderr, (argv, run.stderr)
