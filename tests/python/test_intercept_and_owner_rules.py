"""Two rules restated in Python, each tied value for value to its one Rust
home through the native module:

- ``ABICACHE_INTERCEPT``: ``abicache_env_vars::parse_intercept`` and its
  warning ``intercept_refusal``, restated by ``_abicache_intercept.mode`` (the
  start-up hook imports neither the native module nor torch);
- the owner of a library abicache loads: ``abicache_store::trusted_owner``,
  restated by ``abicache._warm_record.trusted_owner`` (the warm path and
  ``_native_path.open_checked``), checked on real files with real owners.
"""

import ctypes
import json
import os
import pwd
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Dict, Iterator, List, Optional, Tuple

import pytest

import _abicache_intercept
import abicache
from abicache import _native, _native_path, _warm_record

# --- ABICACHE_INTERCEPT ----------------------------------------------------------

INTERCEPT_VALUES = [
    None, "", " ", "\t\n", "0", " 0 ", "1", "\t1\n", "verbose", "VERBOSE", " Verbose ",
    "true", "false", "no", "yes", "off", "on", "bogus", "2", "01", "\x0b", "\x0b1", "\xa01", "verbo\u017fe",
]


@pytest.mark.parametrize("value", INTERCEPT_VALUES, ids=[repr(v) for v in INTERCEPT_VALUES])
def test_abicache_intercept_is_parsed_by_one_rule(value: Optional[str], monkeypatch: pytest.MonkeyPatch) -> None:
    # Table: `1` on, `verbose` (any case) verbose, unset/blank/`0` off; any
    # other value is refused (interception stays off) with one message
    # naming the variable and the accepted values: the same words both sides.
    try:
        rust: str = _native.intercept_mode(value)
    except _native.Error as e:
        rust = "refused: " + str(e)
    try:
        python = _abicache_intercept.mode(value) or "off"
    except ValueError as e:
        python = "refused: " + str(e)
    assert python == rust
    # The hook reads the variable itself when given no value.
    if value is None:
        monkeypatch.delenv("ABICACHE_INTERCEPT", raising=False)
    else:
        monkeypatch.setenv("ABICACHE_INTERCEPT", value)
    try:
        from_env = _abicache_intercept.mode() or "off"
    except ValueError as e:
        from_env = "refused: " + str(e)
    assert from_env == rust
    word = (value or "").strip(" \t\n\r\x0c")
    expected = {"": "off", "0": "off", "1": "on", "verbose": "verbose", "VERBOSE": "verbose", "Verbose": "verbose"}
    if word in expected:
        assert rust == expected[word]
    else:
        assert rust == (
            f"refused: `ABICACHE_INTERCEPT={value}` is not `1`, `verbose` or `0`; interception is off. "
            "Set it to `1` (or `verbose`) to turn interception on, or unset it"
        )


def _hooked(value: str) -> "subprocess.CompletedProcess[str]":
    # A fresh interpreter, whose start-up hook (the wheel's `.pth`) reads the value.
    env = {k: v for k, v in os.environ.items() if k not in ("ABICACHE_INTERCEPT", "PYTHONPATH")}
    env["ABICACHE_INTERCEPT"] = value
    code = (
        "import sys\n"
        "print(int(any(getattr(f, '_abicache_intercept', False) for f in sys.meta_path)),"
        " int('torch' in sys.modules), int('abicache' in sys.modules))\n"
    )
    return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)


@pytest.mark.parametrize("value", ["bogus", "true", "Yes"])
def test_a_refused_value_leaves_interception_off_with_one_line_naming_it(value: str) -> None:
    proc = _hooked(value)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["0", "0", "0"], "nothing installed, nothing imported"
    assert proc.stderr == (
        f"abicache: `ABICACHE_INTERCEPT={value}` is not `1`, `verbose` or `0`; interception is off. "
        "Set it to `1` (or `verbose`) to turn interception on, or unset it\n"
    )


@pytest.mark.parametrize("value,installed", [("0", "0"), (" ", "0"), ("1", "1"), ("VERBOSE", "1")])
def test_an_accepted_value_says_nothing(value: str, installed: str) -> None:
    proc = _hooked(value)
    assert proc.returncode == 0, proc.stderr
    assert (proc.stdout.split(), proc.stderr) == ([installed, "0", "0"], "")


# --- The owner of a library abicache loads ------------------------------------------


@pytest.fixture
def other_user() -> Iterator[Tuple[str, int, int]]:
    """A user made for this test (name, uid, gid), removed after it."""
    if os.geteuid() != 0 or shutil.which("useradd") is None:
        pytest.skip("needs root and useradd to make files of another user")
    name = f"abicache-rules-{os.getpid()}"
    subprocess.run(["useradd", "--system", "--no-create-home", "--user-group", name], check=True,
                   capture_output=True)
    try:
        entry = pwd.getpwnam(name)
        yield name, entry.pw_uid, entry.pw_gid
    finally:
        subprocess.run(["userdel", name], check=True, capture_output=True)


def _answers(paths: Dict[str, str]) -> Dict[str, List[bool]]:
    # Per file and `layer` (False, True): Rust's answer, Python's answer, and
    # what `open_checked` (the loader's re-check, given the file's own stamp:
    # a library without one is refused whoever owns it) did.
    uid = os.geteuid()
    out: Dict[str, List[bool]] = {}
    for label, path in paths.items():
        st = os.lstat(path)
        owner = st.st_uid
        stamp = [st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns]
        row = []
        for layer in (False, True):
            fd = _native_path.open_checked(path, stamp, layer)
            if fd is not None:
                os.close(fd)
            row += [_native.library_owner_trusted(path, layer), _warm_record.trusted_owner(owner, uid, layer),
                    fd is not None]
        out[label] = row
    return out


def _answers_as(uid: int, gid: int, paths: Dict[str, str]) -> Dict[str, List[bool]]:
    # `_answers` in a forked child running as `uid`: no exec, so this
    # interpreter's modules serve (the venv lies under /root, 0700). Marked
    # dumpable again after the change of credentials, as a process started
    # as that user is, so `/proc/self` is its own (Rust reads the uid there).
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: never returns into pytest
        status = 1
        try:
            os.close(read)
            os.setgroups([])
            os.setresgid(gid, gid, gid)
            os.setresuid(uid, uid, uid)
            pr_set_dumpable = 4
            ctypes.CDLL(None, use_errno=True).prctl(pr_set_dumpable, 1, 0, 0, 0)
            assert os.stat("/proc/self").st_uid == uid
            os.write(write, json.dumps(_answers(paths)).encode())
            status = 0
        except BaseException as e:  # noqa: BLE001 - reported through the pipe
            os.write(write, json.dumps({"error": repr(e)}).encode())
        finally:
            os._exit(status)
    os.close(write)
    with os.fdopen(read, "rb") as f:
        data = json.loads(f.read())
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0, data
    return data  # type: ignore[no-any-return]


@pytest.fixture
def shared_dir() -> Iterator[Path]:
    """A directory every user can reach (pytest's are its owner's only)."""
    path = Path(tempfile.mkdtemp(prefix="abicache-owner-rule-"))
    path.chmod(0o755)
    try:
        yield path
    finally:
        shutil.rmtree(path)


def test_the_library_owner_rule_is_rusts(shared_dir: Path, other_user: Tuple[str, int, int]) -> None:
    _, other_uid, other_gid = other_user
    third_uid = other_uid + 1 if other_uid + 1 != os.geteuid() else other_uid + 2
    paths: Dict[str, str] = {}
    for label, uid in (("root", 0), ("other", other_uid), ("third", third_uid)):
        lib = shared_dir / f"lib{label}.so"
        lib.write_bytes(b"\x7fELF not really")
        lib.chmod(0o644)
        os.chown(lib, uid, other_gid if label == "other" else 0)
        paths[label] = str(lib)
    # Each row: (Rust, Python, open_checked) for layer=False, then layer=True.
    own, layer_only, never = [True] * 6, [False] * 3 + [True] * 3, [False] * 6
    as_root = _answers(paths)
    assert as_root == {"root": own, "other": never, "third": never}
    as_other = _answers_as(other_uid, other_gid, paths)
    assert as_other == {"root": layer_only, "other": own, "third": never}


def test_the_outcome_says_when_a_library_is_a_layers(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # `open_checked` accepts root's library only when the native outcome says
    # it is a read-only layer's: a hit in the own cache does not say so, the
    # same entry found through a layer does (a real build, then a cache that
    # has it only as a layer).
    from _util import example_spec

    monkeypatch.delenv("ABICACHE_READONLY_DIRS", raising=False)
    monkeypatch.delenv("ABICACHE_REBUILD", raising=False)
    layer = tmp_path / "layer"
    ext = abicache.TorchOpsExtension(**example_spec("cpu"), cache_dir=str(layer))
    spec, env, root, _ = _native_path.native_args(ext)
    built = _native.build(spec, env, root, str(layer))
    hit = _native.build(spec, env, root, str(layer))
    assert (built["hit"], hit["hit"], "layer" in built, "layer" in hit) == (False, True, False, False)
    own = tmp_path / "own"
    from_layer = _native.build(spec, env, root, str(own), layers=[str(layer)])
    assert from_layer["hit"] and from_layer["layer"] is True, from_layer
    assert from_layer["path"] == hit["path"]
    assert not (own / "v1" / "entries").exists() or not any((own / "v1" / "entries").iterdir())
