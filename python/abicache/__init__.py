"""abicache: build, cache and load JIT-compiled PyTorch extensions under a
key that reflects what each binary really depends on.

    import abicache
    ext = abicache.TorchOpsExtension("muladd_example", ["ops.cpp", "kernel.cpp"], required_ops=["muladd"])
    ext.load()          # a cache hit, or one build shared by every process and venv that can use it
    torch.ops.muladd_example.muladd(a, b, 1.0)

``abicache.load`` and ``abicache.load_inline`` have the signatures of
``torch.utils.cpp_extension.load`` and ``load_inline``.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import stat
import sys
import threading
import time
from typing import TYPE_CHECKING, Any, Callable, Dict, Iterable, List, Optional, Sequence, Set, Tuple, Union

# `_native` and `_env` are imported on first use: a warm load answered by
# the warm-load record loads no native module and probes nothing. The type
# aliases exist for type checkers only (building them costs 0.2 ms).
if TYPE_CHECKING:
    from types import ModuleType

    from ._api import default_cache_dir, prebuild, stats, torch_stable_abi_target_define
    from ._env import environment, visible_cuda_archs
    from ._inline import load_inline
    from ._intercept import intercept
    from ._native import AbiError, BuildError, Error, LockTimeout

    StrPath = Union[str, "os.PathLike[str]"]
    StableTargetLike = Union[str, Tuple[int, int], Sequence[int]]
    ProgressCallback = Callable[[Dict[str, Any]], None]

# key -> (library path, module or None): what this process has loaded.
_loaded: Dict[str, Tuple[str, Optional[ModuleType]]] = {}
# name -> lock, so threads loading one extension build and load it once.
_name_locks: Dict[str, threading.Lock] = {}
# names with at least one loaded key: only those need a scan before the build call.
_loaded_names: Set[str] = set()
# warm-load record name -> that record, once every check in it held in this
# process: a same-process repeat then only checks what the key was computed
# from (`_key_inputs_hold`, a few `stat`s), not the cache and library again.
_checked_records: Dict[str, Any] = {}
_registry_lock = threading.Lock()


# The warm path.
#
# This module is the whole warm path: ``TorchOpsExtension`` takes
# a cache hit from the warm-load record an earlier load wrote, without
# importing ``abicache._native``. Everything else (the native module, the
# environment probe, the native load path, the drop-ins, the other
# functions) is imported on first use from other modules: in a fresh
# process every module a warm load imports costs it ~0.2 ms, and every
# function this one defines ~5 us (so the checks are few, long functions).
#
# The record (``<cache>/v1/warm/<name>``) is written by the native module
# after a load (``crates/abicache/src/session/warm_load.rs`` says what it
# covers and why that is exactly what a hit depends on). Every check in it is
# an equality test; this module only runs them and takes the hit when all
# hold:
#
# - every environment variable a hit reads has the recorded value;
# - every file, directory and symlink the key's scan depended on, and the
#   native module, has the recorded stamp (``stat``), identity or absence;
# - the cache's root, ``v1``, ``v1/warm`` and ``v1/entries`` are private to
#   this user, no directory above the root is writable by others without the
#   sticky bit, and the entry directory, its manifest and its library are the
#   ones a full lookup verified (identity, owner, mode; the trusted stamps);
#   the library is opened once (``O_NOFOLLOW``), its ``fstat`` checked (also:
#   owned by this user, writable by no one else, one link) and loaded from
#   that descriptor, so the file loaded is the file checked.
# - the CPU has every instruction-set extension the library requires (only
#   read when it requires any: ``/proc/cpuinfo``).
# - for a CUDA extension: nvcc's search and stamp and the arch list's
#   variable (or the driver's GPU listing); for one with a native CPU flag
#   (``-march=native``): the host compiler's search and stamp and this
#   CPU's identity (``/proc/cpuinfo``'s first processor, read once).
#
# The entry's ``last-used`` is touched before the checks (so gc spares it
# for its grace); the hit then makes the other writes a hit makes
# (`_count_warm_hit`). Any difference or error gives ``None``, and a load
# that fails (the entry removed after the checks) is a miss: the caller
# takes the native path, which answers as before and rewrites the record.
#
# (Kept in comments, not docstrings: docstrings are loaded with the module.)

# The record format this reader understands, from its one definition in
# Rust (`crates/abicache/src/session/warm_load.rs`; row positions are
# indexed as its `WARM_*_ROW` say; tests/python/test_warm_reader.py pins them).
# BEGIN warm-record format: generated from crates/abicache/src/session/warm_load.rs; do not edit
WARM_RECORD_FORMAT = 3
WARM_RECORD_FIELDS = ("format", "key", "library", "environ", "stat", "missing", "directory", "same", "entry", "entry_files", "last_used", "count", "isa", "gpus", "host_cpu")
WARM_ENVIRON_ROW = ("variable", "value")
WARM_STAMP_ROW = ("path", "dev", "ino", "size", "mtime_ns", "ctime_ns")
WARM_IDENTITY_ROW = ("path", "dev", "ino")
WARM_ENTRY_ROW = ("path", "dev", "ino", "mode", "uid")
WARM_COUNT_ROW = ("log", "line", "fold_at")
WARM_ISA_ROW = ("feature", "flag")
WARM_GPUS_ROW = ("directory", "names")
WARM_HIT_VARIABLES = ("ABICACHE_DIR", "XDG_CACHE_HOME", "HOME", "ABICACHE_REBUILD")
WARM_CUDA_HIT_VARIABLES = ("CUDA_HOME", "CUDA_PATH", "PATH", "TORCH_CUDA_ARCH_LIST")
WARM_HOST_CPU_HIT_VARIABLES = ("CXX", "PATH")
WARM_CPU_IDENTITY_FIELDS = ("vendor_id", "cpu family", "model", "model name", "stepping", "microcode", "flags", "CPU implementer", "CPU architecture", "CPU variant", "CPU part", "CPU revision", "Features")
WARM_CPUINFO_READ = 4096
WARM_GPU_LISTING = "/proc/driver/nvidia/gpus"
# END warm-record format


def _warm_record_name(spec: Dict[str, Any], root: Optional[str], cache_dir: Optional[str]) -> str:
    # The record's name: a BLAKE2b of the record format, the native call's
    # arguments as this process would pass them, and this interpreter and
    # torch (everything the environment probe of ``_env`` reads is a
    # function of them). ``root`` is the fingerprint root the caller gave
    # (``None``: the common parent of the spec's paths, a function of the
    # spec). `repr` of str, int, bool, None and lists is exact and, unlike
    # the first `json.dumps` of a process (~20 us), costs nothing; only this
    # reader computes names, so their form is free.
    # (The interpreter's and torch's part is read once per process.)
    global _process_facts
    if _process_facts is None:
        import torch

        _process_facts = repr(
            (
                sys.executable,
                sys.version,
                sys.prefix,
                sys.base_prefix,
                sys.exec_prefix,
                getattr(sys, "abiflags", ""),
                sys.implementation.cache_tag,
                getattr(sys, "platlibdir", "lib"),
                str(torch.__version__),
                torch.version.cuda,
                getattr(torch.version, "hip", None),
                bool(torch._C._GLIBCXX_USE_CXX11_ABI),
                torch.__file__,
            )
        )
    # A record that holds for one CPU or one set of GPUs only (``host_cpu``,
    # ``gpus``) is named by them too, so machines of a fleet that share a
    # cache keep one record each instead of rewriting one in turn (each
    # rewrite costs the next machine a native-path load). Read for a
    # superset of the specs whose records are: any flag naming ``native``;
    # a CUDA spec whose arch list may come from the GPUs. A name that says
    # more than it must only splits records; ``""``: unreadable.
    host: Optional[str] = None
    if any("native" in f for flags in (spec["extra_cflags"], spec["extra_cuda_cflags"]) for f in flags):
        try:
            host = _cpu()[0]
        except (OSError, ValueError):
            host = ""
    gpus: Any = None
    cuda = spec["requires_cuda"]
    if (
        spec["cuda_archs"] is None
        and not (os.environ.get("TORCH_CUDA_ARCH_LIST") or "").strip()
        and (cuda or cuda is None and any(s.endswith(".cu") for s in spec["sources"]))
    ):
        try:
            gpus = sorted(os.listdir(WARM_GPU_LISTING))
        except OSError:
            gpus = ""
    text = repr((WARM_RECORD_FORMAT, spec, root, cache_dir, _process_facts, host, gpus))
    return hashlib.blake2b(text.encode("utf-8", "surrogateescape"), digest_size=16).hexdigest()


_process_facts: Optional[str] = None


def _cache_root(cache_dir: Optional[str]) -> Optional[str]:
    # Where the native module opens the cache: ``cache_dir``, else Rust's
    # ``abicache_store::resolve_root`` (its one home) restated for the warm
    # path (a blank value counts as unset; ``XDG_CACHE_HOME`` only when
    # absolute); ``None``: no root. Tested value for value against
    # ``_native.default_cache_dir`` (tests/python/test_warm_reader.py).
    if cache_dir is not None:
        return cache_dir
    env = os.environ
    blank = " \t\n\r\x0c"
    root = env.get("ABICACHE_DIR", "")
    if root.strip(blank):
        return root
    xdg = env.get("XDG_CACHE_HOME", "")
    if xdg.strip(blank) and xdg.startswith("/"):
        return os.path.join(xdg, "abicache")
    home = env.get("HOME", "")
    if home.strip(blank):
        return os.path.join(home, ".cache", "abicache")
    return None


def _rebuild_set() -> bool:
    # Whether `ABICACHE_REBUILD` is set to anything but `0` (blank counts as
    # unset, as in Rust's `abicache_env_vars::var`): then the native path
    # reads it (`abicache_env_vars::parse_flag`, its one home: `1` rebuilds,
    # anything else but `0` is an error). Tested value for value against
    # `_native.rebuild_requested`.
    return os.environ.get("ABICACHE_REBUILD", "").strip(" \t\n\r\x0c") not in ("", "0")


def _trusted_owner(owner: int, uid: int, layer: bool) -> bool:
    """Whether a library owned by ``owner`` may be loaded by a process of
    effective uid ``uid``: its own always, root's only from a read-only layer
    (``layer``). ``abicache_store::trusted_owner`` (its one home) restated for
    the warm path, which imports no native module, and for
    ``_native_path.open_checked``; tested value for value against
    ``_native.library_owner_trusted`` on real files."""
    return owner == uid or (layer and owner == 0)


# A warm hit leaves `last-used` alone when it was set at most this long ago
# (one in the future is set to now): well inside gc's default grace of 60 s.
_TOUCHED_RECENTLY_NS = 10_000_000_000


def _check_warm_record(name: str, cache_dir: Optional[str]) -> Optional[Any]:
    # The record ``name`` when every check in it holds now, else ``None``.
    # Writes only the entry's ``last-used`` (before the checks).
    try:
        # Where the native module would open the cache (a record is only
        # found where the native module wrote it, under the same
        # variables, which the record checks).
        root = _cache_root(cache_dir)
        if root is None:
            return None
        # The root may be a symlink the user chose; nothing under it may be.
        # Each of them, and the record, must be this user's and writable by
        # no one else.
        uid = os.geteuid()
        warm_dir = root + "/v1/warm"
        warm_st = os.lstat(warm_dir)
        entries_st = os.lstat(root + "/v1/entries")
        if not (stat.S_ISDIR(warm_st.st_mode) and stat.S_ISDIR(entries_st.st_mode)):
            return None
        # The root's real path: the root itself unless it is a symlink or
        # not a plain absolute path (`.`, `..`, `//`, relative).
        real = root
        root_st = os.lstat(root)
        parts = root.split("/")
        if stat.S_ISLNK(root_st.st_mode) or parts[0] or "" in parts[1:] or "." in parts or ".." in parts:
            root_st = os.stat(root)
            real = os.path.realpath(root)
        for st in (root_st, os.lstat(root + "/v1"), warm_st, entries_st):
            if st.st_uid != uid or st.st_mode & 0o022:
                return None
        # No directory on the root's real path, from `/` down, that others
        # can write without the sticky bit: they could swap the cache away
        # between these checks and the load. One `lstat` per directory; a
        # symlink among them is resolved, and the walk goes on from where
        # it points.
        while real != "/":
            real = real.rsplit("/", 1)[0] or "/"
            mode = os.lstat(real).st_mode
            if stat.S_ISLNK(mode):
                real = os.path.realpath(real)
                mode = os.stat(real).st_mode
            if mode & 0o022 and not mode & 0o1000:
                return None
        fd = os.open(warm_dir + "/" + name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode) or st.st_uid != uid or st.st_mode & 0o022 or st.st_size > 64 << 20:
                return None
            # Decoded first: `json.loads` of bytes detects the encoding (~8 us).
            record = json.loads(os.read(fd, st.st_size + 1).decode("utf-8"))
        finally:
            os.close(fd)
        if record.get("format") != WARM_RECORD_FORMAT:
            return None
        # Marked used before the checks, as a lookup does: gc re-reads
        # `last-used` under the entry's lock and spares an entry used within
        # its grace (60 s unless `ABICACHE_GC_GRACE` says otherwise), so the
        # library checked below is still there to load. Not written again
        # when it was set less than `_TOUCHED_RECENTLY_NS` ago (a `lstat`
        # instead of an `open`, a `utime` and a `close`: many processes
        # loading one extension at once write it once).
        try:
            last_used = record["last_used"]
            try:
                st = os.lstat(last_used)
                recent = stat.S_ISREG(st.st_mode) and 0 <= time.time_ns() - st.st_mtime_ns < _TOUCHED_RECENTLY_NS
            except OSError:
                recent = False
            if not recent:
                fd = os.open(
                    last_used,
                    os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC,
                    0o600,
                )
                try:
                    # Under a shared lock, as the store's touch: gc holds it
                    # exclusively from its re-read to the entry's removal.
                    fcntl.flock(fd, fcntl.LOCK_SH)
                    os.utime(fd)
                finally:
                    os.close(fd)
        except OSError:
            pass  # best effort, as in the store
        if not _key_inputs_hold(record):
            return None
        path, dev, ino, mode, owner = record["entry"]
        st = os.lstat(path)
        if (st.st_dev, st.st_ino, st.st_mode, st.st_uid) != (dev, ino, mode, owner) or not stat.S_ISDIR(mode):
            return None
        library = record["library"]
        for row in record["entry_files"]:
            if row[0] == library:
                library_row = row[1:]
                continue
            st = os.lstat(row[0])
            if row[1:] != [st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns]:
                return None
        # The instruction-set extensions the library requires, as
        # `[feature, flag]` (usually none: then nothing more is read; a
        # record without the field is refused, as the native path refuses a
        # manifest without `isa`). Each
        # must be among this CPU's `/proc/cpuinfo` flags unless
        # `ABICACHE_ISA_CHECK=0`; anything else is left to the native path,
        # which refuses a library this CPU cannot run with the full message
        # (and also asks `cpuid`, so it may still load one).
        isa = record.get("isa")
        if isa is None:  # requirements not recorded: unknown, never a warm hit
            return None
        if isa:
            guard = os.environ.get("ABICACHE_ISA_CHECK", "").strip()
            if guard != "0":
                if guard not in ("", "1"):
                    return None
                cpu = _cpu()[1]
                for feature, _flag in isa:
                    if feature not in cpu:
                        return None
        # The library is opened once, checked, and loaded from this descriptor.
        fd = os.open(library, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
        st = os.fstat(fd)
        if (
            library_row != [st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns]
            or not stat.S_ISREG(st.st_mode)
            or not _trusted_owner(st.st_uid, uid, False)  # the own cache's, never a layer's
            or st.st_mode & 0o022
            or st.st_nlink != 1
        ):
            os.close(fd)
            return None
        record["fd"] = fd
        return record
    except (OSError, ValueError, KeyError, TypeError, IndexError, AttributeError):
        return None


def _key_inputs_hold(record: Any) -> bool:
    # Whether everything the record's key was computed from is as recorded:
    # every variable a hit reads, every stamped file, directory and
    # symlink, every absent path, and the GPU listing. Then the key is the
    # record's (what else the record checks is about loading its library).
    try:
        environ = os.environ
        for var, value in record["environ"]:
            if environ.get(var) != value:
                return False
        # A stamp row is [path, dev, ino, size, mtime_ns, ctime_ns].
        for row in record["stat"]:
            st = os.stat(row[0])
            if row[1:] != [st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns]:
                return False
        for path in record["missing"]:
            try:
                os.stat(path)
            except OSError:
                continue
            return False
        for path, dev, ino in record["directory"]:
            st = os.lstat(path)
            if not stat.S_ISDIR(st.st_mode) or st.st_dev != dev or st.st_ino != ino:
                return False
        for path, dev, ino in record["same"]:
            st = os.stat(path)
            if st.st_dev != dev or st.st_ino != ino:
                return False
        # A CUDA extension whose arch list came from the GPUs: the driver's
        # GPU listing, as recorded (`[directory, names]`; names `None`: unreadable).
        gpus = record["gpus"]
        if gpus is not None:
            try:
                names: Optional[List[str]] = sorted(os.listdir(gpus[0]))
            except OSError:
                names = None
            if names != gpus[1]:
                return False
        # An extension with a native CPU flag: the CPU it was resolved on
        # (the compiler that resolved it is among the stamps and variables).
        host_cpu = record["host_cpu"]
        if host_cpu is not None and host_cpu != _cpu()[0]:
            return False
        return True
    except (OSError, ValueError, KeyError, TypeError, IndexError, AttributeError):
        return False


# This CPU as `/proc/cpuinfo`'s first processor describes it, read once per
# process: `(identity, feature names)`, Rust's `CpuFeatures::from_cpuinfo`
# restated (the identity: each `WARM_CPU_IDENTITY_FIELDS` field of that
# block, as `field=value` lines in the file's order; the names: its `flags`
# or `Features` words). Read as Rust's `running_cpu` reads it:
# `WARM_CPUINFO_READ` bytes at a time, only as far as that block's end (the
# kernel writes a page of processors' text per read, ~15 us a processor:
# two or three, not every processor of a many-core machine). Raises
# `OSError` or `ValueError` when unreadable.
_cpuinfo: Optional[Tuple[str, Set[str]]] = None


def _cpu() -> Tuple[str, Set[str]]:
    global _cpuinfo
    if _cpuinfo is None:
        fd = os.open("/proc/cpuinfo", os.O_RDONLY | os.O_CLOEXEC)
        try:
            data = b""
            while True:
                chunk = os.read(fd, WARM_CPUINFO_READ)
                data += chunk
                # Whole lines only until the end (a chunk may end mid-line);
                # as Rust's `lines()`, no line after a final newline.
                text = data.decode("utf-8") if not chunk else data[: data.rfind(b"\n") + 1].decode("utf-8")
                lines = text.split("\n")
                if lines[-1] == "":
                    lines.pop()
                identity: List[str] = []
                names: Set[str] = set()
                ended = False
                for line in lines:
                    if not line.strip():
                        if identity:
                            ended = True  # one processor is enough: they are alike
                            break
                        continue
                    field, sep, value = line.partition(":")
                    if not sep:
                        continue
                    field = field.strip()
                    if field in WARM_CPU_IDENTITY_FIELDS:
                        identity.append(f"{field}={value.strip()}\n")
                    if field in ("flags", "Features"):
                        names.update(value.split())
                if ended or not chunk:
                    break
        finally:
            os.close(fd)
        _cpuinfo = ("".join(identity), names)
    return _cpuinfo


def _count_warm_hit(record: Any) -> bool:
    # Makes the writes of a hit: appends the hit to the counter log as its
    # writers do (``stats_log.rs``: ``O_APPEND`` without following symlinks,
    # shared ``flock``, the path still naming the opened file, one ``write``).
    # (The entry was marked used before the checks.) ``False`` (nothing written) when the log is
    # missing, replaced meanwhile or due for a fold: the native path then
    # takes the hit and does those.
    log, line, fold_at = record["count"]
    try:
        fd = os.open(log, os.O_WRONLY | os.O_APPEND | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return False
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_size > fold_at:
            return False
        fcntl.flock(fd, fcntl.LOCK_SH)
        now = os.lstat(log)
        if (now.st_dev, now.st_ino) != (st.st_dev, st.st_ino):
            return False
        data = line.encode()
        if os.write(fd, data) != len(data):
            return False
    except OSError:
        return False
    finally:
        os.close(fd)
    return True


def _import_module(name: str, path: str, fd: int) -> ModuleType:
    # The library `path`, opened and checked as `fd`, imported from that
    # descriptor (`/proc/self/fd/N`) as the Python module `name`; its
    # `__file__` is `path`. (Here, not in `_native_path`: a warm load of a
    # Python module loads no native module.)
    import importlib.machinery
    import importlib.util

    opened = f"/proc/self/fd/{fd}"
    loader = importlib.machinery.ExtensionFileLoader(name, opened)
    spec = importlib.util.spec_from_file_location(name, opened, loader=loader)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot import `{path}` as module `{name}`", path=path)
    try:
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    except ImportError as e:
        raise ImportError(f"cannot import `{path}` as module `{name}`: {e}", path=path) from e
    module.__file__ = path
    return module


def _paths(value: Union[StrPath, Iterable[StrPath], None], what: str, strip: bool = False) -> List[str]:
    # Absolute paths (against the current directory); `strip`: surrounding
    # whitespace stripped first, as torch's drop-ins do with include paths.
    if value is None:
        return []
    if isinstance(value, (str, os.PathLike)):
        value = [value]
    out = []
    for p in value:
        if not isinstance(p, (str, os.PathLike)):
            raise TypeError(f"{what} must be paths (str or os.PathLike), got {type(p).__name__} ({p!r})")
        p = os.fspath(p)
        out.append(os.path.abspath(p.strip() if strip else p))
    return out


def _strings(value: Union[str, Iterable[str], None], what: str) -> List[str]:
    if value is None:
        return []
    if isinstance(value, str):
        value = [value]
    out = list(value)
    for v in out:
        if not isinstance(v, str):
            raise TypeError(f"{what} must be strings, got {type(v).__name__}")
    return out


class TorchOpsExtension:
    """A JIT-compiled PyTorch extension, keyed by what its binary depends on.

    ``load()`` returns a verified library from the cache, or builds it once
    (other threads and processes wait for that build), registers it with
    ``torch.ops.load_library`` (or imports it when ``is_python_module``),
    checks ``required_ops`` and returns the library path. A stable-ABI target
    above the running torch is refused with :class:`abicache.AbiError` before
    the cache is looked at. ``ABICACHE_REBUILD=1`` forces a rebuild.

    Paths may be relative to the current directory. ``cache_dir`` defaults to
    ``ABICACHE_DIR``, else ``$XDG_CACHE_HOME/abicache``, else ``~/.cache/abicache``.
    ``fingerprint_root`` names the directory files are named relative to in
    the payload (default: the common parent of the sources and include paths).
    ``progress`` (keyword-only, optional) receives one dict per build event
    (``kind``, ``line``, …); without it, build progress goes to stderr, and a
    cache hit prints nothing unless ``verbose``.
    """

    def __init__(
        self,
        name: str,
        sources: Union[StrPath, Sequence[StrPath]],
        *,
        namespace: Optional[str] = None,
        required_ops: Iterable[str] = (),
        extra_cflags: Iterable[str] = (),
        extra_cuda_cflags: Iterable[str] = (),
        extra_ldflags: Iterable[str] = (),
        extra_include_paths: Iterable[StrPath] = (),
        requires_cuda: Optional[bool] = None,
        is_python_module: bool = False,
        python_abi_dependent: Optional[bool] = None,
        torch_stable_abi_target: Optional[StableTargetLike] = None,
        cuda_archs: Optional[str] = None,
        cache_dir: Optional[StrPath] = None,
        verbose: bool = False,
        progress: Optional[ProgressCallback] = None,
        fingerprint_root: Optional[StrPath] = None,
    ) -> None:
        if not isinstance(name, str):
            raise TypeError(f"name must be a string, got {type(name).__name__}")
        self.name = name
        self.namespace = namespace or name
        self.required_ops = _strings(required_ops, "required_ops")
        self.sources = _paths(sources, "sources")
        self.extra_include_paths = _paths(extra_include_paths, "extra_include_paths")
        self.is_python_module = bool(is_python_module)
        self.cache_dir = os.path.abspath(os.fspath(cache_dir)) if cache_dir is not None else None
        self.verbose = bool(verbose)
        self.progress = progress
        # What the key is of, fixed now: the public lists are copies.
        self._spec: Dict[str, Any] = {
            "name": name,
            "namespace": namespace,
            "required_ops": list(self.required_ops),
            "sources": list(self.sources),
            "extra_cflags": _strings(extra_cflags, "extra_cflags"),
            "extra_cuda_cflags": _strings(extra_cuda_cflags, "extra_cuda_cflags"),
            "extra_ldflags": _strings(extra_ldflags, "extra_ldflags"),
            "extra_include_paths": list(self.extra_include_paths),
            "requires_cuda": requires_cuda,
            "is_python_module": self.is_python_module,
            "python_abi_dependent": python_abi_dependent,
            "torch_stable_abi_target": torch_stable_abi_target,
            "cuda_archs": cuda_archs,
        }
        if not (torch_stable_abi_target is None or isinstance(torch_stable_abi_target, str)):
            try:
                parts = list(torch_stable_abi_target)
            except TypeError:  # a float such as 2.10 (which reads as 2.1)
                parts = []
            if len(parts) != 2 or type(parts[0]) is not int or type(parts[1]) is not int:
                raise TypeError(
                    "torch_stable_abi_target must be a string 'M.m' or a pair of ints (M, m), "
                    f"such as '2.10' or (2, 10); got {torch_stable_abi_target!r}"
                )
            self._spec["torch_stable_abi_target"] = parts
        # The fingerprint root given (``None``: the common parent of the
        # sources and include paths, found on the native path).
        self._root = os.path.abspath(os.fspath(fingerprint_root)) if fingerprint_root is not None else None
        # The key of the last load() in this process (for abicache.load's same-name reloads).
        self._loaded_key: Optional[str] = None
        # What the warm-load record's name is of (fixed now: `_materialize`
        # replaces `_spec` and `_root`, not these).
        self._warm_spec = self._spec
        self._warm_root = self._root
        # `load_inline`'s: stores the generated sources and returns their
        # directory (the sources are stand-ins until then).
        self._store_sources: Optional[Callable[[], str]] = None

    @property
    def requires_cuda(self) -> bool:
        """Whether this is a CUDA extension: ``requires_cuda`` when given, else
        whether a source is a CUDA source (``.cu``), by the Rust rule."""
        from ._native_path import requires_cuda

        return requires_cuda(self)

    def __repr__(self) -> str:
        return f"TorchOpsExtension({self.name!r}, {len(self.sources)} source(s))"

    @property
    def key(self) -> str:
        """The cache key (32 hex digits) in this environment (remembered with
        a stamp of every file and directory it depends on)."""
        from ._native_path import call

        key: str = call("key", self)
        return key

    @property
    def payload(self) -> List[str]:
        """The ``field=value`` lines the key is the BLAKE3 of."""
        from ._native_path import prepared

        payload: List[str] = prepared(self)["payload"]
        return payload

    def explain(self) -> str:
        """Why the key is what it is; on a miss, how the closest cached entry differs."""
        from ._native_path import call

        text: str = call("explain", self)[0]
        return text

    def explanation(self) -> Dict[str, Any]:
        """:meth:`explain` as data: ``key``, ``cached``, ``python_abi``,
        ``torch_abi``, ``closest`` (``{"key", "changes": [{"kind", "field", …}]}``)."""
        from ._native_path import call

        data: Dict[str, Any] = call("explain", self)[1]
        return data

    def load(self) -> str:
        """Hits or builds, registers the library with torch, checks
        ``required_ops`` and returns the library path. A second call in the
        same process (same key) does nothing but return the path."""
        return self._load()[0]

    def _materialize(self) -> None:
        # Before any native call: `load_inline`'s sources stored in the cache,
        # the stand-in paths replaced by theirs (the warm name keeps them).
        store = self._store_sources
        if store is not None:
            directory = store()
            self.sources = [directory + "/" + os.path.basename(p) for p in self.sources]
            self._spec = dict(self._spec, sources=list(self.sources))
            self._root = directory
            self._store_sources = None

    def _current_key(self) -> str:
        # The key now: the warm-load record's when it answers (no native
        # call; a record already checked in this process needs only its
        # key's inputs checked), else the native module's (key memo or scan).
        if not _rebuild_set():
            warm_name = _warm_record_name(self._warm_spec, self._warm_root, self.cache_dir)
            record = _checked_records.get(warm_name)
            if record is not None and _key_inputs_hold(record):
                key: str = record["key"]
                return key
            record = _check_warm_record(warm_name, self.cache_dir)
            if record is not None:
                os.close(record.pop("fd"))
                _checked_records[warm_name] = record
                key = record["key"]
                return key
        return self.key

    def _load(self) -> Tuple[str, Optional[ModuleType]]:
        # The path and (for a Python module) the module: a hit from the
        # warm-load record (no native call), else the native path.
        # `ABICACHE_REBUILD` set (not blank) is the native path's to read
        # (`_native.rebuild_requested`, the one rule: `1` rebuilds, `0` does
        # not, any other value is an error); the record answers only when it
        # is unset or `0`.
        rebuild_set = _rebuild_set()
        with _registry_lock:
            name_lock = _name_locks.setdefault(self.name, threading.Lock())
        with name_lock:
            warm_name = _warm_record_name(self._warm_spec, self._warm_root, self.cache_dir)
            if not rebuild_set:
                # A same-process repeat of a load this process checked: the
                # library is loaded; only the key's inputs need to hold.
                record = _checked_records.get(warm_name)
                if record is not None and record["key"] in _loaded and _key_inputs_hold(record):
                    self._loaded_key = record["key"]
                    return _loaded[record["key"]]
            record = None if rebuild_set else _check_warm_record(warm_name, self.cache_dir)
            if record is not None:
                key = record["key"]
                fd = record.pop("fd")
                _checked_records[warm_name] = record
                if key in _loaded:
                    os.close(fd)
                    self._loaded_key = key
                    return _loaded[key]
                if _count_warm_hit(record):
                    self._loaded_key = key
                    path = record["library"]
                    if self.verbose:
                        print(f"abicache: hit `{self.name}` key {key} (warm record): {path}", file=sys.stderr)
                    try:
                        return self._register_checked(key, path, fd)
                    except (OSError, ImportError):
                        # The load itself failed: a miss. The native path
                        # looks up (or rebuilds) and loads, or raises the
                        # load's own error when the library is at fault.
                        pass
                else:
                    os.close(fd)
            self._materialize()
            from ._native_path import load

            return load(self, warm_name)

    def _register_checked(self, key: str, path: str, fd: int) -> Tuple[str, Optional[ModuleType]]:
        # Registers the library ``path`` from ``fd``, the file opened and
        # checked (``/proc/self/fd/N``: what is loaded is what was checked,
        # whatever is at ``path`` now), as ``torch.ops.load_library`` does
        # (or an import when ``is_python_module``); checks ``required_ops``
        # and remembers it as this process's library of ``key``. Takes
        # ``fd``: closed when the load fails, else kept open for the life of
        # the process (the loader knows the library by the name
        # ``/proc/self/fd/N``, which must never name another file).
        module = None
        try:
            if self.is_python_module:
                module = _import_module(self.name, path, fd)
            else:
                import ctypes

                import torch

                try:
                    ctypes.CDLL(f"/proc/self/fd/{fd}")
                except OSError as e:
                    raise OSError(f"Could not load this library: {path} ({e})") from e
                torch.ops.loaded_libraries.add(path)
        except BaseException:
            os.close(fd)
            raise
        self._check_required_ops()
        _loaded[key] = (path, module)
        _loaded_names.add(self.name)
        return path, module

    def _check_required_ops(self) -> None:
        if not self.required_ops:
            return
        import torch

        # The JIT registry's schemas for `ns::op` (any overload): what
        # `hasattr(torch.ops.ns, op)` looks up, without building the op's
        # Python wrappers (~50 us each on a warm load). Anything it does not
        # find is asked of `torch.ops` itself, so an older torch without it
        # answers the same.
        schemas = getattr(torch._C, "_jit_get_schemas_for_operator", None)
        missing = []
        for op in self.required_ops:
            if not (schemas is not None and schemas(f"{self.namespace}::{op}")):
                if not hasattr(getattr(torch.ops, self.namespace), op):
                    missing.append(op)
        if missing:
            from ._native_path import missing_ops

            raise missing_ops(self, missing)


# The drop-ins' warm path: ``load``, and what ``load_inline`` (``_inline``)
# shares with it. Here, not in a module of their own: a warm call answered
# by the record then imports no module but this one. What only a build, an
# error, a shell-quoted flag or ``build_directory`` needs is in ``_load``.

# base name -> {key of the extension under its base name: (name it was
# imported as, library path, module or None)}: what load/load_inline loaded
# in this process, so that a changed extension is imported under a new name
# (as torch does) and an unchanged one returns its first result.
_by_name: Dict[str, Dict[str, Tuple[str, str, Optional[ModuleType]]]] = {}
_dropin_locks: Dict[str, threading.Lock] = {}

# What makes `shlex.split` (POSIX mode) do more than return a stripped word:
# blanks between words, quotes and escapes.
_SHELL_SPECIAL = frozenset(" \t\n\r\x0b\x0c\"'\\")


def _split_flags(flags: Optional[Iterable[str]], what: str) -> List[str]:
    # Flags as torch's command line sees them: each entry stripped, empty
    # ones dropped, and one entry holding several (`"-O0 -Wall"`) split as a
    # POSIX shell splits it (`_load.shell_split`; a plain word, most flags,
    # is what it would return).
    if flags is None:
        return []
    if isinstance(flags, str):
        flags = [flags]
    out: List[str] = []
    for flag in flags:
        if not isinstance(flag, str):
            raise TypeError(f"{what} must be strings, got {type(flag).__name__} ({flag!r})")
        flag = flag.strip()
        if not _SHELL_SPECIAL.isdisjoint(flag):
            from ._load import shell_split

            out.extend(shell_split(flag, what))
        elif flag:
            out.append(flag)
    return out


def _load_sources(
    name: str,
    sources: Union[StrPath, List[StrPath]],
    *,
    extra_cflags: Optional[List[str]],
    extra_cuda_cflags: Optional[List[str]],
    extra_ldflags: Optional[List[str]],
    extra_include_paths: Optional[List[StrPath]],
    build_directory: Optional[StrPath],
    verbose: bool,
    with_cuda: Optional[bool],
    is_python_module: bool,
    cache_dir: Optional[StrPath],
    fingerprint_root: Optional[StrPath] = None,
    store_sources: Optional[Callable[[], str]] = None,
) -> Union[ModuleType, str]:
    # What `load` and `load_inline` do once their sources are files:
    # normalise flags and paths as torch does, load (a hit, or one build),
    # and return the module or the library path.
    #
    # Same-name reloads: the first load of `name` in this process imports it
    # as `name`. A later load of `name` whose key (under that name) differs
    # from every earlier one is a changed extension: a Python module is then
    # built and imported as `name_v1`, `name_v2`, ... (torch's scheme:
    # pybind11 returns an already-imported module for a name it has seen); a
    # `torch.ops` library keeps its name (a different path loads fine). A
    # load whose key matches an earlier one returns that first result.
    #
    # `store_sources` (`load_inline`): the sources are stand-in paths under
    # `fingerprint_root` that name the generated files' contents; the
    # callable stores the files and returns their directory, called only
    # when the warm-load record does not answer (`TorchOpsExtension._materialize`).
    if not isinstance(name, str):
        raise TypeError(f"name must be a string, got {type(name).__name__}")
    options = dict(
        namespace=name,
        extra_cflags=_split_flags(extra_cflags, "extra_cflags"),
        extra_cuda_cflags=_split_flags(extra_cuda_cflags, "extra_cuda_cflags"),
        extra_ldflags=_split_flags(extra_ldflags, "extra_ldflags"),
        extra_include_paths=_paths(extra_include_paths, "extra_include_paths", strip=True),
        requires_cuda=with_cuda,
        is_python_module=is_python_module,
        cache_dir=cache_dir,
        verbose=verbose,
        fingerprint_root=fingerprint_root,
    )
    with _registry_lock:
        lock = _dropin_locks.setdefault(name, threading.Lock())
    with lock:
        loaded = _by_name.setdefault(name, {})
        ext = TorchOpsExtension(name, sources, **options)  # type: ignore[arg-type]
        ext._store_sources = store_sources
        # The key only when the name was loaded before: from the warm-load
        # record when it answers (a same-process repeat costs its checks,
        # no native call), else a native key.
        key = ext._current_key() if loaded else None
        if key is not None and key in loaded:
            as_name, path, module = loaded[key]
        else:
            as_name = f"{name}_v{len(loaded)}" if loaded and is_python_module else name
            if as_name != name:
                ext = TorchOpsExtension(as_name, sources, **options)  # type: ignore[arg-type]
                ext._store_sources = store_sources
            try:
                path, module = ext._load()
            except Exception as e:
                # `abicache._native` is imported only when something failed.
                from ._load import with_torch_prefix

                wrapped = with_torch_prefix(as_name, e)
                if wrapped is None:
                    raise
                raise wrapped from e
            if key is None:
                key = ext._loaded_key
            assert key is not None
            loaded[key] = (as_name, path, module)
    if build_directory is not None:
        from ._load import copy_to_build_directory

        path = copy_to_build_directory(build_directory, as_name, path)
    if is_python_module:
        assert module is not None
        return module
    return path


def load(
    name: str,
    sources: Union[StrPath, List[StrPath]],
    extra_cflags: Optional[List[str]] = None,
    extra_cuda_cflags: Optional[List[str]] = None,
    extra_sycl_cflags: Optional[List[str]] = None,
    extra_ldflags: Optional[List[str]] = None,
    extra_include_paths: Optional[List[StrPath]] = None,
    build_directory: Optional[StrPath] = None,
    verbose: bool = False,
    with_cuda: Optional[bool] = None,
    with_sycl: Optional[bool] = None,
    is_python_module: bool = True,
    is_standalone: bool = False,
    keep_intermediates: bool = True,
    *,
    cache_dir: Optional[StrPath] = None,
) -> Union[ModuleType, str]:
    """Build (or reuse) and load a C++/CUDA extension, like
    ``torch.utils.cpp_extension.load`` with the same signature and return
    values: the imported module when ``is_python_module`` (the default), else
    the library path after ``torch.ops.load_library``. Switching is a one-line
    change: ``from abicache import load``.

    Like torch's ``load``:

    - flags are stripped, empty ones dropped, and an entry holding several
      (``"-O0 -Wall"``) is split as torch's command line splits it; include
      paths are stripped and made absolute;
    - a changed extension loaded again under the same name in one process is
      imported as ``<name>_v1``, ``<name>_v2``, … and returns the new code;
      an unchanged one returns the module loaded first;
    - with ``build_directory=D`` the library is reachable as ``D/<name>.so``
      (``D/<name>_v1.so`` for a reload), a copy of the verified cache entry;
    - a failed build raises a ``RuntimeError`` (:class:`abicache.BuildError`,
      with the compiler's ``.output`` and ``.command``) whose message starts
      with ``Error building extension '<name>'``.

    What differs:

    - The binary is cached under a key of what it depends on (sources and the
      headers they include, flags, Python ABI when used, torch release or
      stable-ABI target, CUDA, archs), in the abicache cache (``cache_dir``,
      keyword-only, default ``ABICACHE_DIR``, else ``~/.cache/abicache``), not
      in a build directory: a hit costs a hash of the sources and a
      ``dlopen``, never a ninja run, and editing a header rebuilds.
    - ``verbose`` prints whether it was a hit; build progress always goes to
      stderr while a build runs.
    - ``keep_intermediates`` is accepted and ignored (objects are kept in the
      object cache so shared and unchanged units are not recompiled).
    - ``is_standalone`` (an executable) and SYCL (``with_sycl``,
      ``extra_sycl_cflags``) are not supported and raise :class:`abicache.Error`.
    - Missing sources raise ``FileNotFoundError``; ABI refusals
      :class:`abicache.AbiError`; lock time-outs :class:`abicache.LockTimeout`.
    """
    if is_standalone or with_sycl or extra_sycl_cflags:
        from ._load import refuse_unsupported

        refuse_unsupported(with_sycl, extra_sycl_cflags, "load", is_standalone)
    del keep_intermediates  # accepted for compatibility; see the docstring
    return _load_sources(
        name,
        sources,
        extra_cflags=extra_cflags,
        extra_cuda_cflags=extra_cuda_cflags,
        extra_ldflags=extra_ldflags,
        extra_include_paths=extra_include_paths,
        build_directory=build_directory,
        verbose=verbose,
        with_cuda=with_cuda,
        is_python_module=is_python_module,
        cache_dir=cache_dir,
    )


__all__ = [
    "AbiError",
    "BuildError",
    "Error",
    "LockTimeout",
    "TorchOpsExtension",
    "default_cache_dir",
    "environment",
    "intercept",
    "load",
    "load_inline",
    "prebuild",
    "stats",
    "torch_stable_abi_target_define",
    "visible_cuda_archs",
]


# Imported on first use, so a warm `TorchOpsExtension.load()` imports only
# what a hit needs (no native module, no environment probe): the drop-ins
# for torch's `load`/`load_inline`, the other functions, the exceptions
# (defined by `_native`) and the environment helpers.
_LAZY = {
    "default_cache_dir": "_api",
    "prebuild": "_api",
    "stats": "_api",
    "torch_stable_abi_target_define": "_api",
    "load_inline": "_inline",
    "intercept": "_intercept",
    "environment": "_env",
    "visible_cuda_archs": "_env",
    "Error": "_native",
    "BuildError": "_native",
    "AbiError": "_native",
    "LockTimeout": "_native",
    "_native": None,
}


def __getattr__(name: str) -> Any:
    if name not in _LAZY:
        raise AttributeError(f"module 'abicache' has no attribute {name!r}")
    import importlib

    module_name = _LAZY[name]
    if module_name is None:
        value = importlib.import_module(f"{__name__}.{name}")
    else:
        value = getattr(importlib.import_module(f"{__name__}.{module_name}"), name)
    globals()[name] = value
    return value


def __dir__() -> List[str]:
    return sorted(set(globals()) | set(_LAZY))
