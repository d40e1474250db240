"""``abicache.load``: a drop-in for ``torch.utils.cpp_extension.load``."""

from __future__ import annotations

from types import ModuleType
from typing import List, Optional, Union

from . import _native
from ._extension import StrPath, TorchOpsExtension


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
) -> Union[ModuleType, str]:
    """Build (or reuse) and load a C++/CUDA extension, like
    ``torch.utils.cpp_extension.load`` with the same signature and return
    values: the imported module when ``is_python_module`` (the default), else
    the library path after ``torch.ops.load_library``. Switching is a one-line
    change: ``from abicache import load``.

    What differs from torch's ``load``:

    - The binary is cached under a key of what it depends on (sources and the
      headers they include, flags, Python ABI when used, torch release or
      stable-ABI target, CUDA, archs), not under ``name`` in a build
      directory: a hit costs a hash of the sources and a ``dlopen``, never a
      ninja run, and editing a header rebuilds.
    - ``build_directory`` is the cache root (default ``ABICACHE_DIR``, else
      ``~/.cache/abicache``); entries live under ``v1/`` inside it, and are
      shared safely by processes and environments.
    - ``verbose`` prints whether it was a hit; build progress always goes to
      stderr while a build runs.
    - Errors are :class:`abicache.BuildError` (a ``RuntimeError``, with the
      compiler's ``.output`` and ``.command``), :class:`abicache.AbiError` and
      :class:`abicache.LockTimeout`; missing sources raise ``FileNotFoundError``.
    - ``keep_intermediates`` is accepted and ignored (objects are kept in the
      object cache so shared and unchanged units are not recompiled).
    - ``is_standalone`` (an executable) and SYCL (``with_sycl``,
      ``extra_sycl_cflags``) are not supported and raise :class:`abicache.Error`.
    - Loading the same extension twice in one process returns the first
      result; torch rebuilds and re-imports under a new name instead.
    """
    if is_standalone:
        raise _native.Error(
            "abicache.load does not build standalone executables (`is_standalone=True`); "
            "use torch.utils.cpp_extension.load for those"
        )
    if with_sycl or extra_sycl_cflags:
        raise _native.Error(
            "abicache.load does not build SYCL sources (`with_sycl`, `extra_sycl_cflags`); "
            "use torch.utils.cpp_extension.load for those"
        )
    del keep_intermediates  # accepted for compatibility; see the docstring
    ext = TorchOpsExtension(
        name,
        sources,
        extra_cflags=extra_cflags or (),
        extra_cuda_cflags=extra_cuda_cflags or (),
        extra_ldflags=extra_ldflags or (),
        extra_include_paths=extra_include_paths or (),
        requires_cuda=with_cuda,
        is_python_module=is_python_module,
        cache_dir=build_directory,
        verbose=verbose,
    )
    path, module = ext._load()
    if is_python_module:
        assert module is not None
        return module
    return path
