"""The warm-load record's reader: a cache hit from the record an earlier
load wrote, checked without importing ``abicache._native``.

Imported by ``abicache._extension`` (every load asks it first); what only
some records need (the CPU check, ``abicache._cpu``) is imported when a
record needs it."""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import stat
import sys
import time
from typing import Any, Dict, List, Optional

# The warm path.
#
# ``TorchOpsExtension`` (``_extension``) takes a cache hit from the
# warm-load record an earlier load wrote, without importing
# ``abicache._native``: this module reads and checks the record. In a fresh
# process every module a warm load imports costs it ~0.1-0.2 ms, and every
# function this one defines a few us (so the checks are few, long
# functions); what only some records need (``_cpu``) is imported then.
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
#   read when it requires any: ``/proc/cpuinfo``, ``_cpu``).
# - the host compiler: ``CXX``'s value, and the file found for it (searched
#   again on this process's ``PATH`` when ``CXX`` names no path);
# - for a CUDA extension: nvcc's search and stamp and the arch list's
#   variable (or the driver's GPU listing); for one with a native CPU flag
#   (``-march=native``): this CPU's identity (``/proc/cpuinfo``'s first
#   processor, read once).
#
# The entry's ``last-used`` is touched before the checks (so gc spares it
# for its grace); the hit then makes the other writes a hit makes
# (`count_hit`). Any difference or error gives ``None``, and a load
# that fails (the entry removed after the checks) is a miss: the caller
# takes the native path, which answers as before and rewrites the record.
#
# (Kept in comments, not docstrings: docstrings are loaded with the module.)

# The record format this reader understands, from its one definition in
# Rust (`crates/abicache/src/session/warm_load.rs`; row positions are
# indexed as its `WARM_*_ROW` say; tests/python/test_warm_reader.py pins them).
# BEGIN warm-record format: generated from crates/abicache/src/session/warm_load.rs; do not edit
WARM_RECORD_FORMAT = 5
WARM_RECORD_FIELDS = ("format", "key", "library", "environ", "stat", "missing", "directory", "same", "entry", "entry_files", "last_used", "count", "isa", "device_images", "gpus", "host_cpu", "compiler")
WARM_ENVIRON_ROW = ("variable", "value")
WARM_STAMP_ROW = ("path", "dev", "ino", "size", "mtime_ns", "ctime_ns")
WARM_IDENTITY_ROW = ("path", "dev", "ino")
WARM_ENTRY_ROW = ("path", "dev", "ino", "mode", "uid")
WARM_COUNT_ROW = ("log", "line", "fold_at")
WARM_ISA_ROW = ("feature", "flag")
WARM_GPUS_ROW = ("directory", "names")
WARM_COMPILER_ROW = ("name", "found")
WARM_HIT_VARIABLES = ("ABICACHE_DIR", "XDG_CACHE_HOME", "HOME", "ABICACHE_REBUILD")
WARM_CUDA_HIT_VARIABLES = ("CUDA_HOME", "CUDA_PATH", "PATH", "TORCH_CUDA_ARCH_LIST", "CUDA_VISIBLE_DEVICES")
WARM_COMPILER_HIT_VARIABLES = ("CXX",)
WARM_CPU_IDENTITY_FIELDS = ("vendor_id", "cpu family", "model", "model name", "stepping", "microcode", "flags", "CPU implementer", "CPU architecture", "CPU variant", "CPU part", "CPU revision", "Features")
WARM_CPUINFO_READ = 4096
WARM_GPU_LISTING = "/proc/driver/nvidia/gpus"
# END warm-record format


def record_name(spec: Dict[str, Any], root: Optional[str], cache_dir: Optional[str]) -> str:
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
        try:
            import torch

            torch_facts: Any = (
                str(torch.__version__),
                torch.version.cuda,
                getattr(torch.version, "hip", None),
                bool(torch._C._GLIBCXX_USE_CXX11_ABI),
                torch.__file__,
            )
        except ImportError:  # a TVM-FFI module's venv may have no torch
            torch_facts = None
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
                torch_facts,
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
        from ._cpu import running_cpu

        try:
            host = running_cpu()[0]
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
    # A TVM-FFI module's environment has TVM-FFI's fields too (``_env``):
    # functions of its version and location.
    tvm_ffi: Any = None
    if spec.get("kind") == "tvm_ffi":
        import tvm_ffi as tvm_ffi_package

        tvm_ffi = (getattr(tvm_ffi_package, "__version__", None), tvm_ffi_package.__file__)
    text = repr((WARM_RECORD_FORMAT, spec, root, cache_dir, _process_facts, host, gpus, tvm_ffi))
    return hashlib.blake2b(text.encode("utf-8", "surrogateescape"), digest_size=16).hexdigest()


_process_facts: Optional[str] = None


def cache_root(cache_dir: Optional[str]) -> Optional[str]:
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


def rebuild_set() -> bool:
    # Whether `ABICACHE_REBUILD` is set to anything but `0` (blank counts as
    # unset, as in Rust's `abicache_env_vars::var`): then the native path
    # reads it (`abicache_env_vars::parse_flag`, its one home: `1` rebuilds,
    # anything else but `0` is an error). Tested value for value against
    # `_native.rebuild_requested`.
    return os.environ.get("ABICACHE_REBUILD", "").strip(" \t\n\r\x0c") not in ("", "0")


def trusted_owner(owner: int, uid: int, layer: bool) -> bool:
    """Whether a library owned by ``owner`` may be loaded by a process of
    effective uid ``uid``: its own always, root's only from a read-only layer
    (``layer``). ``abicache_store::trusted_owner`` (its one home) restated for
    the warm path, which imports no native module, and for
    ``_native_path.open_checked``; tested value for value against
    ``_native.library_owner_trusted`` on real files."""
    return owner == uid or (layer and owner == 0)


# A warm hit leaves `last-used` alone when it was set at most this long ago
# (one in the future is set to now): well inside gc's default grace of 60 s.
TOUCHED_RECENTLY_NS = 10_000_000_000


def check_record(name: str, cache_dir: Optional[str]) -> Optional[Any]:
    # The record ``name`` when every check in it holds now, else ``None``.
    # Writes only the entry's ``last-used`` (before the checks).
    try:
        # Where the native module would open the cache (a record is only
        # found where the native module wrote it, under the same
        # variables, which the record checks).
        root = cache_root(cache_dir)
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
        # when it was set less than `TOUCHED_RECENTLY_NS` ago (a `lstat`
        # instead of an `open`, a `utime` and a `close`: many processes
        # loading one extension at once write it once).
        try:
            last_used = record["last_used"]
            try:
                st = os.lstat(last_used)
                recent = stat.S_ISREG(st.st_mode) and 0 <= time.time_ns() - st.st_mtime_ns < TOUCHED_RECENTLY_NS
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
        if not key_inputs_hold(record):
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
        # manifest without `isa`). Each must be among this CPU's `/proc/cpuinfo` flags unless
        # `ABICACHE_ISA_CHECK=0`; anything else is left to the native path,
        # which refuses a library this CPU cannot run with the full message
        # (and also asks `cpuid`, so it may still load one).
        isa = record.get("isa")
        if isa is None:  # requirements not recorded: unknown, never a warm hit
            return None
        if isa:
            from ._cpu import isa_guard_passes

            if not isa_guard_passes(isa):
                return None
        # The device code a CUDA library carries (none for a CPU one: then
        # nothing more is read), compared with the visible GPUs, read once
        # per process (NVML, else `nvidia-smi`, in `_gpu`); a GPU none of
        # it can run is left to the native path, which refuses the load
        # with the GPU and the fix (unless `ABICACHE_GPU_CHECK=0`).
        images = record.get("device_images")
        if images:
            from ._gpu import guard_passes

            if not guard_passes(images):
                return None
        # The library is opened once, checked, and loaded from this descriptor.
        fd = os.open(library, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
        st = os.fstat(fd)
        if (
            library_row != [st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns]
            or not stat.S_ISREG(st.st_mode)
            or not trusted_owner(st.st_uid, uid, False)  # the own cache's, never a layer's
            or st.st_mode & 0o022
            or st.st_nlink != 1
        ):
            os.close(fd)
            return None
        record["fd"] = fd
        return record
    except (OSError, ValueError, KeyError, TypeError, IndexError, AttributeError):
        return None


def key_inputs_hold(record: Any) -> bool:
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
        # The host compiler (every key carries what it enables by itself;
        # it resolves a native CPU flag), unless `CXX` names it by path (then
        # among the stamps): `[name, found]`, the name searched on this
        # process's `PATH` as Rust's `abicache_build::which` searches (the
        # first non-empty directory holding a regular file of that name with
        # an execute bit) and the stamp of the file it must find (`None`:
        # none). The file found is the compiler: a changed `PATH` that finds
        # the same file is still a hit, one finding another first is not.
        compiler = record["compiler"]
        if compiler is not None:
            name, want = compiler
            found = None
            for d in (environ.get("PATH") or "").split(":"):
                if d:
                    try:
                        st = os.stat(d + "/" + name)
                    except OSError:
                        continue
                    if stat.S_ISREG(st.st_mode) and st.st_mode & 0o111:
                        found = [st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns]
                        break
            if found != want:
                return False
        # An extension with a native CPU flag: the CPU it was resolved on
        # (the compiler that resolved it is checked above).
        host_cpu = record["host_cpu"]
        if host_cpu is not None:
            from ._cpu import running_cpu

            if host_cpu != running_cpu()[0]:
                return False
        return True
    except (OSError, ValueError, KeyError, TypeError, IndexError, AttributeError):
        return False


def count_hit(record: Any) -> bool:
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
