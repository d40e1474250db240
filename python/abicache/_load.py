"""``abicache.load``: a drop-in for ``torch.utils.cpp_extension.load``, and
what it shares with ``abicache.load_inline``: torch's handling of flags and
include paths, same-name reloads, the ``build_directory`` copy and torch's
build-error text. Keying and building stay in Rust (``TorchOpsExtension``)."""

from __future__ import annotations

import os
import threading
from types import ModuleType
from typing import TYPE_CHECKING, Callable, Dict, Iterable, List, Optional, Tuple, Union

from . import TorchOpsExtension

if TYPE_CHECKING:
    from . import StrPath

# base name -> {key of the extension under its base name: (name it was
# imported as, library path, module or None)}: what load/load_inline loaded
# in this process, so that a changed extension is imported under a new name
# (as torch does) and an unchanged one returns its first result.
_by_name: Dict[str, Dict[str, Tuple[str, str, Optional[ModuleType]]]] = {}
_locks: Dict[str, threading.Lock] = {}
_locks_lock = threading.Lock()


# What makes `shlex.split` (POSIX mode) do more than return a stripped word:
# blanks between words, quotes and escapes.
_SHELL_SPECIAL = frozenset(" \t\n\r\x0b\x0c\"'\\")


def split_flags(flags: Optional[Iterable[str]], what: str) -> List[str]:
    """Flags as torch's command line sees them: each entry stripped, empty
    ones dropped, and one entry holding several (``"-O0 -Wall"``) split as a
    POSIX shell splits it (torch joins the flags with spaces into a ninja
    file that ``sh`` runs)."""
    if flags is None:
        return []
    if isinstance(flags, str):
        flags = [flags]
    out: List[str] = []
    for flag in flags:
        if not isinstance(flag, str):
            raise TypeError(f"{what} must be strings, got {type(flag).__name__} ({flag!r})")
        flag = flag.strip()
        if not any(c in _SHELL_SPECIAL for c in flag):
            # One plain word (most flags): what `shlex.split` would return,
            # without importing it on the warm path.
            if flag:
                out.append(flag)
            continue
        import shlex

        try:
            out.extend(shlex.split(flag))
        except ValueError as e:
            raise ValueError(
                f"{what} entry {flag!r} cannot be split into arguments the way torch's command line "
                f"would ({e}); balance its quotes, or pass each argument as its own list entry"
            ) from None
    return out


def strip_paths(paths: Union[StrPath, Iterable[StrPath], None], what: str) -> List[str]:
    """Include paths as torch uses them: surrounding whitespace stripped,
    then made absolute against the current directory."""
    if paths is None:
        return []
    if isinstance(paths, (str, os.PathLike)):
        paths = [paths]
    out: List[str] = []
    for p in paths:
        if not isinstance(p, (str, os.PathLike)):
            raise TypeError(f"{what} must be paths (str or os.PathLike), got {type(p).__name__} ({p!r})")
        out.append(os.path.abspath(os.fspath(p).strip()))
    return out


def refuse_unsupported(with_sycl: Optional[bool], sycl: object, function: str) -> None:
    """Raises :class:`abicache.Error` for SYCL builds, which abicache does not do."""
    if with_sycl or sycl:
        from . import _native

        raise _native.Error(
            f"abicache.{function} does not build SYCL sources (`with_sycl`, `sycl_sources`, `extra_sycl_cflags`); "
            f"use torch.utils.cpp_extension.{function} for those"
        )


def _name_lock(name: str) -> threading.Lock:
    with _locks_lock:
        return _locks.setdefault(name, threading.Lock())


def _with_torch_prefix(name: str, error: BaseException) -> BaseException:
    """``error`` (a build failure) re-raised with torch's ``Error building
    extension '<name>'`` in front, keeping ``.output`` and ``.command``."""
    from . import _native

    wrapped = _native.BuildError(f"Error building extension '{name}': {error}")
    wrapped.output = getattr(error, "output", None)
    wrapped.command = getattr(error, "command", None)
    return wrapped


def _load_as(ext: TorchOpsExtension) -> Tuple[str, Optional[ModuleType]]:
    # `abicache._native` is imported only when something failed (a warm
    # load answered by the record never loads it).
    try:
        return ext._load()
    except Exception as e:
        from . import _native

        if isinstance(e, _native.BuildError):
            raise _with_torch_prefix(ext.name, e) from e
        raise


# `ioctl(dest, FICLONE, src)`: a copy that shares the source's blocks until
# either is written (btrfs, XFS, bcachefs); elsewhere it fails and the bytes
# are copied.
_FICLONE = 0x40049409


def copy_into(build_directory: StrPath, name: str, library: str) -> str:
    """Puts a copy of ``library`` (a verified cache entry) at
    ``<build_directory>/<name>.so``: a reflink where the file system can make
    one, else a plain copy, written under a temporary name and renamed into
    place. Never a link: writing through the copy (``chmod``, ``patchelf``,
    ``cp x.so``) cannot change the cache entry. Left alone when it already
    is a regular file of the library's size and modification time."""
    import fcntl
    import shutil
    import stat

    directory = os.path.abspath(os.fspath(build_directory))
    os.makedirs(directory, exist_ok=True)
    dest = os.path.join(directory, f"{name}.so")
    src = os.open(library, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        st = os.fstat(src)
        try:
            now = os.lstat(dest)
            if stat.S_ISREG(now.st_mode) and (now.st_size, now.st_mtime_ns) == (st.st_size, st.st_mtime_ns):
                return dest
        except OSError:
            pass
        temp = os.path.join(directory, f".{name}.so.{os.getpid()}.{threading.get_ident()}.tmp")
        if os.path.lexists(temp):
            os.unlink(temp)
        out = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o755)
        try:
            try:
                fcntl.ioctl(out, _FICLONE, src)
            except OSError:
                with open(src, "rb", closefd=False) as r, open(out, "wb", closefd=False) as w:
                    shutil.copyfileobj(r, w, 1 << 20)
            os.utime(out, ns=(st.st_atime_ns, st.st_mtime_ns))
        except BaseException:
            os.close(out)
            os.unlink(temp)
            raise
        os.close(out)
    finally:
        os.close(src)
    os.replace(temp, dest)
    return dest


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
) -> Union[ModuleType, str]:
    """What ``load`` and ``load_inline`` do once their sources are files:
    normalise flags and paths as torch does, load (a hit, or one build), and
    return the module or the library path.

    Same-name reloads: the first load of ``name`` in this process imports it
    as ``name``. A later load of ``name`` whose key (under that name)
    differs from every earlier one is a changed extension: a Python module
    is then built and imported as ``name_v1``, ``name_v2``, … (torch's
    scheme: pybind11 returns an already-imported module for a name it has
    seen); a ``torch.ops`` library keeps its name (a different path loads
    fine). A load whose key matches an earlier one returns that first result.

    ``store_sources`` (``load_inline``): the sources are stand-in paths
    under ``fingerprint_root`` that name the generated files' contents; the
    callable stores the files and returns their directory, called only when
    the warm-load record does not answer (see ``TorchOpsExtension._materialize``).
    """
    if not isinstance(name, str):
        raise TypeError(f"name must be a string, got {type(name).__name__}")
    options = dict(
        namespace=name,
        extra_cflags=split_flags(extra_cflags, "extra_cflags"),
        extra_cuda_cflags=split_flags(extra_cuda_cflags, "extra_cuda_cflags"),
        extra_ldflags=split_flags(extra_ldflags, "extra_ldflags"),
        extra_include_paths=strip_paths(extra_include_paths, "extra_include_paths"),
        requires_cuda=with_cuda,
        is_python_module=is_python_module,
        cache_dir=cache_dir,
        verbose=verbose,
        fingerprint_root=fingerprint_root,
    )

    def extension(as_name: str) -> TorchOpsExtension:
        ext = TorchOpsExtension(as_name, sources, **options)  # type: ignore[arg-type]
        ext._store_sources = store_sources
        return ext

    with _name_lock(name):
        loaded = _by_name.setdefault(name, {})
        ext = extension(name)
        # The key only when the name was loaded before: from the warm-load
        # record when it answers (a same-process repeat costs its checks,
        # no native call), else a native key.
        key = ext._current_key() if loaded else None
        if key is not None and key in loaded:
            as_name, path, module = loaded[key]
        else:
            as_name = f"{name}_v{len(loaded)}" if loaded and is_python_module else name
            if as_name != name:
                ext = extension(as_name)
            path, module = _load_as(ext)
            if key is None:
                key = ext._loaded_key
            assert key is not None
            loaded[key] = (as_name, path, module)
    if build_directory is not None:
        try:
            path = copy_into(build_directory, as_name, path)
        except OSError as e:
            # A read-only build directory (some packages keep theirs in a
            # read-only site-packages): the library is the cache's, loaded.
            import warnings

            warnings.warn(
                f"abicache: could not copy the library to `{as_name}.so` in build_directory "
                f"`{build_directory}` ({e}); `{as_name}` is loaded from the cache instead, at `{path}`. Code that looks for the library "
                "in that directory will not find it: make the directory writable or pass a writable "
                "build_directory",
                RuntimeWarning,
                stacklevel=3,
            )
    if is_python_module:
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
      (``D/<name>_v1.so`` for a reload), a link to the verified cache entry;
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
    if is_standalone:
        from . import _native

        raise _native.Error(
            "abicache.load does not build standalone executables (`is_standalone=True`); "
            "use torch.utils.cpp_extension.load for those"
        )
    refuse_unsupported(with_sycl, extra_sycl_cflags, "load")
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
