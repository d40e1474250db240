"""abicache: build, cache and load JIT-compiled PyTorch extensions under a
key that reflects what each binary really depends on.

    import abicache
    ext = abicache.TorchOpsExtension("muladd_example", ["ops.cpp", "kernel.cpp"], required_ops=["muladd"])
    ext.load()          # a cache hit, or one build shared by every process and venv that can use it
    torch.ops.muladd_example.muladd(a, b, 1.0)

``abicache.load`` has the signature of ``torch.utils.cpp_extension.load``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Dict, Optional

from . import _native
from ._env import environment, visible_cuda_archs
from ._extension import TorchOpsExtension
from ._native import AbiError, BuildError, Error, LockTimeout

if TYPE_CHECKING:
    from ._load import load

__all__ = [
    "AbiError",
    "BuildError",
    "Error",
    "LockTimeout",
    "TorchOpsExtension",
    "default_cache_dir",
    "environment",
    "load",
    "stats",
    "torch_stable_abi_target_define",
    "visible_cuda_archs",
]


def torch_stable_abi_target_define(major: int, minor: int) -> str:
    """``-DTORCH_TARGET_VERSION=0x...`` for a libtorch stable-ABI target,
    e.g. ``(2, 10)`` → ``-DTORCH_TARGET_VERSION=0x020A000000000000``."""
    return _native.torch_stable_abi_target_define(major, minor)


def default_cache_dir() -> str:
    """The cache root used when ``cache_dir`` is not given."""
    return _native.default_cache_dir()


def stats(cache_dir: Optional[str] = None) -> Dict[str, Any]:
    """The cache's counters (``hits``, ``misses``, ``builds``, ``errors``, …)
    and contents (``entries``, ``bytes``), shared by all processes using it."""
    return _native.stats(cache_dir)


def __getattr__(name: str) -> Any:
    # `load` (the drop-in for torch's) is imported on first use: a warm
    # `TorchOpsExtension.load()` imports only what a hit needs.
    if name == "load":
        from ._load import load

        globals()["load"] = load
        return load
    raise AttributeError(f"module 'abicache' has no attribute {name!r}")
