"""The drop-ins for ``torch.utils.cpp_extension``: ``load``, and what
``load_inline`` (``abicache._inline``) shares with it. This is their warm
path (flag and path normalisation, same-name reloads, the load); what only a
build, an error, a shell-quoted flag or ``build_directory`` needs is in
``abicache._load``, imported on first use."""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any, Callable, Dict, Iterable, List, Optional, Set, Tuple, Union

from ._extension import TorchOpsExtension, _registry_lock, paths

if TYPE_CHECKING:
    from types import ModuleType

    from . import StrPath

# base name -> {key of the extension under its base name: (name it was
# imported as, library path, module or None)}: what load/load_inline loaded
# in this process, so that a changed extension is imported under a new name
# (as torch does) and an unchanged one returns its first result.
_by_name: Dict[str, Dict[str, Tuple[str, str, Optional[ModuleType]]]] = {}
_dropin_locks: Dict[str, threading.Lock] = {}
# Every name this process imported (or registered) an extension as through
# load/load_inline, and every name interception handed to torch's fallback:
# a later changed load never reuses one (`fresh_name`).
_taken: Set[str] = set()

# What makes `shlex.split` (POSIX mode) do more than return a stripped word:
# blanks between words, quotes and escapes.
_SHELL_SPECIAL = frozenset(" \t\n\r\x0b\x0c\"'\\")


def fresh_name(name: str) -> str:
    """``<name>_v<N>`` for the smallest ``N`` >= 1 that is neither in
    ``sys.modules`` nor taken in this process (``_taken``): the name a
    changed extension is imported as, so that the import runs its new code
    (pybind11 and CPython return the module already imported under a name)."""
    import sys

    version = 1
    while f"{name}_v{version}" in _taken or f"{name}_v{version}" in sys.modules:
        version += 1
    return f"{name}_v{version}"


def fallback_name(name: str) -> str:
    """The name interception gives torch's function when abicache failed a
    call for ``name``: ``name`` itself unless this process already loaded an
    extension under it (through abicache, or through an earlier fallback),
    else a fresh name (``fresh_name``; torch's versioner does the same for a
    changed reload), so the fallback never returns the module already
    imported. The name returned is taken."""
    with _registry_lock:
        chosen = fresh_name(name) if _by_name.get(name) or name in _taken else name
        _taken.add(chosen)
        return chosen


def split_flags(flags: Optional[Iterable[str]], what: str) -> List[str]:
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


def load_sources(
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
    tvm_ffi: Optional[Dict[str, Any]] = None,
) -> Union[ModuleType, str, Any]:
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
    #
    # `tvm_ffi` (`abicache.tvm_ffi`): a TVM-FFI module (`keep_module_alive`,
    # `cuda_archs`), keyed and built as one and returned as the
    # `tvm_ffi.Module` that `tvm_ffi.load_module` gives.
    if not isinstance(name, str):
        raise TypeError(f"name must be a string, got {type(name).__name__}")
    options = dict(
        namespace=name,
        extra_cflags=split_flags(extra_cflags, "extra_cflags"),
        extra_cuda_cflags=split_flags(extra_cuda_cflags, "extra_cuda_cflags"),
        extra_ldflags=split_flags(extra_ldflags, "extra_ldflags"),
        extra_include_paths=paths(extra_include_paths, "extra_include_paths", strip=True),
        requires_cuda=with_cuda,
        is_python_module=is_python_module,
        cache_dir=cache_dir,
        verbose=verbose,
        fingerprint_root=fingerprint_root,
    )
    if tvm_ffi is not None:
        options["cuda_archs"] = tvm_ffi["cuda_archs"]
    with _registry_lock:
        lock = _dropin_locks.setdefault(name, threading.Lock())
    with lock:
        loaded = _by_name.setdefault(name, {})
        ext = TorchOpsExtension(name, sources, **options)  # type: ignore[arg-type]
        ext._store_sources = store_sources
        if tvm_ffi is not None:
            ext._as_tvm_ffi(tvm_ffi["keep_module_alive"])
        # The key only when the name was loaded before: from the warm-load
        # record when it answers (a same-process repeat costs its checks,
        # no native call), else a native key.
        key = ext._current_key() if loaded else None
        if key is not None and key in loaded:
            as_name, path, module = loaded[key]
        else:
            # A name taken before (an earlier load, or torch's fallback) is
            # never imported again: its module would be returned.
            if is_python_module and (loaded or name in _taken):
                with _registry_lock:
                    as_name = fresh_name(name)
            else:
                as_name = name
            if as_name != name:
                ext = TorchOpsExtension(as_name, sources, **options)  # type: ignore[arg-type]
                ext._store_sources = store_sources
                if tvm_ffi is not None:
                    ext._as_tvm_ffi(tvm_ffi["keep_module_alive"])
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
            with _registry_lock:
                _taken.add(as_name)
    if build_directory is not None:
        from ._load import copy_to_build_directory

        path = copy_to_build_directory(build_directory, as_name, path)
    if is_python_module or tvm_ffi is not None:
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
    return load_sources(
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


# The function as the package exports it (`help(abicache)`).
load.__module__ = "abicache"
