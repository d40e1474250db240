"""``TorchOpsExtension``: one extension, keyed, built once, loaded once."""

from __future__ import annotations

import json
import os
import sys
import threading
from types import ModuleType
from typing import Any, Callable, Dict, Iterable, List, Optional, Sequence, Set, Tuple, Union

from . import _env, _native

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
    """The common parent directory of the sources and include paths: files
    are named relative to it in the payload, so moving the project keeps the key."""
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
        self._spec: Dict[str, Any] = {
            "name": name,
            "namespace": namespace,
            "required_ops": self.required_ops,
            "sources": self.sources,
            "extra_cflags": _strings(extra_cflags, "extra_cflags"),
            "extra_cuda_cflags": _strings(extra_cuda_cflags, "extra_cuda_cflags"),
            "extra_ldflags": _strings(extra_ldflags, "extra_ldflags"),
            "extra_include_paths": self.extra_include_paths,
            "requires_cuda": requires_cuda,
            "is_python_module": self.is_python_module,
            "python_abi_dependent": python_abi_dependent,
            "torch_stable_abi_target": _stable_target(torch_stable_abi_target),
            "cuda_archs": cuda_archs,
        }
        self._spec_json = json.dumps({k: v for k, v in self._spec.items() if v is not None})
        if fingerprint_root is not None:
            self._root = os.path.abspath(os.fspath(fingerprint_root))
        else:
            self._root = _fingerprint_root(self.sources + [p + os.sep for p in self.extra_include_paths])
        # The key of the last load() in this process (for abicache.load's same-name reloads).
        self._loaded_key: Optional[str] = None

    @property
    def requires_cuda(self) -> bool:
        """Whether this is a CUDA extension: ``requires_cuda`` when given, else
        whether a source is a CUDA source (``.cu``), by the Rust rule."""
        return _native.requires_cuda(self._spec_json)

    def __repr__(self) -> str:
        return f"TorchOpsExtension({self.name!r}, {len(self.sources)} source(s))"

    def _args(self) -> Tuple[str, str, str, Optional[str]]:
        env = _env.environment_json()
        return self._spec_json, env, self._root, self.cache_dir

    def _prepared(self) -> Dict[str, Any]:
        return _native.prepare(*self._args())

    @property
    def key(self) -> str:
        """The cache key (32 hex digits) in this environment (remembered with
        a stamp of every file and directory it depends on)."""
        return _native.key(*self._args())

    @property
    def payload(self) -> List[str]:
        """The ``field=value`` lines the key is the BLAKE3 of."""
        payload: List[str] = self._prepared()["payload"]
        return payload

    def explain(self) -> str:
        """Why the key is what it is; on a miss, how the closest cached entry differs."""
        return _native.explain(*self._args())[0]

    def explanation(self) -> Dict[str, Any]:
        """:meth:`explain` as data: ``key``, ``cached``, ``python_abi``,
        ``torch_abi``, ``closest`` (``{"key", "changes": [{"kind", "field", …}]}``)."""
        return _native.explain(*self._args())[1]

    def load(self) -> str:
        """Hits or builds, registers the library with torch, checks
        ``required_ops`` and returns the library path. A second call in the
        same process (same key) does nothing but return the path."""
        return self._load()[0]

    def _load(self) -> Tuple[str, Optional[ModuleType]]:
        spec, env, root, cache_dir = self._args()
        with _name_lock(self.name):
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
                rebuild=_rebuild_requested(),
                site_packages=_env.site_packages(),
                progress=self.progress,
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

        ns = getattr(torch.ops, self.namespace)
        missing = [op for op in self.required_ops if not hasattr(ns, op)]
        if missing:
            raise _native.Error(
                f"extension `{self.name}` loaded but `torch.ops.{self.namespace}` lacks "
                + ", ".join(f"`{op}`" for op in missing)
                + "; check the TORCH_LIBRARY registration's namespace and op names "
                "(or pass `namespace=`/`required_ops=` matching them)"
            )
