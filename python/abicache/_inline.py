"""``abicache.load_inline``: a drop-in for ``torch.utils.cpp_extension.load_inline``.

The sources are generated exactly as torch 2.15 generates them (the
``#include`` lines it prepends, the pybind11 bindings for ``functions``),
then stored in the cache by their content (``v1/sources/<digest>/``) and
loaded like any other extension: a warm ``load_inline`` writes nothing and
compiles nothing.
"""

from __future__ import annotations

import os
from types import ModuleType
from typing import TYPE_CHECKING, Callable, Dict, List, Optional, Sequence, Tuple, Union

from ._dropins import load_sources

# Type aliases for type checkers only: at run time (annotations are strings)
# building them would cost a warm `load_inline` ~0.1 ms.
if TYPE_CHECKING:
    from . import StrPath

    Sources = Union[str, Sequence[str]]
    Functions = Union[str, List[str], Dict[str, str], None]


def _source_list(sources: Optional[Sources], what: str) -> List[str]:
    if sources is None:
        return []
    if isinstance(sources, str):
        return [sources]
    out = list(sources)
    for s in out:
        if not isinstance(s, str):
            raise TypeError(f"{what} must be a string or a list of strings of source code, got {type(s).__name__}")
    return out


def _bindings(functions: Functions, with_pytorch_error_handling: bool, gil_not_used: bool) -> List[str]:
    """torch's generated ``PYBIND11_MODULE`` block for ``functions`` (a name,
    a list of names, or a dict of name to docstring); empty for ``None``."""
    if functions is None:
        return []
    if isinstance(functions, str):
        functions = [functions]
    if isinstance(functions, list):
        functions = {f: f for f in functions}
    elif not isinstance(functions, dict):
        raise ValueError(f"Expected 'functions' to be a list or dict, but was {type(functions)}")
    if gil_not_used:
        lines = ["PYBIND11_MODULE(TORCH_EXTENSION_NAME, m, pybind11::mod_gil_not_used()) {"]
    else:
        lines = ["PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {"]
    for function_name, docstring in functions.items():
        if with_pytorch_error_handling:
            lines.append(f'm.def("{function_name}", torch::wrap_pybind_function({function_name}), "{docstring}");')
        else:
            lines.append(f'm.def("{function_name}", {function_name}, "{docstring}");')
    lines.append("}")
    return lines


def generated_sources(
    cpp_sources: Sources,
    cuda_sources: Optional[Sources] = None,
    functions: Functions = None,
    with_pytorch_error_handling: bool = True,
    no_implicit_headers: bool = False,
    gil_not_used: bool = False,
) -> List[Tuple[str, str]]:
    """The files ``load_inline`` compiles, as ``(file name, text)``:
    ``main.cpp`` (``#include <torch/extension.h>``, the C++ sources, the
    bindings) and, with CUDA sources, ``cuda.cu`` (``torch/types.h``,
    ``cuda.h`` and ``cuda_runtime.h`` includes, the CUDA sources), byte for
    byte what torch 2.15 writes. The caller's lists are not modified."""
    cpp = _source_list(cpp_sources, "cpp_sources")
    cuda = _source_list(cuda_sources, "cuda_sources")
    bindings = _bindings(functions, with_pytorch_error_handling, gil_not_used)
    if not no_implicit_headers:
        cpp.insert(0, "#include <torch/extension.h>")
    files = [("main.cpp", "\n".join(cpp + bindings))]
    if cuda:
        if not no_implicit_headers:
            cuda = ["#include <torch/types.h>", "#include <cuda.h>", "#include <cuda_runtime.h>"] + cuda
        files.append(("cuda.cu", "\n".join(cuda)))
    return files


def load_inline(
    name: str,
    cpp_sources: Sources,
    cuda_sources: Optional[Sources] = None,
    sycl_sources: Optional[Sources] = None,
    functions: Functions = None,
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
    with_pytorch_error_handling: bool = True,
    keep_intermediates: bool = True,
    use_pch: bool = False,
    no_implicit_headers: bool = False,
    gil_not_used: bool = False,
    *,
    cache_dir: Optional[StrPath] = None,
) -> Union[ModuleType, str]:
    """Build (or reuse) and load an extension from source strings, like
    ``torch.utils.cpp_extension.load_inline`` with the same signature and
    return values.

    ``cpp_sources`` (a string or a list) are joined into ``main.cpp`` after
    ``#include <torch/extension.h>`` (left out with ``no_implicit_headers``);
    ``functions`` (a name, a list of names, or a dict of name to docstring)
    get generated pybind11 bindings, each called through
    ``torch::wrap_pybind_function`` unless ``with_pytorch_error_handling`` is
    false, in a module that declares GIL-free support with ``gil_not_used``;
    ``cuda_sources`` become ``cuda.cu``. Those files are stored in the cache
    by content (``v1/sources/<digest>/``) and keyed like any other source,
    so a warm call writes and compiles nothing.

    Everything else is :func:`abicache.load`'s: flag and include-path
    handling as torch's, same-name reloads (``<name>_v1``, …),
    ``build_directory`` holding a copy ``<name>.so`` of the cache entry,
    ``Error building extension '<name>'`` on failure, ``cache_dir``.
    ``use_pch`` and ``keep_intermediates`` are accepted and ignored (torch's
    ``use_pch`` writes a precompiled header into the torch installation;
    abicache leaves it alone). SYCL is not supported.
    """
    if with_sycl or sycl_sources or extra_sycl_cflags:
        from ._load import refuse_unsupported

        refuse_unsupported(with_sycl, sycl_sources or extra_sycl_cflags, "load_inline")
    del keep_intermediates, use_pch  # accepted for compatibility; see the docstring
    files = generated_sources(
        cpp_sources, cuda_sources, functions, with_pytorch_error_handling, no_implicit_headers, gil_not_used
    )
    directory, paths, store = stand_in_sources(files, cache_dir)
    return load_sources(
        name,
        paths,
        extra_cflags=extra_cflags,
        extra_cuda_cflags=extra_cuda_cflags,
        extra_ldflags=extra_ldflags,
        extra_include_paths=extra_include_paths,
        build_directory=build_directory,
        verbose=verbose,
        with_cuda=with_cuda,
        is_python_module=is_python_module,
        cache_dir=cache_dir,
        fingerprint_root=directory,
        store_sources=store,
    )


def stand_in_sources(
    files: List[Tuple[str, str]], cache_dir: Optional[Union[str, "os.PathLike[str]"]]
) -> Tuple[str, List[Union[str, "os.PathLike[str]"]], Callable[[], str]]:
    """Stand-in source paths for generated ``files`` (``[(name, text)]``).

    Returns ``(directory, paths, store)``: ``directory`` names the files'
    contents (a digest), ``paths`` are ``directory/<name>``, and ``store()``
    writes the files into the cache by content (a native call) and returns
    the directory that holds them. The files are stored only when the
    warm-load record does not answer: its name covers the stand-in paths, and
    its checks cover the stored files, which hold exactly those contents.
    """
    import hashlib

    digest = hashlib.blake2b(repr(files).encode("utf-8", "surrogateescape"), digest_size=16).hexdigest()
    directory = f"/abicache-inline-sources/{digest}"

    def store() -> str:
        from . import _native

        return _native.store_generated_sources(files, None if cache_dir is None else os.fspath(cache_dir))

    paths: List[Union[str, "os.PathLike[str]"]] = [f"{directory}/{file_name}" for file_name, _ in files]
    return directory, paths, store
