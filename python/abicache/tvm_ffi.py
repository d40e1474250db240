"""Drop-ins for Apache TVM-FFI's loader: ``abicache.tvm_ffi.load`` and
``load_inline`` have the signatures of ``tvm_ffi.cpp.load`` and
``tvm_ffi.cpp.load_inline`` (apache-tvm-ffi 0.1) and return the same
``tvm_ffi.Module``, loaded with ``tvm_ffi.load_module`` from abicache's
verified cache entry instead of a per-user build directory.

    import abicache.tvm_ffi
    mod = abicache.tvm_ffi.load_inline("hello", cpp_sources=src, functions="add_one_cpu")
    mod.add_one_cpu(x, y)

Behind them is abicache's normal path (scan, key, store, remote, layers,
audit; for CUDA the arch list, nvcc release and GPU guard), with a TVM-FFI
key (docs/tvm-ffi.md): ``tvm_ffi_abi`` names TVM-FFI's C ABI, ``torch`` is
in the key only when a source includes a torch header, and ``python_abi``
only when one uses Python or pybind11. So a module that talks to Python and
tensors through TVM-FFI and DLPack alone is built once for every Python
version, every torch release (or none) and every ``+cpu``/``+cuNNN`` wheel.

Other loaders (FlashInfer's JIT) build a spec with
:func:`load_tvm_ffi_sources`.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any, Dict, List, Mapping, Optional, Sequence, Union

from ._dropins import load_sources

if TYPE_CHECKING:
    from . import StrPath


def _str_list(value: Union[Sequence[str], str, None], what: str) -> List[str]:
    # TVM-FFI's `_str_seq2list`: None -> [], a string -> [it], else a list.
    if value is None:
        return []
    if isinstance(value, str):
        return [value]
    out = list(value)
    for v in out:
        if not isinstance(v, (str, os.PathLike)):
            raise TypeError(f"{what} must be strings, got {type(v).__name__} ({v!r})")
    return [os.fspath(v) for v in out]


def _cuda_archs() -> Optional[str]:
    # TVM-FFI's own arch list variable (`"8.9 9.0a"`, the same form as
    # `TORCH_CUDA_ARCH_LIST`); unset: abicache's rule (`TORCH_CUDA_ARCH_LIST`,
    # else the visible GPUs).
    value = os.environ.get("TVM_FFI_CUDA_ARCH_LIST", "").strip()
    return value or None


def _refuse(backend: Optional[str], embed_cubin: Any, output: Any = None) -> None:
    # What abicache does not build for TVM-FFI, refused with what to use
    # (`_native`, which defines the error, is imported only then: a warm
    # load imports no native module).
    if backend not in (None, "cuda"):
        from . import _native

        raise _native.Error(
            f"abicache.tvm_ffi builds CUDA and C++ modules only, not backend={backend!r}; "
            "use tvm_ffi.cpp directly for ROCm/HIP"
        )
    if embed_cubin:
        from . import _native

        raise _native.Error(
            "abicache.tvm_ffi does not embed cubins (`embed_cubin`); use tvm_ffi.cpp.load_inline for that module"
        )


def load_module_from(opened: str, keep_module_alive: bool) -> Any:
    """``tvm_ffi.load_module`` of the shared library at ``opened`` (a
    ``/proc/self/fd/N`` path of the verified file, which has no ``.so``
    suffix for TVM-FFI to pick its loader by): TVM-FFI's ``.so`` loader
    (``ffi.Module.load_from_file.so``), then, when ``keep_module_alive``,
    the module kept for the process as ``load_module`` keeps it."""
    import tvm_ffi

    module = tvm_ffi.get_global_func("ffi.Module.load_from_file.so")(opened, "so")
    if keep_module_alive:
        tvm_ffi.get_global_func("ffi.ModuleGlobalsAdd")(module)
    return module


def load_tvm_ffi_sources(
    name: str,
    sources: List[str],
    *,
    extra_cflags: Optional[Sequence[str]] = None,
    extra_cuda_cflags: Optional[Sequence[str]] = None,
    extra_ldflags: Optional[Sequence[str]] = None,
    extra_include_paths: Optional[Sequence[StrPath]] = None,
    build_directory: Optional[StrPath] = None,
    keep_module_alive: bool = True,
    cuda_archs: Optional[str] = None,
    cache_dir: Optional[StrPath] = None,
    verbose: bool = False,
    fingerprint_root: Optional[StrPath] = None,
    store_sources: Any = None,
) -> Any:
    """The ``tvm_ffi.Module`` built from the source files ``sources`` (``.cpp``,
    ``.cc``, ``.cxx``, ``.c``, ``.cu``) by abicache: a verified cache hit, or
    one build (as ``tvm_ffi.cpp.build`` builds: ``-std=c++17 -O2``,
    TVM-FFI's and DLPack's headers, ``-ltvm_ffi``, ``-lcudart`` for CUDA)
    shared by every process, venv and machine that can use it; loaded with
    ``tvm_ffi.load_module``. The entry point for loaders built on TVM-FFI
    (FlashInfer's JIT): ``name`` must be a C identifier; ``cuda_archs`` (the
    ``TORCH_CUDA_ARCH_LIST`` form, ``"8.0 9.0a"``) wins over
    ``TVM_FFI_CUDA_ARCH_LIST``, then ``TORCH_CUDA_ARCH_LIST``, then the
    visible GPUs; ``build_directory`` gets a copy ``<name>.so`` of the
    entry. Build failures raise :class:`abicache.BuildError` (a
    ``RuntimeError``), refusals :class:`abicache.Error`."""
    return load_sources(
        name,
        sources,  # type: ignore[arg-type]
        extra_cflags=list(extra_cflags or []),
        extra_cuda_cflags=list(extra_cuda_cflags or []),
        extra_ldflags=list(extra_ldflags or []),
        extra_include_paths=list(extra_include_paths or []),
        build_directory=build_directory,
        verbose=verbose,
        with_cuda=None,
        is_python_module=False,
        cache_dir=cache_dir,
        fingerprint_root=fingerprint_root,
        store_sources=store_sources,
        tvm_ffi={"keep_module_alive": bool(keep_module_alive), "cuda_archs": cuda_archs or _cuda_archs()},
    )


def load(
    name: str,
    *,
    sources: Union[Sequence[str], str, None] = None,
    cpp_files: Union[Sequence[str], str, None] = None,
    cuda_files: Union[Sequence[str], str, None] = None,
    extra_cflags: Optional[Sequence[str]] = None,
    extra_cuda_cflags: Optional[Sequence[str]] = None,
    extra_ldflags: Optional[Sequence[str]] = None,
    extra_include_paths: Optional[Sequence[str]] = None,
    build_directory: Optional[str] = None,
    keep_module_alive: bool = True,
    backend: Optional[str] = None,
    cache_dir: Optional[StrPath] = None,
) -> Any:
    """``tvm_ffi.cpp.load`` through abicache: the same signature and the same
    ``tvm_ffi.Module``. ``sources``, ``cpp_files`` and ``cuda_files`` are
    merged (as TVM-FFI does) and compiled by extension; the sources export
    their functions with TVM-FFI's macros (``TVM_FFI_DLL_EXPORT_TYPED_FUNC``).

    What differs: the library is cached under abicache's key, not in
    ``TVM_FFI_CACHE_DIR`` (a hit costs a stat of the sources and headers and
    a ``dlopen``; editing a header rebuilds); ``build_directory``, when
    given, receives a copy ``<name>.so``; ``cache_dir`` (keyword-only, an
    addition) is abicache's cache (default ``ABICACHE_DIR``, else
    ``~/.cache/abicache``). Not supported (:class:`abicache.Error`):
    ``backend="hip"``, ``.o`` inputs."""
    _refuse(backend, None)
    merged = _str_list(sources, "sources") + _str_list(cpp_files, "cpp_files") + _str_list(cuda_files, "cuda_files")
    if not merged:
        raise ValueError("sources must be provided.")
    return load_tvm_ffi_sources(
        name,
        merged,
        extra_cflags=extra_cflags,
        extra_cuda_cflags=extra_cuda_cflags,
        extra_ldflags=extra_ldflags,
        extra_include_paths=extra_include_paths,
        build_directory=build_directory,
        keep_module_alive=keep_module_alive,
        cache_dir=cache_dir,
    )


# The headers `tvm_ffi.cpp.load_inline` puts before the sources.
_TVM_FFI_HEADERS = [
    "#include <tvm/ffi/container/tensor.h>",
    "#include <tvm/ffi/dtype.h>",
    "#include <tvm/ffi/error.h>",
    "#include <tvm/ffi/extra/c_env_api.h>",
    "#include <tvm/ffi/function.h>",
    "",
]

_CPP_ESCAPES = str.maketrans({"\\": "\\\\", '"': '\\"', "\n": "\\n", "\r": "\\r", "\t": "\\t"})


def decorated_source(source: str, functions: Mapping[str, str]) -> str:
    """``source`` as ``tvm_ffi.cpp.load_inline`` writes it: TVM-FFI's headers
    first, then the source, then an export (``TVM_FFI_DLL_EXPORT_TYPED_FUNC``,
    and ``…_DOC`` for a docstring) per function; byte for byte TVM-FFI 0.1's
    ``_decorate_with_tvm_ffi`` (tests/python/test_tvm_ffi.py ties them)."""
    lines = [*_TVM_FFI_HEADERS, source]
    for func_name, func_doc in functions.items():
        lines.append(f"TVM_FFI_DLL_EXPORT_TYPED_FUNC({func_name}, {func_name});")
        if func_doc:
            lines.append(f'TVM_FFI_DLL_EXPORT_TYPED_FUNC_DOC({func_name}, "{func_doc.translate(_CPP_ESCAPES)}");')
    lines.append("")
    return "\n".join(lines)


def inline_files(
    cpp_sources: Union[Sequence[str], str, None],
    cuda_sources: Union[Sequence[str], str, None],
    functions: Union[Mapping[str, str], Sequence[str], str, None],
) -> List[Any]:
    """The files ``tvm_ffi.cpp.load_inline`` compiles, as ``(file name,
    text)``: ``main.cpp`` when there are C++ sources, ``cuda.cu`` when there
    are CUDA sources; the function exports go to ``main.cpp`` when it exists,
    else to ``cuda.cu``."""
    cpp_list = _str_list(cpp_sources, "cpp_sources")
    cuda_list = _str_list(cuda_sources, "cuda_sources")
    if functions is None:
        function_map: Dict[str, str] = {}
    elif isinstance(functions, str):
        function_map = {functions: ""}
    elif isinstance(functions, Mapping):
        function_map = dict(functions)
    else:
        function_map = {f: "" for f in functions}
    with_cpp, with_cuda = bool(cpp_list), bool(cuda_list)
    cpp, cuda = "\n".join(cpp_list), "\n".join(cuda_list)
    files = []
    if with_cpp:
        files.append(("main.cpp", decorated_source(cpp, function_map)))
    if with_cuda:
        files.append(("cuda.cu", decorated_source(cuda, {} if with_cpp else function_map)))
    return files


def load_inline(
    name: str,
    *,
    cpp_sources: Union[Sequence[str], str, None] = None,
    cuda_sources: Union[Sequence[str], str, None] = None,
    functions: Union[Mapping[str, str], Sequence[str], str, None] = None,
    extra_cflags: Optional[Sequence[str]] = None,
    extra_cuda_cflags: Optional[Sequence[str]] = None,
    extra_ldflags: Optional[Sequence[str]] = None,
    extra_include_paths: Optional[Sequence[str]] = None,
    build_directory: Optional[str] = None,
    embed_cubin: Optional[Mapping[str, bytes]] = None,
    keep_module_alive: bool = True,
    backend: Optional[str] = None,
    cache_dir: Optional[StrPath] = None,
) -> Any:
    """``tvm_ffi.cpp.load_inline`` through abicache: the same signature and the
    same ``tvm_ffi.Module``. The sources are generated exactly as TVM-FFI
    generates them (its headers, the sources joined, an export per function
    in ``functions``: a name, a list of names or a dict of name to
    docstring), stored in the cache by content and keyed like any other
    source, so a warm call writes and compiles nothing.

    Everything else is :func:`load`'s. Not supported (:class:`abicache.Error`):
    ``embed_cubin``, ``backend="hip"``."""
    _refuse(backend, embed_cubin)
    files = inline_files(cpp_sources, cuda_sources, functions)
    if not files:
        raise ValueError("cpp_sources or cuda_sources must be provided.")
    from ._inline import stand_in_sources

    directory, paths, store = stand_in_sources(files, cache_dir)
    return load_tvm_ffi_sources(
        name,
        [os.fspath(path) for path in paths],
        extra_cflags=extra_cflags,
        extra_cuda_cflags=extra_cuda_cflags,
        extra_ldflags=extra_ldflags,
        extra_include_paths=extra_include_paths,
        build_directory=build_directory,
        keep_module_alive=keep_module_alive,
        cache_dir=cache_dir,
        fingerprint_root=directory,
        store_sources=store,
    )
