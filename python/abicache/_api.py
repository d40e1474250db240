"""The package's functions besides ``TorchOpsExtension`` (imported on first
use by ``abicache.__getattr__``, so a warm load does not pay for them)."""

from __future__ import annotations

import os
import sys
from typing import Any, Dict, Iterable, Optional, Union

from . import _native


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


def prebuild(
    specs: Union[str, "os.PathLike[str]", Iterable[Union[str, "os.PathLike[str]"]]],
    *,
    pythons: Iterable[Union[str, "os.PathLike[str]"]] = (),
    envs: Iterable[Union[str, "os.PathLike[str]"]] = (),
    extensions: Iterable[str] = (),
    cache_dir: Optional[Union[str, "os.PathLike[str]"]] = None,
    jobs: Optional[int] = None,
    quiet: bool = True,
    matrix: Optional[str] = None,
    uv: Optional[Union[str, "os.PathLike[str]"]] = None,
    keep_envs: Optional[Union[str, "os.PathLike[str]"]] = None,
    plans: Iterable[Union[str, "os.PathLike[str]"]] = (),
) -> Dict[str, Any]:
    """``abicache prebuild`` from Python, e.g. in a package's build step.

    Keys every extension of the ``abicache.toml`` files ``specs`` for every
    interpreter in ``pythons`` (default: this one, when ``envs`` is empty too)
    and environment file in ``envs``, builds each distinct key once, and
    returns the coverage table: ``cells`` (``environment``, ``extension``,
    ``key``, ``status``: ``built``/``cached``/``key-only``/``refused``/``failed``),
    ``environments``, ``distinct_keys``, ``built``, ``cached``, ``key_only``, ``failed``.
    A failed build is reported in its cells, not raised.

    ``matrix`` (``"python=3.10,3.12 torch=2.12,2.15"``) adds every cell of
    that matrix; those no interpreter of ``pythons`` covers are created
    with ``uv`` (``uv``: its path, default ``uv`` on ``PATH``) in a
    throwaway directory, or kept in ``keep_envs``, as ``--matrix`` does.

    ``plans``: prebuild plan directories (``abicache run --record PLAN``,
    ``--plan``), whose every extension is built too, from the plan's own
    copy of its sources (``specs`` may then be empty).
    """
    if isinstance(specs, (str, os.PathLike)):
        specs = [specs]
    pythons = [os.fspath(p) for p in pythons]
    envs = [os.fspath(e) for e in envs]
    if not pythons and not envs and matrix is None:
        pythons = [sys.executable]
    return _native.prebuild(
        [os.fspath(s) for s in specs],
        pythons,
        envs,
        list(extensions),
        cache_dir,
        jobs=jobs,
        quiet=quiet,
        matrix=matrix,
        uv=None if uv is None else os.fspath(uv),
        keep_envs=None if keep_envs is None else os.fspath(keep_envs),
        plans=[os.fspath(p) for p in plans],
    )
