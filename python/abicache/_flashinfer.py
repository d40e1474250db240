"""FlashInfer's JIT through abicache: a FlashInfer nvcc ``JitSpec`` made into
a call of ``abicache.tvm_ffi.load_tvm_ffi_sources`` (the entry point
of :mod:`abicache.tvm_ffi` for loaders built on TVM-FFI), and the build-and-load that
interception puts in place of FlashInfer's (``_abicache_intercept``).

FlashInfer (0.5 and later) builds a module with its own ninja file and
loads it with ``tvm_ffi.load_module``. Its one seam for that is
``JitSpecNvcc.build_and_load`` (``flashinfer/jit/core.py``), which all of
FlashInfer's ``get_*_module`` functions call: it returns an ahead-of-time
module when FlashInfer has one (the wheel's ``data/aot``, the
``flashinfer-jit-cache`` wheel), else builds with ninja and loads. Under
interception abicache is asked only after FlashInfer found no such module,
that is, only where FlashInfer would compile (:func:`build_and_load`).

The translation (:func:`load_arguments`) asks FlashInfer's own flag
functions (``flashinfer.jit.cpp_ext``) for the command lines its ninja file
would hold, so abicache compiles what FlashInfer would, except for what
abicache adds itself: ``-fPIC``, ``-shared``, the CUDA runtime, and the
include directories of Python, CUDA and TVM-FFI (keyed by their versions,
not hashed file by file). What it cannot express raises
:class:`Unsupported`, and FlashInfer builds the module as it would have.
"""

from __future__ import annotations

import os
import shlex
import sysconfig
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

# nvcc options that choose the host compiler; abicache chooses it by the
# same rule FlashInfer does (`CC`), so the pair is left out.
_CCBIN = ("-ccbin", "--compiler-bindir")

# Position-independent code: abicache passes it itself (`-fPIC`, and
# `--compiler-options -fPIC` to nvcc).
_PIC = ("-fPIC", "--compiler-options=-fPIC", "-Xcompiler=-fPIC")

# FlashInfer links every module with these; abicache links the CUDA runtime
# itself (as `-l:libcudart.so.N` where the pip toolkit has no `libcudart.so`).
# `-lcuda` (the driver) is left out: NVIDIA's pip toolkit and a machine
# without a driver have no `libcuda.so` to link, and FlashInfer's modules
# reach the driver through the runtime. `-z defs` makes a module that does
# call the driver directly fail its link (an undefined `cu*` symbol), so
# FlashInfer builds it instead of abicache caching a library that cannot load.
_TOOLKIT_LDFLAGS = ("-shared", "-lcudart", "-lcuda")
_LINK_CHECK = "-Wl,-z,defs"


class Unsupported(Exception):
    """A FlashInfer spec abicache does not build; the message says what
    (FlashInfer's own build is used for it)."""


def load_arguments(spec: Any) -> Dict[str, Any]:
    """The keyword arguments of ``abicache.tvm_ffi.load_tvm_ffi_sources``
    that build ``spec`` (a FlashInfer ``JitSpecNvcc``) as FlashInfer's ninja
    file would: ``name``, ``sources`` (absolute), ``extra_cflags``,
    ``extra_cuda_cflags``, ``extra_ldflags``, ``extra_include_paths`` (each
    a list of strings; include directories in FlashInfer's search order,
    ``-I`` ones before ``-isystem`` ones, as the compiler searches them) and
    ``fingerprint_root``: the site-packages directory that holds
    ``flashinfer``, so that FlashInfer's headers are named relative to it
    and the key does not depend on where the venv is.
    Raises :class:`Unsupported` for what abicache cannot express: embedded
    cubins, device linking, per-source nvcc flags, another nvcc
    (``FLASHINFER_NVCC``), or a FlashInfer without the flag functions this
    reads."""
    name = getattr(spec, "name", None)
    if not isinstance(name, str):
        raise Unsupported("the spec has no name")
    if getattr(spec, "embedded_cubin_factory", None) is not None:
        raise Unsupported("embedded cubins (`embedded_cubin_factory`)")
    if getattr(spec, "needs_device_linking", False):
        raise Unsupported("device linking (`needs_device_linking=True`)")
    if getattr(spec, "extra_cuda_cflags_by_source", None):
        raise Unsupported("per-source nvcc flags (`extra_cuda_cflags_by_source`)")
    if os.environ.get("FLASHINFER_NVCC"):
        raise Unsupported("`FLASHINFER_NVCC` (another nvcc than abicache finds)")
    try:
        from flashinfer.jit import cpp_ext
    except ImportError as e:
        raise Unsupported(f"`flashinfer.jit.cpp_ext` cannot be imported ({e})") from e
    missing = [f for f in ("get_cuda_path", "build_common_cflags", "build_cflags", "build_cuda_cflags", "parse_env_flags")
               if not hasattr(cpp_ext, f)]
    if missing:
        raise Unsupported(f"this FlashInfer's `flashinfer.jit.cpp_ext` has no {', '.join(missing)}")

    cuda_home = cpp_ext.get_cuda_path()
    common = cpp_ext.build_common_cflags(cuda_home, getattr(spec, "extra_include_dirs", None))
    common_words = _words(common, cuda_home)
    includes, common_rest = _split_includes(common_words)
    dropped = _included_by_abicache(cuda_home)
    include_paths = [d for d in includes if _same_dir_key(d) not in dropped]

    def expand(flags: Sequence[str]) -> List[str]:
        out: List[str] = []
        for flag in flags:
            out.extend(common_rest if flag == "$common_cflags" else _words([flag], cuda_home))
        return out

    cflags = _without(expand(cpp_ext.build_cflags(common, getattr(spec, "extra_cflags", None))))
    cuda_cflags = _without(expand(cpp_ext.build_cuda_cflags(common, getattr(spec, "extra_cuda_cflags", None))))
    ldflags = [_LINK_CHECK] + [
        f for f in _words(cpp_ext.parse_env_flags("FLASHINFER_EXTRA_LDFLAGS"), cuda_home)
        + _words(getattr(spec, "extra_ldflags", None) or [], cuda_home)
        if f not in _TOOLKIT_LDFLAGS
    ]
    sources = [str(Path(s).resolve()) for s in getattr(spec, "sources", ())]
    if not sources:
        raise Unsupported("the spec has no sources")
    import flashinfer

    return dict(
        name=name,
        sources=sources,
        extra_cflags=cflags,
        extra_cuda_cflags=cuda_cflags,
        extra_ldflags=ldflags,
        extra_include_paths=include_paths,
        fingerprint_root=str(Path(flashinfer.__file__).resolve().parent.parent),
    )


def _words(flags: Optional[Sequence[Any]], cuda_home: str) -> List[str]:
    # FlashInfer's flags as the shell of its ninja rules splits them
    # (`-isystem /dir` is one entry there), `$cuda_home` expanded.
    out: List[str] = []
    for flag in flags or ():
        out.extend(shlex.split(str(flag).replace("$cuda_home", cuda_home)))
    return out


def _split_includes(words: List[str]) -> Tuple[List[str], List[str]]:
    # (`-I` directories, then `-isystem` ones, each in order; the other words).
    quoted: List[str] = []
    system: List[str] = []
    rest: List[str] = []
    it = iter(words)
    for word in it:
        if word == "-I" or word == "-isystem":
            (quoted if word == "-I" else system).append(next(it, ""))
        elif word.startswith("-isystem"):
            system.append(word[len("-isystem"):])
        elif word.startswith("-I"):
            quoted.append(word[2:])
        else:
            rest.append(word)
    return [d for d in quoted + system if d], rest


def _without(words: List[str]) -> List[str]:
    # The flags abicache passes itself (`_PIC`), and `-ccbin X`.
    out: List[str] = []
    skip = False
    for word in words:
        if skip:
            skip = False
        elif word in _CCBIN:
            skip = True
        elif word.startswith(tuple(c + "=" for c in _CCBIN)) or word in _PIC:
            continue
        else:
            out.append(word)
    return out


def _same_dir_key(path: str) -> str:
    return os.path.realpath(path)


def _included_by_abicache(cuda_home: str) -> set:
    # The include directories abicache adds itself for a TVM-FFI CUDA module
    # (TVM-FFI's and DLPack's, CUDA's, Python's), keyed by version rather
    # than hashed: passed again as include paths they would be hashed and
    # their location keyed, which differs from one venv to the next.
    dirs = [sysconfig.get_path("include"), os.path.join(cuda_home, "include")]
    try:
        import tvm_ffi.libinfo as libinfo

        dirs += [libinfo.find_include_path(), libinfo.find_dlpack_include_path()]
    except (ImportError, AttributeError, RuntimeError):
        pass
    return {_same_dir_key(d) for d in dirs if d}


def build_and_load(spec: Any, flashinfer_build_and_load: Callable[[Any], Any], verbose: bool) -> Any:
    """What interception runs for FlashInfer's ``JitSpecNvcc.build_and_load``
    once FlashInfer found no ahead-of-time module (FlashInfer would compile
    now): the module from :func:`load_module` (a hit loads the
    cached library, no ninja run), passed through the spec's
    ``post_load_adapter`` as FlashInfer does. A spec abicache does not take
    (:class:`Unsupported`) goes to ``flashinfer_build_and_load`` (with one
    line on stderr when ``verbose``), as does one abicache fails (one line
    always), except a refusal (:class:`abicache.AbiError`), a
    :class:`abicache.CacheMiss`, and anything under offline mode, which
    reach the program: FlashInfer's build would compile."""
    import _abicache_intercept as hook

    label = "flashinfer JIT module %r" % (getattr(spec, "name", None),)
    try:
        arguments = load_arguments(spec)
    except Unsupported as why:
        if hook._offline_forbids_torch():
            import abicache

            miss = abicache.CacheMiss(
                "%s: %s is not supported by abicache, and offline mode (`ABICACHE_OFFLINE=1`) forbids "
                "FlashInfer building it; nothing was compiled. Build it where compiling is allowed "
                "(`ABICACHE_OFFLINE` unset or `warn`)" % (label, why)
            )
            miss.extension = getattr(spec, "name", None)
            raise miss from None
        if verbose:
            hook._say("%s: %s is not supported; FlashInfer builds it" % (label, why))
        return flashinfer_build_and_load(spec)
    import abicache

    try:
        module = load_module(arguments, verbose)
    except Exception as e:  # noqa: BLE001 - FlashInfer's build is the authority on any failure but a refusal
        if hook._is_refusal(e) or isinstance(e, abicache.CacheMiss) or hook._offline_forbids_torch():
            raise
        first = (str(e).strip().splitlines() or [""])[0]
        hook._say("%s failed (%s: %s); falling back to FlashInfer's build" % (label, type(e).__name__, first))
    else:
        adapter = getattr(spec, "post_load_adapter", None)
        return adapter(module) if adapter is not None else module
    # Outside the handler: an error of FlashInfer's is not chained to abicache's.
    return flashinfer_build_and_load(spec)


def load_module(arguments: Dict[str, Any], verbose: bool = False) -> Any:
    """The ``tvm_ffi.Module`` that ``abicache.tvm_ffi.load_tvm_ffi_sources``
    builds (or finds) for ``arguments`` (:func:`load_arguments`);
    ``verbose``: a hit says so on stderr."""
    from .tvm_ffi import load_tvm_ffi_sources

    return load_tvm_ffi_sources(**arguments, verbose=verbose)
