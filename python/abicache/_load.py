"""What ``abicache.load`` and ``abicache.load_inline`` need only off their
warm path: flags that need a shell's splitting, the ``build_directory``
copy, torch's build-error text and the refusals. Their warm path (flag and
path normalisation, same-name reloads, the load) is in ``_dropins.py``, so
a warm drop-in call answered by the warm-load record never imports this
module (each module costs a warm load ~0.1-0.2 ms)."""

from __future__ import annotations

import os
import threading
from typing import TYPE_CHECKING, List, Optional

if TYPE_CHECKING:
    from . import StrPath


def shell_split(flag: str, what: str) -> List[str]:
    """``flag`` (one entry of ``what``, holding blanks, quotes or escapes)
    split as a POSIX shell splits it: torch joins the flags with spaces into
    a ninja file that ``sh`` runs. Unbalanced quotes raise ``ValueError``."""
    import shlex

    try:
        return shlex.split(flag)
    except ValueError as e:
        raise ValueError(
            f"{what} entry {flag!r} cannot be split into arguments the way torch's command line "
            f"would ({e}); balance its quotes, or pass each argument as its own list entry"
        ) from None


def refuse_unsupported(with_sycl: Optional[bool], sycl: object, function: str, is_standalone: bool = False) -> None:
    """Raises :class:`abicache.Error` for a standalone executable or a SYCL
    build, which abicache does not do; returns for anything else."""
    from . import _native

    if is_standalone:
        raise _native.Error(
            f"abicache.{function} does not build standalone executables (`is_standalone=True`); "
            f"use torch.utils.cpp_extension.{function} for those"
        )
    if with_sycl or sycl:
        raise _native.Error(
            f"abicache.{function} does not build SYCL sources (`with_sycl`, `sycl_sources`, `extra_sycl_cflags`); "
            f"use torch.utils.cpp_extension.{function} for those"
        )


def with_torch_prefix(name: str, error: BaseException) -> Optional[BaseException]:
    """``error``, when it is a build failure (:class:`abicache.BuildError`),
    as torch words it: ``Error building extension '<name>'`` in front,
    ``.output`` and ``.command`` kept; ``None`` for any other error."""
    from . import _native

    if not isinstance(error, _native.BuildError):
        return None
    wrapped = _native.BuildError(f"Error building extension '{name}': {error}")
    wrapped.output = getattr(error, "output", None)
    wrapped.command = getattr(error, "command", None)
    return wrapped


def copy_to_build_directory(build_directory: StrPath, name: str, library: str) -> str:
    """``copy_into``, or, when the directory cannot take the copy (some
    packages keep theirs in a read-only site-packages), a ``RuntimeWarning``
    naming it and ``library`` itself: the library is the cache's, loaded."""
    try:
        return copy_into(build_directory, name, library)
    except OSError as e:
        import warnings

        warnings.warn(
            f"abicache: could not copy the library to `{name}.so` in build_directory "
            f"`{build_directory}` ({e}); `{name}` is loaded from the cache instead, at `{library}`. Code that looks for the library "
            "in that directory will not find it: make the directory writable or pass a writable "
            "build_directory",
            RuntimeWarning,
            stacklevel=4,
        )
        return library


# `ioctl(dest, FICLONE, src)`: a copy that shares the source's blocks until
# either is written (btrfs, XFS, bcachefs); elsewhere it fails and the bytes
# are copied.
_FICLONE = 0x40049409


def _same_bytes(dest: str, src: int, size: int) -> bool:
    # Whether `dest` is a regular file (not followed) holding exactly the
    # `size` bytes of the descriptor `src` (read from its start).
    import stat

    try:
        fd = os.open(dest, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return False
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_size != size:
            return False
        offset = 0
        while offset < size:
            want = min(1 << 20, size - offset)
            theirs, ours = os.pread(fd, want, offset), os.pread(src, want, offset)
            if not ours or theirs != ours:
                return False
            offset += len(ours)
        return True
    finally:
        os.close(fd)


def copy_into(build_directory: StrPath, name: str, library: str) -> str:
    """Puts a copy of ``library`` (a verified cache entry) at
    ``<build_directory>/<name>.so``: a reflink where the file system can make
    one, else a plain copy, written under a temporary name and renamed into
    place. Never a link: writing through the copy (``chmod``, ``patchelf``,
    ``cp x.so``) cannot change the cache entry. Left alone only when it
    already is a regular file with the library's bytes (compared in full, not
    by size and modification time, which a stale or tampered copy can share:
    the path returned always names the loaded library's bytes)."""
    import fcntl
    import shutil

    directory = os.path.abspath(os.fspath(build_directory))
    os.makedirs(directory, exist_ok=True)
    dest = os.path.join(directory, f"{name}.so")
    src = os.open(library, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        st = os.fstat(src)
        if _same_bytes(dest, src, st.st_size):
            return dest
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
