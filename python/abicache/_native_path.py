"""What ``TorchOpsExtension`` does through the native module: the load the
warm-load record did not answer (a miss, a build, a changed dependency), the
key, its payload and explanation, and the rarer parts of a load (importing
a Python module, a missing op's error).

Kept out of ``_extension.py``: a warm load runs that module and, when its
record answers, never imports this one (each function a module defines
costs every ``import abicache`` ~5 µs).
"""

from __future__ import annotations

import json
import os
import stat
import sys
from types import ModuleType
from typing import TYPE_CHECKING, Any, Dict, List, Optional, Tuple

from . import _env, _layers, _native
from ._extension import _loaded, _loaded_names
from ._warm_record import trusted_owner

if TYPE_CHECKING:
    from ._extension import TorchOpsExtension


def root(ext: TorchOpsExtension) -> str:
    """The fingerprint root of ``ext``: the one it was given, else Rust's
    rule (``_native.fingerprint_root``: the common directory of the sources'
    directories and the include paths), which files are named relative to
    in the payload, so moving the project keeps the key."""
    return _root_of(ext, spec_json(ext))


def _root_of(ext: TorchOpsExtension, spec: str) -> str:
    # `root` when the spec's JSON is already made.
    if ext._root is not None:
        return ext._root
    return _native.fingerprint_root(spec)


def spec_json(ext: TorchOpsExtension) -> str:
    """The spec of ``ext`` as the native module reads it (``load_inline``'s
    sources stored first: ``ext._materialize``)."""
    ext._materialize()
    return json.dumps({k: v for k, v in ext._spec.items() if v is not None})


def native_args(ext: TorchOpsExtension) -> Tuple[str, str, str, Optional[str]]:
    """The native calls' first arguments: spec, environment, root, cache directory."""
    spec = spec_json(ext)
    env = _env.environment_json(tvm_ffi=ext._spec.get("kind") == "tvm_ffi")
    return spec, env, _root_of(ext, spec), ext.cache_dir


def record(ext: TorchOpsExtension, plan: str) -> None:
    """Records ``ext`` (just loaded) into the prebuild plan directory
    ``plan`` (``ABICACHE_RECORD``): its spec, the environment facts of its
    key and a copy of every file the key hashed (``load_inline``'s generated
    sources stored first). A failure is raised: a recording run that cannot
    record must not look complete."""
    spec, env, root_dir, cache_dir = native_args(ext)
    added = _native.record_plan_entry(plan, spec, env, root_dir, cache_dir)
    if ext.verbose and added:
        print(f"abicache: recorded `{ext.name}` into the prebuild plan {plan}", file=sys.stderr)


# How many times a library that vanished between the lookup and the load
# (gc, a concurrent rebuild) is looked up again before its error is raised.
_LOAD_ATTEMPTS = 3


# The libraries whose PTX-JIT note (``gpu_jit``) this process printed.
_jit_said: set = set()


def load(ext: TorchOpsExtension, warm_name: str) -> Tuple[str, Optional[ModuleType]]:
    """``ext``'s load through the native module: a hit (verified, counted),
    or one build shared by every process (a rebuild when
    ``ABICACHE_REBUILD=1``); then registered as ``ext._register_checked``
    does. Asks the native module to write the warm-load record
    ``warm_name`` for the next process. A library removed between the
    lookup and the load is a miss: looked up (or rebuilt) again; a layer's
    library that fails the load's checks is skipped with a warning and the
    extension built locally (no source is asked again in this load)."""
    rebuild = _native.rebuild_requested()
    spec, env, root_dir, cache_dir = native_args(ext)
    if ext.name in _loaded_names:
        key = _native.key(spec, env, root_dir, cache_dir)
        if key in _loaded:
            ext._loaded_key = key
            return _loaded[key]
    layers = _layers.wheel_layers()
    misses = 0  # libraries removed or replaced between the lookup and the load
    while True:
        outcome = _native.build(
            spec,
            env,
            root_dir,
            cache_dir,
            rebuild=rebuild,
            site_packages=_env.site_packages(),
            progress=ext.progress,
            warm_record=warm_name,
            warm_files=[_native.__file__],
            layers=layers,
        )
        key, path = outcome["key"], outcome["path"]
        ext._loaded_key = key
        if key in _loaded:  # a rebuild of a library this process already holds
            return _loaded[key]
        if misses == 0:
            for warning in outcome.get("warnings", []):
                print(f"abicache: warning: {warning}", file=sys.stderr)
        if ext.verbose:
            how = "hit" if outcome["hit"] else "built"
            print(f"abicache: {how} `{ext.name}` key {key} in {outcome['seconds']:.3f}s: {path}", file=sys.stderr)
            if outcome.get("gpu_jit") and path not in _jit_said:
                # Said once per library and process: only PTX serves a GPU.
                _jit_said.add(path)
                print(f"abicache: note: {outcome['gpu_jit']}", file=sys.stderr)
            for line in outcome.get("one_shot", []):
                print(f"abicache: {line}", file=sys.stderr)
        layer = outcome.get("layer", False)
        fd = open_checked(path, outcome.get("library_stamp"), layer)
        if fd is None and layer:
            # A layer's library changed since the native checks (its layer is
            # not ours to repair): built locally, as Rust skips a bad layer entry.
            print(
                f"abicache: warning: read-only cache layer library `{path}` changed after it was "
                f"verified; `{ext.name}` is built locally instead",
                file=sys.stderr,
            )
            # A rebuild asks no source, configured layers included, so this
            # happens once per load and is not counted as a miss.
            layers, rebuild = [], True
            continue
        if fd is None:
            # The library is gone or not the file the lookup verified (gc
            # evicted the entry, or a rebuild replaced it, since): a miss,
            # looked up again.
            misses += 1
            if misses == _LOAD_ATTEMPTS:
                raise _native.Error(
                    f"the library `{path}` of `{ext.name}` was removed or replaced after it was verified, "
                    f"{_LOAD_ATTEMPTS} times in a row; is a `gc` with `ABICACHE_GC_GRACE=0` running in a loop?"
                )
            continue
        return ext._register_checked(key, path, fd)


def open_checked(path: str, stamp: Optional[List[int]], layer: bool = False) -> Optional[int]:
    """``path`` opened (``O_NOFOLLOW``) when it is still the file the native
    lookup verified (``stamp``: ``[dev, ino, size, mtime_ns, ctime_ns]``, the
    verified descriptor's; none: the file changed while it was verified), a
    regular file of this user's (or, when ``layer``, as the native outcome
    says of a read-only layer's library, e.g. an installed cache wheel's,
    root's: ``abicache._warm_record.trusted_owner``) that no one else can write, with one
    link (a layer's library may have several: ``uv pip install`` hard-links an
    installed cache wheel's files from its cache, and Rust's layer check
    accepts them too); else ``None`` (the descriptor closed)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return None
    st = os.fstat(fd)
    if (
        stamp is None
        or list(stamp) != [st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns]
        or not stat.S_ISREG(st.st_mode)
        or not trusted_owner(st.st_uid, os.geteuid(), layer)
        or st.st_mode & 0o022
        or (st.st_nlink != 1 and not layer)
    ):
        os.close(fd)
        return None
    return fd


def missing_ops(ext: TorchOpsExtension, missing: List[str]) -> _native.Error:
    """The error for a library that loaded without the ops ``missing``."""
    return _native.Error(
        f"extension `{ext.name}` loaded but `torch.ops.{ext.namespace}` lacks "
        + ", ".join(f"`{op}`" for op in missing)
        + "; check the TORCH_LIBRARY registration's namespace and op names "
        "(or pass `namespace=`/`required_ops=` matching them)"
    )


def call(method: str, ext: TorchOpsExtension) -> Any:
    """``_native.<method>`` of ``ext``'s spec, environment, root and cache."""
    result: Any = getattr(_native, method)(*native_args(ext))
    return result


def requires_cuda(ext: TorchOpsExtension) -> bool:
    """Whether ``ext`` is a CUDA extension, by the Rust rule."""
    return _native.requires_cuda(spec_json(ext))


def prepared(ext: TorchOpsExtension) -> Dict[str, Any]:
    """``_native.prepare`` of ``ext``: its key, payload and dependencies."""
    return _native.prepare(*native_args(ext))
