"""The warm-load record's Python reader (``abicache/_warm_record.py``) against
records its Rust writer wrote, and the rules the warm path restates from
Rust, value for value. Runs without torch: nothing here imports it.

The records are real: ``_native.build`` compiles a C++ file with no torch
include (real gcc) against a stand-in ``torch_dir`` whose ``lib/`` holds
empty ``libc10.so``, ``libtorch_cpu.so`` and ``libtorch.so`` (built by gcc
too; the library links them and never calls into them), then writes the
record once the entry is older than the racy window. Each check the reader
makes is then made to fail on its own, by changing the file system or the
record's recorded value, and the reader must refuse.
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import subprocess
import threading
import time
from pathlib import Path
from typing import Any, Callable, Dict, Iterator, List

import pytest

import abicache
from abicache import _cpu, _native, _warm_record

# The racy window of stamps (abicache_fs::RACY_WINDOW) plus a margin.
RACY_WINDOW_S = 2.1
ENV = {
    "python_version": "3.12.9",
    "python_soabi": "cpython-312-x86_64-linux-gnu",
    "python_abiflags": "",
    "torch_version": "2.9.1",
    "torch_cuda": None,
    "torch_hip": None,
    "cxx11_abi": True,
}


def _stand_in_torch(base: Path) -> Path:
    torch_dir = base / "torch"
    (torch_dir / "include" / "torch").mkdir(parents=True)
    (torch_dir / "lib").mkdir()
    stub = base / "stub.c"
    stub.write_text("int abicache_stub;\n")
    for lib in ("c10", "torch_cpu", "torch"):
        subprocess.run(["gcc", "-shared", "-fPIC", "-o", str(torch_dir / "lib" / f"lib{lib}.so"), str(stub)], check=True)
    return torch_dir


class Project:
    """One extension (``src/ops.cpp`` including ``detail.h`` through the
    include path ``first/`` (which does not exist) then ``include/``), its
    cache, and the record ``name`` the Rust writer wrote for it."""

    def __init__(self, base: Path, torch_dir: Path, tag: str) -> None:
        self.base = base
        self.cache = base / "cache"
        self.src = base / "src"
        (self.src / "include").mkdir(parents=True)
        (self.src / "include" / "detail.h").write_text(f"// {tag}\nint detail();\n")
        self.source = self.src / "ops.cpp"
        self.source.write_text('#include "detail.h"\nextern "C" int answer() { return 42; }\n')
        self.name = f"test-{tag}"
        self.spec = json.dumps(
            {
                "name": "ops",
                "sources": [str(self.source)],
                "extra_include_paths": [str(self.src / "first"), str(self.src / "include")],
                "python_abi_dependent": False,
            }
        )
        self.env = json.dumps(dict(ENV, torch_dir=str(torch_dir)))

    def build(self) -> Dict[str, Any]:
        return _native.build(self.spec, self.env, str(self.src), str(self.cache), quiet=True, warm_record=self.name)

    @property
    def record_path(self) -> Path:
        return self.cache / "v1" / "warm" / self.name

    def read(self) -> Any:
        """What the reader answers now (its descriptor closed)."""
        record = _warm_record.check_record(self.name, str(self.cache))
        if record is not None:
            os.close(record.pop("fd"))
        return record

    def rewrite(self, record: Dict[str, Any]) -> None:
        """Replaces the record's contents (same file, same mode)."""
        self.record_path.write_text(json.dumps(record))


def _projects(base: Path, tags: List[str]) -> Dict[str, Project]:
    """Builds one project per tag, waits out the racy window once, and has
    each written its record (a second, native, hit)."""
    torch_dir = _stand_in_torch(base)
    projects = {tag: Project(base / tag, torch_dir, tag) for tag in tags}
    for p in projects.values():
        assert not p.build()["hit"]
    time.sleep(RACY_WINDOW_S)
    for p in projects.values():
        outcome = p.build()
        assert outcome["hit"] and outcome["warm_record"], "the Rust writer wrote the record"
        assert p.read() is not None, "the reader takes the record as written"
    return projects


@pytest.fixture(scope="module")
def shared(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Project]:
    """A project whose record each record-level case rewrites (and restores)."""
    project = _projects(tmp_path_factory.mktemp("warm-reader"), ["shared"])["shared"]
    yield project


@pytest.fixture()
def record(shared: Project) -> Iterator[Dict[str, Any]]:
    """The shared project's record as written; restored after the test."""
    text = shared.record_path.read_text()
    yield json.loads(text)
    shared.record_path.write_text(text)
    assert shared.read() is not None


# --- The format: one definition, in Rust ------------------------------------


def test_the_readers_constants_are_the_writers() -> None:
    native = _native.warm_record_format()
    assert _warm_record.WARM_RECORD_FORMAT == native["format"]
    assert list(_warm_record.WARM_RECORD_FIELDS) == native["fields"]
    for kind, fields in native["rows"].items():
        assert list(getattr(abicache, f"WARM_{kind.upper()}_ROW")) == fields, kind
    assert list(_warm_record.WARM_HIT_VARIABLES) == native["hit_variables"]
    assert list(_warm_record.WARM_CUDA_HIT_VARIABLES) == native["cuda_hit_variables"]
    assert list(_warm_record.WARM_COMPILER_HIT_VARIABLES) == native["compiler_hit_variables"]


def test_the_row_positions_the_reader_indexes_are_pinned() -> None:
    # The reader indexes rows by position (fast); these are the positions
    # it is written for. A change in Rust fails here (and in the generated
    # block's Rust test) before it reaches a user.
    assert _warm_record.WARM_STAMP_ROW == ("path", "dev", "ino", "size", "mtime_ns", "ctime_ns")
    assert _warm_record.WARM_IDENTITY_ROW == ("path", "dev", "ino")
    assert _warm_record.WARM_ENTRY_ROW == ("path", "dev", "ino", "mode", "uid")
    assert _warm_record.WARM_COUNT_ROW == ("log", "line", "fold_at")
    assert _warm_record.WARM_ENVIRON_ROW == ("variable", "value")
    assert _warm_record.WARM_ISA_ROW == ("feature", "flag")
    assert _warm_record.WARM_GPUS_ROW == ("directory", "names")
    assert _warm_record.WARM_COMPILER_ROW == ("name", "found")


def test_a_written_record_has_exactly_the_defined_fields_and_row_shapes(
    shared: Project, record: Dict[str, Any]
) -> None:
    assert set(record) == set(_warm_record.WARM_RECORD_FIELDS)
    rows = _native.warm_record_format()["rows"]
    for field, kind in [("environ", "environ"), ("stat", "stamp"), ("entry_files", "stamp"),
                        ("directory", "identity"), ("same", "identity")]:
        assert record[field], f"the project exercises `{field}`"
        assert all(len(row) == len(rows[kind]) for row in record[field]), field
    assert record["missing"] == [str(shared.src / "first")]
    assert len(record["entry"]) == len(rows["entry"]) and len(record["count"]) == len(rows["count"])
    assert record["gpus"] is None, "a CPU extension has no GPU check"
    if "/" not in os.environ.get("CXX", ""):
        name, found = record["compiler"]
        assert name == (os.environ.get("CXX") or "c++") and len(found) == 5, "the compiler searched for and found"


# --- Each check, made to fail by the recorded value --------------------------


def _first(field: str, index: int, delta: int) -> Callable[[Dict[str, Any]], None]:
    def change(r: Dict[str, Any]) -> None:
        r[field][0][index] += delta

    return change


def _entry(index: int, delta: int) -> Callable[[Dict[str, Any]], None]:
    def change(r: Dict[str, Any]) -> None:
        r["entry"][index] += delta

    return change


def _library_row(index: int) -> Callable[[Dict[str, Any]], None]:
    def change(r: Dict[str, Any]) -> None:
        row = next(row for row in r["entry_files"] if row[0] == r["library"])
        row[index] += 1

    return change


def _manifest_row(r: Dict[str, Any]) -> None:
    row = next(row for row in r["entry_files"] if row[0] != r["library"])
    row[3] += 1


def _environ(r: Dict[str, Any]) -> None:
    r["environ"] = [[var, "elsewhere" if var == "XDG_CACHE_HOME" else value] for var, value in r["environ"]]


def _missing_exists(r: Dict[str, Any]) -> None:
    r["missing"].append(r["stat"][0][0])


def _directory_is_a_file(r: Dict[str, Any]) -> None:
    path, dev, ino = r["stat"][-1][:3]
    r["directory"].append([path, dev, ino])


def _same_other(r: Dict[str, Any]) -> None:
    r["same"][0][2] += 1


RECORD_CHECKS = {
    "format version": lambda r: r.update(format=r["format"] + 1),
    "variable value": _environ,
    "stat dev": _first("stat", 1, 1),
    "stat inode": _first("stat", 2, 1),
    "stat size": _first("stat", 3, 1),
    "stat mtime": _first("stat", 4, 1),
    "stat ctime": _first("stat", 5, 1),
    "stat of a vanished path": lambda r: r["stat"][0].__setitem__(0, r["stat"][0][0] + ".gone"),
    "missing path exists": _missing_exists,
    "directory inode": _first("directory", 2, 1),
    "directory is not a directory": _directory_is_a_file,
    "same inode": _same_other,
    "entry inode": _entry(2, 1),
    "entry mode": _entry(3, 1),
    "entry owner": _entry(4, 1),
    "manifest stamp": _manifest_row,
    "library size": _library_row(3),
    "library ctime": _library_row(5),
    "a missing key": lambda r: r.pop("same"),
    "gpus listing differs": lambda r: r.update(gpus=["/nonexistent-gpu-listing", ["0000:01:00.0"]]),
    "isa feature this CPU lacks": lambda r: r.update(isa=[["abicache_no_such_feature", "-mno-such"]]),
    "isa not recorded": lambda r: r.pop("isa"),
    "compiler found differs": lambda r: r["compiler"][1].__setitem__(1, r["compiler"][1][1] + 1),
    "compiler found where none was": lambda r: r["compiler"].__setitem__(1, None),
    "compiler searched for is another": lambda r: r["compiler"].__setitem__(0, "abicache-no-such-c++"),
}


@pytest.mark.parametrize("check", sorted(RECORD_CHECKS))
def test_each_recorded_check_refuses_when_it_differs(check: str, shared: Project, record: Dict[str, Any]) -> None:
    RECORD_CHECKS[check](record)
    shared.rewrite(record)
    assert shared.read() is None, check


def test_an_isa_requirement_is_waived_only_by_isa_check_0(
    shared: Project, record: Dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    record["isa"] = [["abicache_no_such_feature", "-mno-such"]]
    shared.rewrite(record)
    monkeypatch.setenv("ABICACHE_ISA_CHECK", "0")
    assert shared.read() is not None
    monkeypatch.setenv("ABICACHE_ISA_CHECK", "maybe")
    assert shared.read() is None, "an invalid value is left to the native path (its error)"


def test_the_gpu_listing_is_compared_with_the_recorded_one(
    shared: Project, record: Dict[str, Any], tmp_path: Path
) -> None:
    # No GPU here: the record names the directory the reader lists (the
    # writer records `/proc/driver/nvidia/gpus`), so a fake listing stands
    # in for the driver's.
    gpus = tmp_path / "gpus"
    (gpus / "0000:01:00.0").mkdir(parents=True)
    record["gpus"] = [str(gpus), ["0000:01:00.0"]]
    shared.rewrite(record)
    assert shared.read() is not None, "the same GPUs"
    (gpus / "0000:02:00.0").mkdir()
    assert shared.read() is None, "a GPU added"
    shutil.rmtree(gpus)
    assert shared.read() is None, "no listing"
    record["gpus"] = [str(gpus), None]
    shared.rewrite(record)
    assert shared.read() is not None, "no listing, as recorded"


def test_a_record_others_can_write_or_not_json_is_refused(shared: Project, record: Dict[str, Any]) -> None:
    shared.record_path.chmod(0o666)
    try:
        assert shared.read() is None, "a record others can write"
    finally:
        shared.record_path.chmod(0o600)
    shared.record_path.write_text("{not json")
    assert shared.read() is None


def test_a_cache_directory_others_can_write_is_refused(shared: Project, record: Dict[str, Any]) -> None:
    for path in (shared.cache, shared.cache / "v1", shared.cache / "v1" / "warm", shared.cache / "v1" / "entries"):
        mode = path.stat().st_mode & 0o7777
        path.chmod(0o777)
        try:
            assert shared.read() is None, path
        finally:
            path.chmod(mode)
    assert shared.read() is not None


def test_a_parent_others_can_write_without_the_sticky_bit_is_refused(shared: Project, record: Dict[str, Any]) -> None:
    parent = shared.base
    mode = parent.stat().st_mode & 0o7777
    parent.chmod(0o777)
    try:
        assert shared.read() is None
        parent.chmod(0o1777)
        assert shared.read() is not None, "the sticky bit makes it safe"
    finally:
        parent.chmod(mode)


def test_a_cache_reached_through_symlinks_or_dots_is_judged_by_its_real_path(
    shared: Project, record: Dict[str, Any], tmp_path: Path
) -> None:
    # The root a symlink, a symlink above the root, and `..` in the root:
    # each reads the record while the real path is safe, and none does once
    # a directory above the real root is writable by others.
    (tmp_path / "root-link").symlink_to(shared.cache)
    (tmp_path / "above-link").symlink_to(shared.base)
    roots = [tmp_path / "root-link", tmp_path / "above-link" / "cache", shared.base / "src" / ".." / "cache"]

    def read(root: Path) -> Any:
        found = _warm_record.check_record(shared.name, str(root))
        if found is not None:
            os.close(found.pop("fd"))
        return found

    for root in roots:
        assert read(root) is not None, root
    mode = shared.base.stat().st_mode & 0o7777
    shared.base.chmod(0o777)
    try:
        for root in roots:
            assert read(root) is None, root
    finally:
        shared.base.chmod(mode)


# --- Each check, made to fail by the file system -----------------------------


@pytest.fixture(scope="module")
def fresh(tmp_path_factory: pytest.TempPathFactory) -> Dict[str, Project]:
    """One project per file-system case, each changed by one test."""
    tags = ["edited", "appears", "replaced", "tampered", "logs"]
    return _projects(tmp_path_factory.mktemp("warm-reader-fs"), tags)


def test_an_edited_source_fails_its_stamp(fresh: Dict[str, Project]) -> None:
    p = fresh["edited"]
    p.source.write_text(p.source.read_text() + "// edited\n")
    assert p.read() is None


def test_a_header_appearing_earlier_in_the_include_path_fails_missing(fresh: Dict[str, Project]) -> None:
    p = fresh["appears"]
    (p.src / "first").mkdir()
    (p.src / "first" / "detail.h").write_text("int shadowing;\n")
    assert p.read() is None


def test_a_replaced_include_directory_fails_its_identity(fresh: Dict[str, Project]) -> None:
    p = fresh["replaced"]
    include = p.src / "include"
    include.rename(p.src / "include.old")
    shutil.copytree(p.src / "include.old", include)
    assert p.read() is None


def test_a_tampered_library_fails_the_entry_stamps(fresh: Dict[str, Project]) -> None:
    p = fresh["tampered"]
    library = Path(json.loads(p.record_path.read_text())["library"])
    data = bytearray(library.read_bytes())
    data[-1] ^= 0xFF
    library.write_bytes(bytes(data))
    assert p.read() is None


def test_the_touch_of_last_used_waits_while_gc_holds_it(shared: Project, record: Dict[str, Any]) -> None:
    # gc holds `last-used` exclusively from its last re-read of an old time
    # to the entry's removal (crates/abicache-store/src/last_used.rs); the reader
    # touches it under a shared lock, so its touch falls before that re-read
    # or after the removal, never between them.
    last_used = record["last_used"]
    os.utime(last_used, (1_000_000, 1_000_000))
    fd = os.open(last_used, os.O_WRONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        answers: List[Any] = []
        reader = threading.Thread(target=lambda: answers.append(shared.read()))
        reader.start()
        reader.join(0.3)
        assert reader.is_alive(), "the reader touched `last-used` while gc held it"
    finally:
        os.close(fd)
    reader.join()
    assert answers[0] is not None
    assert time.time() - os.stat(last_used).st_mtime < 60, "touched once gc let go"


def test_a_changed_variable_fails_the_environ_check(shared: Project, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", "/elsewhere")
    assert shared.read() is None
    monkeypatch.setenv("ABICACHE_REBUILD", "")
    assert shared.read() is None


# --- The counter log: Rust's protocol (stats_log.rs), followed in Python -----


def test_a_hit_appended_by_the_reader_is_counted_by_rust(fresh: Dict[str, Project]) -> None:
    p = fresh["logs"]
    before = _native.stats(str(p.cache))["hits"]
    record = _warm_record.check_record(p.name, str(p.cache))
    assert record is not None
    os.close(record["fd"])
    assert _warm_record.count_hit(record)
    assert _warm_record.count_hit(record)
    assert _native.stats(str(p.cache))["hits"] == before + 2, "Rust reads the lines Python appended"


def test_the_counter_log_is_left_to_rust_when_missing_replaced_or_due(fresh: Dict[str, Project], tmp_path: Path) -> None:
    p = fresh["logs"]
    record = _warm_record.check_record(p.name, str(p.cache))
    assert record is not None
    os.close(record["fd"])
    log, line, fold_at = record["count"]
    assert _warm_record.count_hit(dict(record, count=[log, line, os.path.getsize(log) - 1])) is False, "due for a fold"
    assert _warm_record.count_hit(dict(record, count=[str(tmp_path / "absent.log"), line, fold_at])) is False
    target = tmp_path / "elsewhere.log"
    target.write_text("")
    link = tmp_path / "link.log"
    link.symlink_to(target)
    assert _warm_record.count_hit(dict(record, count=[str(link), line, fold_at])) is False, "a symlink"
    assert target.read_text() == ""


# --- Rules restated from Rust, value for value --------------------------------

ROOT_CASES = [
    {"ABICACHE_DIR": "/c"},
    {"ABICACHE_DIR": "/c/", "XDG_CACHE_HOME": "/x"},
    {"ABICACHE_DIR": "relative/c"},
    {"ABICACHE_DIR": "  ", "XDG_CACHE_HOME": "/x"},
    {"ABICACHE_DIR": "", "XDG_CACHE_HOME": "/x/", "HOME": "/h"},
    {"ABICACHE_DIR": "\t", "XDG_CACHE_HOME": "x", "HOME": "/h"},
    {"XDG_CACHE_HOME": " /x", "HOME": "/h"},
    {"XDG_CACHE_HOME": "", "HOME": "/h/"},
    {"HOME": "/h"},
    {"HOME": " "},
    {"HOME": "relative-home"},
    {"ABICACHE_DIR": " /c "},
    {},
]


@pytest.mark.parametrize("env", ROOT_CASES, ids=[json.dumps(c) for c in ROOT_CASES])
def test_the_cache_root_is_rusts(env: Dict[str, str], monkeypatch: pytest.MonkeyPatch) -> None:
    for var in ("ABICACHE_DIR", "XDG_CACHE_HOME", "HOME"):
        monkeypatch.delenv(var, raising=False)
    for var, value in env.items():
        monkeypatch.setenv(var, value)
    try:
        rust = _native.default_cache_dir()
    except _native.Error:
        rust = None
    assert _warm_record.cache_root(None) == rust
    assert _warm_record.cache_root("/given") == "/given"


REBUILD_VALUES = [None, "", " ", "\t\n", "1", " 1 ", "0", " 0\t", "true", "yes", "no", "false", "2", "01", "\x0b", "\x0b1"]


@pytest.mark.parametrize("value", REBUILD_VALUES, ids=[repr(v) for v in REBUILD_VALUES])
def test_abicache_rebuild_is_parsed_by_one_rule(value: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    # The variable table (docs/reference/env-vars.md): `1` rebuilds; unset
    # (or blank) or `0` does not; anything else is refused with an error
    # naming the variable. Python only asks whether it is set (then the
    # native path reads it, by Rust's rule).
    if value is None:
        monkeypatch.delenv("ABICACHE_REBUILD", raising=False)
    else:
        monkeypatch.setenv("ABICACHE_REBUILD", value)
    try:
        rust: Any = _native.rebuild_requested()
    except _native.Error as e:
        assert "ABICACHE_REBUILD" in str(e)
        rust = "error"
    assert _warm_record.rebuild_set() == (rust is not False), "the record answers exactly when Rust reads `no rebuild`"
    expected = "error"
    if value is None or value.strip(" \t\n\r\x0c") in ("", "0"):
        expected = False
    elif value.strip(" \t\n\r\x0c") == "1":
        expected = True
    assert rust == expected


ROOT_SPECS = [
    (["/p/a.cpp"], []),
    (["/p/src/a.cpp", "/p/b.cu"], ["/p/include"]),
    (["/p/src/a.cpp"], ["/p/src"]),
    (["/p/ab/a.cpp", "/p/abc/b.cpp"], []),
    (["/a/x.cpp", "/b/y.cpp"], []),
    (["/p/q/../r/a.cpp"], ["/p/inc"]),
]


@pytest.mark.parametrize("sources,includes", ROOT_SPECS, ids=[str(s) for s in ROOT_SPECS])
def test_the_fingerprint_root_is_rusts_and_keeps_the_old_rule(sources: List[str], includes: List[str]) -> None:
    from abicache import _native_path

    ext = abicache.TorchOpsExtension("x", sources, extra_include_paths=includes)
    old_rule = os.path.commonpath([os.path.dirname(p) for p in ext.sources + [p + os.sep for p in ext.extra_include_paths]])
    assert _native_path.root(ext) == old_rule
    assert _native_path.root(abicache.TorchOpsExtension("x", sources, fingerprint_root="/given")) == "/given"


@pytest.mark.parametrize("chunk", [7, 100, 1000, 1 << 20])
def test_the_cpu_identity_is_the_first_processors_whatever_sizes_the_reads_return(
    chunk: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    # This machine's /proc/cpuinfo, returned `chunk` bytes per read (the
    # kernel returns a few processors per read; a line may be cut anywhere).
    with open("/proc/cpuinfo", "rb") as f:
        text = f.read()
    first = text.decode().split("\n\n")[0].strip("\n")
    expected = "".join(
        f"{field.strip()}={value.strip()}\n"
        for field, _, value in (line.partition(":") for line in first.split("\n"))
        if field.strip() in _warm_record.WARM_CPU_IDENTITY_FIELDS
    )
    assert "flags=" in expected or "Features=" in expected
    served = [0]
    real_read = os.read

    def read(fd: int, n: int) -> bytes:
        if os.readlink(f"/proc/self/fd/{fd}") != "/proc/cpuinfo":
            return real_read(fd, n)
        data = text[served[0] : served[0] + min(n, chunk)]
        served[0] += len(data)
        return data

    monkeypatch.setattr(_cpu, "_cpuinfo", None)
    monkeypatch.setattr(os, "read", read)
    identity, names = _cpu.running_cpu()
    assert identity == expected
    assert names and all(f" {name}" in f" {first}" for name in names)
