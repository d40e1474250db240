"""``TorchOpsExtension``: a hit from the warm-load record
(``abicache._warm_record``) with no native module, else the native path
(``abicache._native_path``), imported on first use."""

from __future__ import annotations

import itertools
import os
import sys
import threading
from typing import TYPE_CHECKING, Any, Callable, Dict, Iterable, List, Optional, Sequence, Set, Tuple, Union

from ._warm_record import check_record, count_hit, key_inputs_hold, rebuild_set, record_name

if TYPE_CHECKING:
    from types import ModuleType

    from . import ProgressCallback, StableTargetLike, StrPath

# key -> (library path, module or None): what this process has loaded.
_loaded: Dict[str, Tuple[str, Optional[ModuleType]]] = {}
# name -> lock, so threads loading one extension build and load it once.
_name_locks: Dict[str, threading.Lock] = {}
# names with at least one loaded key: only those need a scan before the build call.
_loaded_names: Set[str] = set()
# warm-load record name -> that record, once every check in it held in this
# process: a same-process repeat then only checks what the key was computed
# from (`key_inputs_hold`, a few `stat`s), not the cache and library again.
_checked_records: Dict[str, Any] = {}
_registry_lock = threading.Lock()


# Libraries loaded from a descriptor in this process so far (`fd_path`).
_fd_loads = itertools.count()


def fd_path(fd: int) -> str:
    """A path that opens the descriptor ``fd`` (``/proc/self/fd/N``), spelled
    as no earlier load in this process spelled one. The dynamic loader
    returns the library it already loaded under a name it is given again,
    and a descriptor's number is free for another file once it is closed
    after the load; a new spelling per load (the load's ordinal in binary as
    ``./`` and ``.//`` components, which the kernel skips) makes that
    harmless, so no loaded library holds a descriptor."""
    digits = "".join(".//" if bit == "1" else "./" for bit in bin(next(_fd_loads))[2:])
    return f"/proc/self/fd/{digits}{fd}"


def import_module_from_fd(name: str, path: str, fd: int) -> ModuleType:
    # The library `path`, opened and checked as `fd`, imported from that
    # descriptor (`fd_path`) as the Python module `name`; its `__file__` is
    # `path`. (Here, not in `_native_path`: a warm load of a Python module
    # loads no native module.)
    import importlib.machinery
    import importlib.util

    opened = fd_path(fd)
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


def paths(value: Union[StrPath, Iterable[StrPath], None], what: str, strip: bool = False) -> List[str]:
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


def strings(value: Union[str, Iterable[str], None], what: str) -> List[str]:
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

    # The class as the package exports it (`repr`, `help(abicache)`).
    __module__ = "abicache"

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
        self.required_ops = strings(required_ops, "required_ops")
        self.sources = paths(sources, "sources")
        self.extra_include_paths = paths(extra_include_paths, "extra_include_paths")
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
            "extra_cflags": strings(extra_cflags, "extra_cflags"),
            "extra_cuda_cflags": strings(extra_cuda_cflags, "extra_cuda_cflags"),
            "extra_ldflags": strings(extra_ldflags, "extra_ldflags"),
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
        # `abicache.tvm_ffi`'s: loaded with `tvm_ffi.load_module` (this
        # `keep_module_alive`) instead of registered with torch.
        self._tvm_ffi_keep_alive: Optional[bool] = None

    def _as_tvm_ffi(self, keep_module_alive: bool) -> None:
        # Makes this a TVM-FFI module (`abicache.tvm_ffi`): keyed and built as
        # one (`kind` in the spec, so the warm-load record's name too) and
        # loaded with `tvm_ffi.load_module`. Called before any load.
        self._spec["kind"] = "tvm_ffi"  # `_warm_spec` is the same dict
        self._tvm_ffi_keep_alive = keep_module_alive

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
        if not rebuild_set():
            warm_name = record_name(self._warm_spec, self._warm_root, self.cache_dir)
            record = _checked_records.get(warm_name)
            if record is not None and key_inputs_hold(record):
                key: str = record["key"]
                return key
            record = check_record(warm_name, self.cache_dir)
            if record is not None:
                os.close(record.pop("fd"))
                _checked_records[warm_name] = record
                key = record["key"]
                return key
        return self.key

    def _load(self) -> Tuple[str, Optional[ModuleType]]:
        # `_loaded_or_built`, then, when `ABICACHE_RECORD` names a prebuild
        # plan (`abicache run --record`), the load recorded into it.
        loaded = self._loaded_or_built()
        plan = os.environ.get("ABICACHE_RECORD", "").strip()
        if plan:
            from ._native_path import record

            record(self, plan)
        return loaded

    def _loaded_or_built(self) -> Tuple[str, Optional[ModuleType]]:
        # The path and (for a Python module) the module: a hit from the
        # warm-load record (no native call), else the native path.
        # `ABICACHE_REBUILD` set (not blank) is the native path's to read
        # (`_native.rebuild_requested`, the one rule: `1` rebuilds, `0` does
        # not, any other value is an error); the record answers only when it
        # is unset or `0`.
        rebuild = rebuild_set()
        with _registry_lock:
            name_lock = _name_locks.setdefault(self.name, threading.Lock())
        with name_lock:
            warm_name = record_name(self._warm_spec, self._warm_root, self.cache_dir)
            if not rebuild:
                # A same-process repeat of a load this process checked: the
                # library is loaded; only the key's inputs need to hold.
                record = _checked_records.get(warm_name)
                if record is not None and record["key"] in _loaded and key_inputs_hold(record):
                    self._loaded_key = record["key"]
                    return _loaded[record["key"]]
            record = None if rebuild else check_record(warm_name, self.cache_dir)
            if record is not None:
                key = record["key"]
                fd = record.pop("fd")
                _checked_records[warm_name] = record
                if key in _loaded:
                    os.close(fd)
                    self._loaded_key = key
                    return _loaded[key]
                if count_hit(record):
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
        # ``fd`` and closes it: the loader maps the library, and knows it by
        # a name no other load uses (``fd_path``), so a loaded library holds
        # no descriptor.
        module = None
        try:
            if self._tvm_ffi_keep_alive is not None:
                from .tvm_ffi import load_module_from

                module = load_module_from(fd_path(fd), self._tvm_ffi_keep_alive)
            elif self.is_python_module:
                module = import_module_from_fd(self.name, path, fd)
            else:
                import ctypes

                import torch

                try:
                    ctypes.CDLL(fd_path(fd))
                except OSError as e:
                    raise OSError(f"Could not load this library: {path} ({e})") from e
                torch.ops.loaded_libraries.add(path)
        finally:
            os.close(fd)
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
