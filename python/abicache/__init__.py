"""abicache: build, cache and load JIT-compiled PyTorch extensions under a
key that reflects what each binary really depends on.

    import abicache
    ext = abicache.TorchOpsExtension("muladd_example", ["ops.cpp", "kernel.cpp"], required_ops=["muladd"])
    ext.load()          # a cache hit, or one build shared by every process and venv that can use it
    torch.ops.muladd_example.muladd(a, b, 1.0)

``abicache.load`` and ``abicache.load_inline`` have the signatures of
``torch.utils.cpp_extension.load`` and ``load_inline``; ``abicache.tvm_ffi.load``
and ``load_inline`` those of ``tvm_ffi.cpp.load`` and ``load_inline``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, List

# The code lives in modules named for what they do, each imported on first
# use of a name it defines (`__getattr__` below): `import abicache` runs
# only this file. A warm `TorchOpsExtension(...).load()` then imports
# `_extension` and `_warm_record` (the warm-load record's reader) and no
# native module; `load` adds `_dropins`. The type aliases exist for type
# checkers only (building them costs 0.2 ms).
if TYPE_CHECKING:
    import os
    from typing import Callable, Dict, Sequence, Tuple, Union

    from ._api import default_cache_dir, prebuild, stats, torch_stable_abi_target_define
    from ._dropins import load
    from ._env import environment, visible_cuda_archs
    from ._extension import TorchOpsExtension
    from ._inline import load_inline
    from ._intercept import intercept
    from ._native import AbiError, BuildError, CacheMiss, Error, LockTimeout
    from ._warm_record import (
        WARM_COMPILER_HIT_VARIABLES,
        WARM_COMPILER_ROW,
        WARM_COUNT_ROW,
        WARM_CPU_IDENTITY_FIELDS,
        WARM_CPUINFO_READ,
        WARM_CUDA_HIT_VARIABLES,
        WARM_ENTRY_ROW,
        WARM_ENVIRON_ROW,
        WARM_GPU_LISTING,
        WARM_GPUS_ROW,
        WARM_HIT_VARIABLES,
        WARM_IDENTITY_ROW,
        WARM_ISA_ROW,
        WARM_RECORD_FIELDS,
        WARM_RECORD_FORMAT,
        WARM_STAMP_ROW,
    )

    StrPath = Union[str, "os.PathLike[str]"]
    StableTargetLike = Union[str, Tuple[int, int], Sequence[int]]
    ProgressCallback = Callable[[Dict[str, Any]], None]

__all__ = [
    "AbiError",
    "BuildError",
    "CacheMiss",
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

# Each name of the package, by the module that defines it, imported on
# first use (so a warm load imports only what a hit needs: no native
# module, no environment probe). The exceptions are defined by `_native`;
# the warm-load record's format (`WARM_*`) by `_warm_record`.
_LAZY = {
    "TorchOpsExtension": "_extension",
    "load": "_dropins",
    "load_inline": "_inline",
    "default_cache_dir": "_api",
    "prebuild": "_api",
    "stats": "_api",
    "torch_stable_abi_target_define": "_api",
    "intercept": "_intercept",
    "environment": "_env",
    "visible_cuda_archs": "_env",
    "Error": "_native",
    "BuildError": "_native",
    "AbiError": "_native",
    "LockTimeout": "_native",
    "CacheMiss": "_native",
    "WARM_RECORD_FORMAT": "_warm_record",
    "WARM_RECORD_FIELDS": "_warm_record",
    "WARM_ENVIRON_ROW": "_warm_record",
    "WARM_STAMP_ROW": "_warm_record",
    "WARM_IDENTITY_ROW": "_warm_record",
    "WARM_ENTRY_ROW": "_warm_record",
    "WARM_COUNT_ROW": "_warm_record",
    "WARM_ISA_ROW": "_warm_record",
    "WARM_GPUS_ROW": "_warm_record",
    "WARM_COMPILER_ROW": "_warm_record",
    "WARM_HIT_VARIABLES": "_warm_record",
    "WARM_CUDA_HIT_VARIABLES": "_warm_record",
    "WARM_COMPILER_HIT_VARIABLES": "_warm_record",
    "WARM_CPU_IDENTITY_FIELDS": "_warm_record",
    "WARM_CPUINFO_READ": "_warm_record",
    "WARM_GPU_LISTING": "_warm_record",
    "_native": None,
    "tvm_ffi": None,
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
