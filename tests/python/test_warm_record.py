"""The warm-load record (issue 12): a warm ``TorchOpsExtension.load()`` in a
fresh process is answered without importing ``abicache._native``, counts its
hit, and gives way to the native path after any change a hit depends on:
an edited source, a changed variable, a tampered library.

Each load runs in its own interpreter (a warm path is per process), on the
stable-ABI example copied into a private directory (a ~2 s build)."""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path
from typing import Any, Dict, Optional, Tuple

import pytest
from _util import EXAMPLES, example_spec, run_python

# The racy window of stamps (abicache_fs::RACY_WINDOW) plus a margin: a
# record is only written for an entry whose files are older than that.
RACY_WINDOW_S = 2.1

LOAD = """
ext = abicache.TorchOpsExtension("stable_scale", [ARGS["source"]], required_ops=["scale_shift"],
                                 torch_stable_abi_target=[2, 10], cache_dir=CACHE)
path = ext.load()
out = torch.ops.stable_scale.scale_shift(torch.ones(3), 2.0, 1.0).tolist()
emit({"native": "abicache._native" in sys.modules, "key": ext._loaded_key, "path": path, "out": out})
"""


def _load(source: Path, cache: Path, env: Optional[Dict[str, str]] = None) -> Dict[str, Any]:
    return run_python(LOAD, cache, args={"source": str(source)}, env=env)


def _stats(cache: Path) -> Dict[str, Any]:
    return run_python("emit(abicache.stats(CACHE))", cache)


def _build_and_write_record(
    code: str, cache: Path, args: Dict[str, Any], env: Optional[Dict[str, str]] = None
) -> Tuple[Dict[str, Any], Path]:
    """Runs ``code`` twice in fresh interpreters, the racy window between:
    the first builds (native path), the second is a native hit, which writes
    the warm-load record. Returns the first run's output and the record's
    file (the one file in ``v1/warm``)."""
    built = run_python(code, cache, args=args, env=env)
    assert built["native"], "the first load builds on the native path"
    time.sleep(RACY_WINDOW_S)
    second = run_python(code, cache, args=args, env=env)
    assert second["native"], "no record yet: the entry was younger than the racy window"
    records = list((cache / "v1" / "warm").iterdir())
    assert len(records) == 1, "the native hit wrote one record"
    return built, records[0]


@pytest.fixture()
def warm(tmp_path: Path) -> Dict[str, Any]:
    """The example built, aged past the racy window, and loaded once more
    (the native path, which writes the record)."""
    src = tmp_path / "src"
    shutil.copytree(EXAMPLES / "stable_scale", src)
    cache = tmp_path / "cache"
    source = src / "scale.cpp"
    built, record = _build_and_write_record(LOAD, cache, {"source": str(source)})
    assert built["out"] == [3.0, 3.0, 3.0]
    return {"source": source, "cache": cache, "key": built["key"], "path": built["path"], "record": record}


def test_a_warm_load_takes_no_native_call_and_counts_its_hit(warm: Dict[str, Any]) -> None:
    before = _stats(warm["cache"])["hits"]
    third = _load(warm["source"], warm["cache"])
    assert not third["native"], "the warm record answered without the native module"
    assert (third["key"], third["path"], third["out"]) == (warm["key"], warm["path"], [3.0, 3.0, 3.0])
    assert _stats(warm["cache"])["hits"] == before + 1
    record = json.loads(warm["record"].read_text())
    assert record["key"] == warm["key"] and record["library"] == warm["path"]
    assert any(row[0] == str(warm["source"]) for row in record["stat"]), "the source is a dependency"


def test_a_warm_hit_sets_last_used_unless_it_was_set_in_the_last_ten_seconds(warm: Dict[str, Any]) -> None:
    last_used = Path(json.loads(warm["record"].read_text())["last_used"])
    hour_ago = time.time_ns() - 3600 * 10**9
    os.utime(last_used, ns=(hour_ago, hour_ago))
    assert not _load(warm["source"], warm["cache"])["native"]
    assert time.time_ns() - last_used.stat().st_mtime_ns < 60 * 10**9, "an hour-old last-used is set to now"
    # Set a second ago: the next hit leaves it as it is (when it checks
    # within the 10 s; a machine too slow for that must see it set again).
    second_ago = time.time_ns() - 10**9
    os.utime(last_used, ns=(second_ago, second_ago))
    started = time.monotonic()
    assert not _load(warm["source"], warm["cache"])["native"]
    if time.monotonic() - started < 8:
        assert last_used.stat().st_mtime_ns == second_ago, "set within 10 s: left as it is"
    else:
        assert last_used.stat().st_mtime_ns > second_ago
    # In the future (a clock set back): set to now.
    future = time.time_ns() + 3600 * 10**9
    os.utime(last_used, ns=(future, future))
    assert not _load(warm["source"], warm["cache"])["native"]
    assert last_used.stat().st_mtime_ns < future - 3000 * 10**9
    # Removed: created again.
    last_used.unlink()
    assert not _load(warm["source"], warm["cache"])["native"]
    assert last_used.is_file()


def test_an_edited_source_is_a_new_key_not_the_record(warm: Dict[str, Any]) -> None:
    source = warm["source"]
    source.write_text(source.read_text().replace("dst[i] = src[i] * s + t;", "dst[i] = src[i] * s + t + 1;"))
    edited = _load(source, warm["cache"])
    assert edited["native"] and edited["key"] != warm["key"]
    assert edited["out"] == [4.0, 4.0, 4.0], "the edited source was built and loaded"


def test_a_changed_variable_a_hit_reads_takes_the_native_path(warm: Dict[str, Any]) -> None:
    # A variable that only configures builds, gc or the remote changes no hit.
    other = _load(warm["source"], warm["cache"], env={"ABICACHE_LOCK_TIMEOUT": "7", "MAX_JOBS": "1"})
    assert not other["native"] and other["key"] == warm["key"]
    changed = _load(warm["source"], warm["cache"], env={"ABICACHE_DIR": str(warm["cache"].parent / "elsewhere")})
    assert changed["native"] and changed["key"] == warm["key"]
    rebuild = _load(warm["source"], warm["cache"], env={"ABICACHE_REBUILD": "1"})
    assert rebuild["native"], "ABICACHE_REBUILD bypasses the record"


def _cpu_flags() -> set:
    with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
        for line in f:
            if line.startswith(("flags", "Features")):
                return set(line.partition(":")[2].split())
    return set()


def test_a_path_finding_the_same_compiler_stays_warm_and_a_wrapper_adding_a_flag_is_another_key(
    warm: Dict[str, Any], tmp_path: Path
) -> None:
    # Every key carries what the host compiler enables by itself
    # (`compiler_isa`), so the record depends on which compiler `PATH`
    # finds, not on `PATH`'s text: an activated venv (a directory without a
    # compiler put first) or a directory linking to the same compiler is
    # still a warm hit. A `c++` wrapper adding a target flag, as Cray's and
    # Spack's do, found first is another compiler: the native path, another
    # key, and a manifest recording what the wrapper's flag requires.
    path = os.environ.get("PATH", "")
    real = shutil.which("c++")
    assert real, "the tests need a host compiler (`c++` on PATH)"
    venv_bin = tmp_path / "venv-bin"
    venv_bin.mkdir()
    (venv_bin / "python-tool").write_text("#!/bin/sh\n")
    (venv_bin / "python-tool").chmod(0o755)
    linked = tmp_path / "linked"
    linked.mkdir()
    (linked / "c++").symlink_to(real)
    for changed in (f"{venv_bin}:{path}", f"{linked}:{path}", f"{path}:{venv_bin}:{path}"):
        again = _load(warm["source"], warm["cache"], env={"PATH": changed})
        assert not again["native"], f"PATH={changed} finds the same compiler: still the record's"
        assert (again["key"], again["path"]) == (warm["key"], warm["path"])

    feature = next((f for f in ("avx2", "sse4_2", "asimddp") if f in _cpu_flags()), None)
    if feature is None:
        pytest.skip("this CPU has none of avx2, sse4_2, asimddp for the wrapper to add")
    flag = {"avx2": "-mavx2", "sse4_2": "-msse4.2", "asimddp": "-march=armv8.2-a+dotprod"}[feature]
    wrapped = tmp_path / "wrapped"
    wrapped.mkdir()
    (wrapped / "c++").write_text(f'#!/bin/sh\nexec {real} {flag} "$@"\n')
    (wrapped / "c++").chmod(0o755)
    other = _load(warm["source"], warm["cache"], env={"PATH": f"{wrapped}:{path}"})
    assert other["native"], "a wrapper found first is another compiler: not the record's"
    assert other["key"] != warm["key"], f"the wrapper's {flag} is in the key"
    assert other["out"] == [3.0, 3.0, 3.0]
    manifest = json.loads((warm["cache"] / "v1" / "entries" / other["key"] / "manifest.json").read_text())
    assert any(r["feature"] == feature and str(wrapped / "c++") in r["flag"] for r in manifest["isa"]), manifest
    # Back to the plain compiler: the first key, warm again.
    back = _load(warm["source"], warm["cache"], env={"PATH": f"{venv_bin}:{path}"})
    assert not back["native"] and back["key"] == warm["key"]


def test_a_tampered_library_is_never_loaded_from_the_record(warm: Dict[str, Any]) -> None:
    library = Path(warm["path"])
    data = bytearray(library.read_bytes())
    data[-1] ^= 0xFF  # same size, other bytes (a new ctime)
    library.write_bytes(bytes(data))
    corrupt_before = _stats(warm["cache"])["corrupt"]
    after = _load(warm["source"], warm["cache"])
    assert after["native"], "the record no longer matches the library's stamp"
    assert after["out"] == [3.0, 3.0, 3.0], "the native path discarded the entry and rebuilt it"
    assert _stats(warm["cache"])["corrupt"] == corrupt_before + 1


def test_a_foreign_writable_record_dir_is_ignored(warm: Dict[str, Any]) -> None:
    warm_dir = warm["record"].parent
    warm_dir.chmod(0o777)
    try:
        assert _load(warm["source"], warm["cache"])["native"], "a record others could write is not trusted"
    finally:
        warm_dir.chmod(0o700)
    assert not _load(warm["source"], warm["cache"])["native"]



# The load with gc run (no grace, everything evictable) inside the first
# `dlopen` (`ctypes.CDLL`, which `torch.ops.load_library` calls too), just
# before the real one: gc evicts the entry exactly between the checks (of the
# record, or of the native lookup) and the load, as it could at any time.
LOAD_EVICTED = """
import ctypes
from abicache import _native
real_cdll = ctypes.CDLL
gone = []
def evict_then_load(name, *args, **kwargs):
    if not gone:
        os.environ["ABICACHE_GC_GRACE"] = "0"
        _native.cli_main(["abicache", "--cache-dir", CACHE, "gc", "--max-size", "0", "--json"])
        del os.environ["ABICACHE_GC_GRACE"]
        gone.append(not os.path.exists(os.path.realpath(name)))
    return real_cdll(name, *args, **kwargs)
ctypes.CDLL = evict_then_load
ext = abicache.TorchOpsExtension("stable_scale", [ARGS["source"]], required_ops=["scale_shift"],
                                 torch_stable_abi_target=[2, 10], cache_dir=CACHE)
path = ext.load()
out = torch.ops.stable_scale.scale_shift(torch.ones(3), 2.0, 1.0).tolist()
emit({"gone": gone, "native_path": "abicache._native_path" in sys.modules, "out": out})
"""


def test_gc_evicting_the_entry_between_the_checks_and_the_load_is_a_miss_not_an_oserror(
    warm: Dict[str, Any],
) -> None:
    # The warm path: the record's checks pass, the entry is evicted before
    # the `dlopen`, which loads the checked file from its open descriptor.
    evictions = _stats(warm["cache"])["evictions"]
    first = run_python(LOAD_EVICTED, warm["cache"], args={"source": str(warm["source"])})
    assert first == {"gone": [True], "native_path": False, "out": [3.0, 3.0, 3.0]}
    assert _stats(warm["cache"])["evictions"] == evictions + 1
    # The native path (the entry was rebuilt; no record yet): the lookup
    # verifies the entry, which is evicted before the load; still loaded.
    for record in (warm["cache"] / "v1" / "warm").iterdir():
        record.unlink()
    second = run_python(LOAD_EVICTED, warm["cache"], args={"source": str(warm["source"])})
    assert second == {"gone": [True], "native_path": True, "out": [3.0, 3.0, 3.0]}
    assert _stats(warm["cache"])["evictions"] == evictions + 2


# The library swapped (renamed over by a planted file) inside the first
# `dlopen`, after every check: what is loaded is still the file checked.
LOAD_SWAPPED = """
import ctypes
real_cdll = ctypes.CDLL
swapped = []
def swap_then_load(name, *args, **kwargs):
    if not swapped:
        library = os.path.realpath(name)
        planted = library + ".planted"
        with open(planted, "wb") as f:
            f.write(b"not a library")
        os.replace(planted, library)
        swapped.append(library)
    return real_cdll(name, *args, **kwargs)
ctypes.CDLL = swap_then_load
ext = abicache.TorchOpsExtension("stable_scale", [ARGS["source"]], required_ops=["scale_shift"],
                                 torch_stable_abi_target=[2, 10], cache_dir=CACHE)
path = ext.load()
out = torch.ops.stable_scale.scale_shift(torch.ones(3), 2.0, 1.0).tolist()
emit({"swapped": swapped == [path], "native_path": "abicache._native_path" in sys.modules, "out": out})
"""


def test_a_library_swapped_after_its_checks_is_never_what_is_loaded(warm: Dict[str, Any]) -> None:
    # Both readers used to check the library by path and then hand the path
    # to the loader, which resolved it again: the swapped-in file was loaded.
    for expect_native in (False, True):
        out = run_python(LOAD_SWAPPED, warm["cache"], args={"source": str(warm["source"])})
        assert out == {"swapped": True, "native_path": expect_native, "out": [3.0, 3.0, 3.0]}
        # The next load finds the swapped file and rebuilds (no record then).
        for record in (warm["cache"] / "v1" / "warm").iterdir():
            record.unlink()


def test_a_cache_under_a_directory_others_can_write_is_refused(warm: Dict[str, Any]) -> None:
    # A group member could swap the cache root between the check and the load.
    above = warm["cache"].parent
    mode = above.stat().st_mode & 0o7777
    above.chmod(0o775)
    try:
        out = run_python(
            """
try:
    abicache.TorchOpsExtension("stable_scale", [ARGS["source"]], required_ops=["scale_shift"],
                               torch_stable_abi_target=[2, 10], cache_dir=CACHE).load()
    emit({"loaded": True})
except abicache.Error as e:
    emit({"loaded": False, "error": str(e), "native": "abicache._native_path" in sys.modules})
""",
            warm["cache"], args={"source": str(warm["source"])},
        )
    finally:
        above.chmod(mode)
    assert not out["loaded"] and out["native"], out
    assert f"`{above}` above it has mode 0775" in out["error"], out["error"]


# A CUDA extension: the record holds what its environment depends on beyond
# a CPU one's (nvcc's search and stamp, the arch list), compared by value.
CUDA_LOAD = """
from abicache import _warm_record
ext = abicache.TorchOpsExtension("cuda_axpy", ARGS["sources"], required_ops=["axpy"], cache_dir=CACHE)
if ARGS.get("check_only"):
    # The reader alone (no load): does the record answer in this environment?
    record = _warm_record.check_record(_warm_record.record_name(ext._spec, ext._root, ext.cache_dir), CACHE)
    emit({"answers": record is not None})
else:
    path = ext.load()
    emit({"native": "abicache._native" in sys.modules, "key": ext._loaded_key, "path": path,
          "op": hasattr(torch.ops.cuda_axpy, "axpy")})
"""


def test_a_cuda_extension_gets_a_record_that_checks_nvcc_and_the_arch_list(tmp_path: Path) -> None:
    # The arch list from TORCH_CUDA_ARCH_LIST (no `cuda_archs`), nvcc from
    # the venv's NVIDIA wheels; `shadow/` (empty) is searched first on PATH.
    # No GPU is needed: a CUDA library loads without one.
    src = tmp_path / "src"
    shutil.copytree(EXAMPLES / "cuda_axpy", src)
    cache = tmp_path / "cache"
    shadow = tmp_path / "shadow"
    shadow.mkdir()
    env = {"TORCH_CUDA_ARCH_LIST": "9.0", "PATH": f"{shadow}:{os.environ.get('PATH', '')}"}
    args = {"sources": [str(src / "ops.cpp"), str(src / "axpy_kernel.cu")]}
    built, record_file = _build_and_write_record(CUDA_LOAD, cache, args, env)
    assert built["op"]
    record = json.loads(record_file.read_text())
    environ = dict(record["environ"])
    assert environ["TORCH_CUDA_ARCH_LIST"] == "9.0" and environ["PATH"] == env["PATH"]
    assert str(shadow / "nvcc") in record["missing"], "an nvcc appearing earlier on PATH is a miss"
    assert any(row[0].endswith("/bin/nvcc") for row in record["stat"]), "nvcc's stamp"
    assert record["gpus"] is None, "the arch list came from the variable: no GPU check"

    warm = run_python(CUDA_LOAD, cache, args=args, env=env)
    assert not warm["native"], "the record answered: no native module, no nvcc search, no nvidia-smi"
    assert (warm["key"], warm["path"], warm["op"]) == (built["key"], built["path"], True)

    check = dict(args, check_only=True)
    assert run_python(CUDA_LOAD, cache, args=check, env=env)["answers"]
    assert not run_python(CUDA_LOAD, cache, args=check, env=dict(env, TORCH_CUDA_ARCH_LIST="8.0"))["answers"]
    assert not run_python(CUDA_LOAD, cache, args=check, env=dict(env, CUDA_HOME=str(tmp_path)))["answers"]
    (shadow / "nvcc").write_text("#!/bin/sh\nexit 1\n")
    (shadow / "nvcc").chmod(0o755)
    assert not run_python(CUDA_LOAD, cache, args=check, env=env)["answers"], "another nvcc is found first"


# An extension with a native CPU flag (DeepSpeed's ops build with
# `-march=native`): the record holds the CPU the flag was resolved on and the
# host compiler that resolved it (`CXX` by value, the file found on `PATH`).
NATIVE_LOAD = """
from abicache import _cpu, _warm_record
ext = abicache.TorchOpsExtension("stable_scale", [ARGS["source"]], required_ops=["scale_shift"],
                                 extra_cflags=["-O2", "-march=native"],
                                 torch_stable_abi_target=[2, 10], cache_dir=CACHE)
if ARGS.get("cpu_identity") is not None:
    # Another CPU cannot exist on this machine: the reader is told this one
    # reads differently (its one read of /proc/cpuinfo, replaced).
    _cpu._cpuinfo = (ARGS["cpu_identity"], _cpu.running_cpu()[1])
if ARGS.get("check_only"):
    record = _warm_record.check_record(_warm_record.record_name(ext._spec, ext._root, ext.cache_dir), CACHE)
    emit({"answers": record is not None})
else:
    path = ext.load()
    out = torch.ops.stable_scale.scale_shift(torch.ones(3), 2.0, 1.0).tolist()
    emit({"native": "abicache._native" in sys.modules, "key": ext._loaded_key, "path": path, "out": out,
          "cpu": _cpu.running_cpu()[0] if "abicache._native" not in sys.modules else None})
"""


def test_a_native_cpu_flag_extension_gets_a_record_that_checks_the_cpu_and_the_compiler(tmp_path: Path) -> None:
    src = tmp_path / "src"
    shutil.copytree(EXAMPLES / "stable_scale", src)
    cache = tmp_path / "cache"
    shadow = tmp_path / "shadow"
    shadow.mkdir()
    env = {"PATH": f"{shadow}:{os.environ.get('PATH', '')}"}
    env_without_cxx = {"CXX": ""}  # an empty CXX counts as unset: `c++` on PATH
    args = {"source": str(src / "scale.cpp")}
    built, record_file = _build_and_write_record(NATIVE_LOAD, cache, args, {**env, **env_without_cxx})
    assert built["out"] == [3.0, 3.0, 3.0]
    record = json.loads(record_file.read_text())
    environ = dict(record["environ"])
    assert "PATH" not in environ and environ["CXX"] == "", "PATH is searched again, not compared"
    real = os.stat(shutil.which("c++") or "")
    assert record["compiler"] == [
        "c++", [real.st_dev, real.st_ino, real.st_size, real.st_mtime_ns, real.st_ctime_ns]
    ], "the compiler searched for and the file found"
    assert record["host_cpu"] and "flags=" in record["host_cpu"]

    warm = run_python(NATIVE_LOAD, cache, args=args, env={**env, **env_without_cxx})
    assert not warm["native"], "the record answered: no native module, no compiler probe"
    assert (warm["key"], warm["path"], warm["out"]) == (built["key"], built["path"], [3.0, 3.0, 3.0])
    assert warm["cpu"] == record["host_cpu"], "the reader reads this CPU as the writer did"

    check = dict(args, check_only=True)
    assert run_python(NATIVE_LOAD, cache, args=check, env={**env, **env_without_cxx})["answers"]
    other_cpu = dict(check, cpu_identity=record["host_cpu"].replace("flags=", "flags=avx512f "))
    assert not run_python(NATIVE_LOAD, cache, args=other_cpu, env={**env, **env_without_cxx})["answers"]
    assert not run_python(NATIVE_LOAD, cache, args=check, env={**env, "CXX": "g++"})["answers"]
    # Another PATH that finds the same compiler: still the record's.
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    moved = {"PATH": f"{elsewhere}:{os.environ.get('PATH', '')}:{shadow}", **env_without_cxx}
    assert run_python(NATIVE_LOAD, cache, args=check, env=moved)["answers"]
    (shadow / "c++").write_text("#!/bin/sh\nexit 1\n")
    (shadow / "c++").chmod(0o755)
    assert not run_python(NATIVE_LOAD, cache, args=check, env={**env, **env_without_cxx})["answers"], (
        "another compiler is found first"
    )


def test_machines_with_different_cpus_sharing_a_cache_keep_one_record_each(tmp_path: Path) -> None:
    # A fleet sharing a cache: a `-march=native` record holds for one CPU
    # (`host_cpu`), so its name says which; a second CPU writes its own
    # record instead of replacing the first, which would cost each machine a
    # native-path load whenever the other loaded last. Another CPU cannot
    # exist on this machine: the second "machine" is this one with its
    # reader's one read of /proc/cpuinfo replaced (the native path, and so
    # the record it writes, still read the real CPU).
    src = tmp_path / "src"
    shutil.copytree(EXAMPLES / "stable_scale", src)
    cache = tmp_path / "cache"
    env = {"CXX": ""}
    args = {"source": str(src / "scale.cpp")}
    built, record_file = _build_and_write_record(NATIVE_LOAD, cache, args, env)
    before = (record_file.stat().st_ino, record_file.read_bytes())
    host_cpu = json.loads(before[1])["host_cpu"]

    other = dict(args, cpu_identity=host_cpu.replace("flags=", "flags=avx512f "))
    second_cpu = run_python(NATIVE_LOAD, cache, args=other, env=env)
    assert second_cpu["native"] and second_cpu["out"] == [3.0, 3.0, 3.0], "its first load: the native path"
    records = sorted(p.name for p in (cache / "v1" / "warm").iterdir())
    assert len(records) == 2 and record_file.name in records, "the second CPU wrote a record of its own"
    assert (record_file.stat().st_ino, record_file.read_bytes()) == before, "and left the first CPU's alone"

    first_again = run_python(NATIVE_LOAD, cache, args=args, env=env)
    assert not first_again["native"], "the first CPU's next load is still answered by its record"
    assert (first_again["key"], first_again["path"]) == (built["key"], built["path"])


GPU_NAMES = """
import os
from abicache import _warm_record
names = {}
for which, spec in ARGS["specs"].items():
    ext = abicache.TorchOpsExtension(cache_dir=CACHE, **spec)
    for listing in ("a", "a_again", "b", "none"):
        _warm_record.WARM_GPU_LISTING = os.path.join(ARGS["listings"], listing)
        names[which + "/" + listing] = _warm_record.record_name(ext._spec, ext._root, ext.cache_dir)
emit(names)
"""


def test_a_cuda_record_whose_arch_list_comes_from_the_gpus_is_named_by_them(tmp_path: Path) -> None:
    # Such a record holds for one set of GPUs (`gpus`: the driver's listing),
    # so machines with other GPUs sharing the cache keep their own. The
    # driver's listing cannot exist without a GPU: the reader's listing
    # directory is pointed at stand-ins (two with the same GPUs, one with
    # others, one missing). Only names are computed: nothing is built.
    listings = tmp_path / "listings"
    for listing, gpus in {"a": ["0000:01:00.0"], "a_again": ["0000:01:00.0"], "b": ["0000:01:00.0", "0000:02:00.0"]}.items():
        for gpu in gpus:
            (listings / listing / gpu).mkdir(parents=True)
    cuda = [str(EXAMPLES / "cuda_axpy" / "ops.cpp"), str(EXAMPLES / "cuda_axpy" / "axpy_kernel.cu")]
    specs = {
        "from_gpus": {"name": "cuda_axpy", "sources": cuda},
        "archs_given": {"name": "cuda_axpy", "sources": cuda, "cuda_archs": "9.0"},
        "cpu": example_spec("cpu"),
    }
    args = {"specs": specs, "listings": str(listings)}
    names = run_python(GPU_NAMES, tmp_path / "cache", args=args, env={"TORCH_CUDA_ARCH_LIST": ""})
    assert names["from_gpus/a"] == names["from_gpus/a_again"], "the same GPUs: the same record"
    assert len({names["from_gpus/a"], names["from_gpus/b"], names["from_gpus/none"]}) == 3, "other GPUs: another"
    for fixed in ("archs_given", "cpu"):
        assert len({names[f"{fixed}/{x}"] for x in ("a", "b", "none")}) == 1, f"{fixed}: the GPUs are not read"
    with_variable = run_python(GPU_NAMES, tmp_path / "cache", args=args, env={"TORCH_CUDA_ARCH_LIST": "9.0"})
    assert len({with_variable[f"from_gpus/{x}"] for x in ("a", "b", "none")}) == 1, "the variable sets the arch list"
