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
from typing import TYPE_CHECKING, Any, Callable, Dict, Iterable, List, Optional, Sequence, Set, Tuple, Union

# `_native` and `_env` are imported on first use: a warm load answered by
# the warm-load record loads no native module and probes nothing. The type
# aliases exist for type checkers only (building them costs 0.2 ms).
if TYPE_CHECKING:
    from types import ModuleType

    from ._api import default_cache_dir, prebuild, stats, torch_stable_abi_target_define
    from ._env import environment, visible_cuda_archs
    from ._inline import load_inline
    from ._load import load
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
_registry_lock = threading.Lock()


def _name_lock(name: str) -> threading.Lock:
    with _registry_lock:
        return _name_locks.setdefault(name, threading.Lock())


# The warm path.
#
# This module is the whole warm path (issue 12): ``TorchOpsExtension`` takes
# a cache hit from the warm-load record an earlier load wrote, without
# importing ``abicache._native``. Everything else (the native module, the
# environment probe, the drop-ins, the other functions) is imported on first
# use: every module a warm load imports costs it ~0.15 ms.
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
# - the cache's root, ``v1`` and ``v1/warm`` are private to this user, and the
#   entry directory, its manifest and its library are the ones a full lookup
#   verified (``lstat``: identity, owner, mode; the trusted stamps).
#
# The hit then makes the writes a hit makes (`_count_warm_hit`). Any
# difference or error gives ``None``: the caller takes the native path, which
# answers as before and rewrites the record.
#
# A record is named by `_warm_record_name`: a BLAKE2b of the `repr` of the
# record format, the spec (the dict the native module's JSON is made from)
# and fingerprint root, the cache directory argument, and this interpreter
# and torch (everything the environment probe of ``_env`` reads is a
# function of them).
#
# (Kept in comments, not docstrings: docstrings are loaded with the module,
# and unmarshalling this module is a warm load's largest cost after
# `load_library`.)

# The record format this reader understands (`WARM_RECORD_FORMAT` in Rust).
WARM_RECORD_FORMAT = 1


def _identity() -> List[Any]:
    # This interpreter and torch, as far as the environment probe
    # (``_env._base_environment``) reads them.
    import torch

    return [
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
    ]


def _warm_record_name(spec: Dict[str, Any], root: str, cache_dir: Optional[str]) -> str:
    # The name of the record for these native-call arguments in this process.
    # `repr` of str, int, bool, None and lists is exact and, unlike the first
    # `json.dumps` of a process (~20 us), costs nothing; only this reader
    # computes names, so their form is free.
    text = repr((WARM_RECORD_FORMAT, spec, root, cache_dir, _identity()))
    return hashlib.blake2b(text.encode("utf-8", "surrogateescape"), digest_size=16).hexdigest()


def _cache_root(cache_dir: Optional[str]) -> Optional[str]:
    # Where the native module would open the cache (a guess: a record is
    # only found where the native module wrote it, under the same variables).
    if cache_dir is not None:
        return cache_dir
    env = os.environ
    if env.get("ABICACHE_DIR"):
        return env["ABICACHE_DIR"]
    xdg = env.get("XDG_CACHE_HOME")
    if xdg and os.path.isabs(xdg):
        return os.path.join(xdg, "abicache")
    home = env.get("HOME")
    return os.path.join(home, ".cache", "abicache") if home else None


def _private(st: os.stat_result, uid: int) -> bool:
    return st.st_uid == uid and not st.st_mode & 0o022


def _stamp_is(st: os.stat_result, row: List[Any]) -> bool:
    return bool(
        st.st_dev == row[1]
        and st.st_ino == row[2]
        and st.st_size == row[3]
        and st.st_mtime_ns == row[4]
        and st.st_ctime_ns == row[5]
    )


def _read_record(name: str, cache_dir: Optional[str]) -> Optional[Any]:
    root = _cache_root(cache_dir)
    if root is None:
        return None
    uid = os.geteuid()
    version_dir = os.path.join(root, "v1")
    warm_dir = os.path.join(version_dir, "warm")
    # The root may be a symlink the user chose; nothing under it may be.
    warm_st = os.lstat(warm_dir)
    if not (
        _private(os.stat(root), uid)
        and _private(os.lstat(version_dir), uid)
        and stat.S_ISDIR(warm_st.st_mode)
        and _private(warm_st, uid)
    ):
        return None
    fd = os.open(os.path.join(warm_dir, name), os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or not _private(st, uid) or st.st_size > 64 << 20:
            return None
        # Decoded first: `json.loads` of bytes detects the encoding (~8 us).
        return json.loads(os.read(fd, st.st_size + 1).decode("utf-8"))
    finally:
        os.close(fd)


def _record_holds(record: Any) -> bool:
    if record.get("format") != WARM_RECORD_FORMAT:
        return False
    environ = os.environ
    for name, value in record["environ"]:
        if environ.get(name) != value:
            return False
    for row in record["stat"]:
        if not _stamp_is(os.stat(row[0]), row):
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
    path, dev, ino, mode, uid = record["entry"]
    st = os.lstat(path)
    if (st.st_dev, st.st_ino, st.st_mode, st.st_uid) != (dev, ino, mode, uid) or not stat.S_ISDIR(mode):
        return False
    for row in record["entry_files"]:
        if not _stamp_is(os.lstat(row[0]), row):
            return False
    return True


def _check_warm_record(name: str, cache_dir: Optional[str]) -> Optional[Any]:
    # The record ``name`` when every check in it holds now, else ``None``.
    # Writes nothing.
    try:
        record = _read_record(name, cache_dir)
        if record is not None and _record_holds(record):
            return record
    except (OSError, ValueError, KeyError, TypeError, IndexError):
        pass
    return None


def _count_warm_hit(record: Any) -> bool:
    # Makes the writes of a hit: appends the hit to the counter log as its
    # writers do (``stats_log.rs``: ``O_APPEND`` without following symlinks,
    # shared ``flock``, the path still naming the opened file, one ``write``),
    # then marks the entry used. ``False`` (nothing written) when the log is
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
    try:
        fd = os.open(
            record["last_used"],
            os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC,
            0o600,
        )
        try:
            os.utime(fd)
        finally:
            os.close(fd)
    except OSError:
        pass  # best effort, as in the store
    return True


def _paths(value: Union[StrPath, Iterable[StrPath], None], what: str) -> List[str]:
    if value is None:
        return []
    if isinstance(value, (str, os.PathLike)):
        value = [value]
    out = []
    for p in value:
        if not isinstance(p, (str, os.PathLike)):
            raise TypeError(f"{what} must be paths (str or os.PathLike), got {type(p).__name__}")
        out.append(os.path.abspath(os.fspath(p)))
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


def _stable_target(value: Optional[StableTargetLike]) -> Union[None, str, List[int]]:
    if value is None or isinstance(value, str):
        return value
    parts = list(value)
    if len(parts) != 2 or not all(isinstance(p, int) for p in parts):
        raise TypeError(f"torch_stable_abi_target must be 'M.m' or (M, m), got {value!r}")
    return parts


def _fingerprint_root(paths: Sequence[str]) -> str:
    # The common parent directory of the sources and include paths: files
    # are named relative to it in the payload, so moving the project keeps the key.
    dirs = [os.path.dirname(p) for p in paths if p]
    if not dirs:
        return os.getcwd()
    return os.path.commonpath(dirs)


def _rebuild_requested() -> bool:
    return os.environ.get("ABICACHE_REBUILD", "").strip() not in ("", "0", "false", "no")


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
            "torch_stable_abi_target": _stable_target(torch_stable_abi_target),
            "cuda_archs": cuda_archs,
        }
        if fingerprint_root is not None:
            self._root = os.path.abspath(os.fspath(fingerprint_root))
        else:
            self._root = _fingerprint_root(self.sources + [p + os.sep for p in self.extra_include_paths])
        # The key of the last load() in this process (for abicache.load's same-name reloads).
        self._loaded_key: Optional[str] = None

    @property
    def _spec_json(self) -> str:
        # The spec as the native module reads it (not on the warm path).
        return json.dumps({k: v for k, v in self._spec.items() if v is not None})

    @property
    def requires_cuda(self) -> bool:
        """Whether this is a CUDA extension: ``requires_cuda`` when given, else
        whether a source is a CUDA source (``.cu``), by the Rust rule."""
        from . import _native

        return _native.requires_cuda(self._spec_json)

    def __repr__(self) -> str:
        return f"TorchOpsExtension({self.name!r}, {len(self.sources)} source(s))"

    def _args(self) -> Tuple[str, str, str, Optional[str]]:
        from . import _env

        env = _env.environment_json()
        return self._spec_json, env, self._root, self.cache_dir

    def _prepared(self) -> Dict[str, Any]:
        from . import _native

        return _native.prepare(*self._args())

    @property
    def key(self) -> str:
        """The cache key (32 hex digits) in this environment (remembered with
        a stamp of every file and directory it depends on)."""
        from . import _native

        return _native.key(*self._args())

    @property
    def payload(self) -> List[str]:
        """The ``field=value`` lines the key is the BLAKE3 of."""
        payload: List[str] = self._prepared()["payload"]
        return payload

    def explain(self) -> str:
        """Why the key is what it is; on a miss, how the closest cached entry differs."""
        from . import _native

        return _native.explain(*self._args())[0]

    def explanation(self) -> Dict[str, Any]:
        """:meth:`explain` as data: ``key``, ``cached``, ``python_abi``,
        ``torch_abi``, ``closest`` (``{"key", "changes": [{"kind", "field", …}]}``)."""
        from . import _native

        return _native.explain(*self._args())[1]

    def load(self) -> str:
        """Hits or builds, registers the library with torch, checks
        ``required_ops`` and returns the library path. A second call in the
        same process (same key) does nothing but return the path."""
        return self._load()[0]

    def _load(self) -> Tuple[str, Optional[ModuleType]]:
        rebuild = _rebuild_requested()
        with _name_lock(self.name):
            warm_name = _warm_record_name(self._spec, self._root, self.cache_dir)
            if not rebuild:
                loaded = self._load_warm(warm_name)
                if loaded is not None:
                    return loaded
            return self._load_native(warm_name, rebuild)

    def _load_warm(self, warm_name: str) -> Optional[Tuple[str, Optional[ModuleType]]]:
        # A hit from the warm-load record (no native call), or ``None``.
        record = _check_warm_record(warm_name, self.cache_dir)
        if record is None:
            return None
        key, path = record["key"], record["library"]
        if key in _loaded:
            self._loaded_key = key
            return _loaded[key]
        if not _count_warm_hit(record):
            return None
        self._loaded_key = key
        if self.verbose:
            print(f"abicache: hit `{self.name}` key {key} (warm record): {path}", file=sys.stderr)
        return self._register_checked(key, path)

    def _load_native(self, warm_name: str, rebuild: bool) -> Tuple[str, Optional[ModuleType]]:
        from . import _env, _native

        spec, env, root, cache_dir = self._args()
        if self.name in _loaded_names:
            key = _native.key(spec, env, root, cache_dir)
            if key in _loaded:
                self._loaded_key = key
                return _loaded[key]
        outcome = _native.build(
            spec,
            env,
            root,
            cache_dir,
            rebuild=rebuild,
            site_packages=_env.site_packages(),
            progress=self.progress,
            warm_record=warm_name,
            warm_files=[_native.__file__],
        )
        key, path = outcome["key"], outcome["path"]
        self._loaded_key = key
        if key in _loaded:  # a rebuild of a library this process already holds
            return _loaded[key]
        for warning in outcome.get("warnings", []):
            print(f"abicache: warning: {warning}", file=sys.stderr)
        if self.verbose:
            how = "hit" if outcome["hit"] else "built"
            print(f"abicache: {how} `{self.name}` key {key} in {outcome['seconds']:.3f}s: {path}", file=sys.stderr)
        return self._register_checked(key, path)

    def _register_checked(self, key: str, path: str) -> Tuple[str, Optional[ModuleType]]:
        module = self._register(path)
        self._check_required_ops()
        _loaded[key] = (path, module)
        _loaded_names.add(self.name)
        return path, module

    def _register(self, path: str) -> Optional[ModuleType]:
        if self.is_python_module:
            import importlib.util

            spec = importlib.util.spec_from_file_location(self.name, path)
            if spec is None or spec.loader is None:
                from . import _native

                raise _native.Error(f"cannot import `{path}` as module `{self.name}`")
            module = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(module)
            return module
        import torch

        torch.ops.load_library(path)  # type: ignore[no-untyped-call]
        return None

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
        missing = [
            op
            for op in self.required_ops
            if not (schemas is not None and schemas(f"{self.namespace}::{op}"))
            and not hasattr(getattr(torch.ops, self.namespace), op)
        ]
        if missing:
            from . import _native

            raise _native.Error(
                f"extension `{self.name}` loaded but `torch.ops.{self.namespace}` lacks "
                + ", ".join(f"`{op}`" for op in missing)
                + "; check the TORCH_LIBRARY registration's namespace and op names "
                "(or pass `namespace=`/`required_ops=` matching them)"
            )


__all__ = [
    "AbiError",
    "BuildError",
    "Error",
    "LockTimeout",
    "TorchOpsExtension",
    "default_cache_dir",
    "environment",
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
    "load": "_load",
    "load_inline": "_inline",
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
