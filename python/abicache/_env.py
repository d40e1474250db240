"""The environment of the running interpreter, as ``abicache_key::Environment``.

Probed from this process (docs/python-api.md, "The environment"): the CPython ABI as ``_probe`` reads it
(the command line's probe of another interpreter runs the same file), torch's
release, CUDA/HIP versions and C++ ABI from the imported ``torch``. Build-only
paths (``torch_dir``, ``python_include``) travel along but never enter a key.
What is not about this interpreter is decided in Rust: the arch list of a CUDA
extension (``TORCH_CUDA_ARCH_LIST``, else the GPUs ``nvidia-smi`` lists) is
filled in by the session, and :func:`visible_cuda_archs` asks ``_native``.
"""

from __future__ import annotations

import json
import os
import threading
from typing import Any, Dict, List, Optional

from . import _native

_lock = threading.Lock()
_base: Optional[Dict[str, Any]] = None
# The environment as JSON: what `_native` takes, made once per process.
_json: Optional[str] = None
# The same with TVM-FFI's fields (`tvm_ffi=True`), made on first use.
_tvm_ffi_json: Optional[str] = None
_site_packages: Optional[List[str]] = None


def _base_environment() -> Dict[str, Any]:
    from . import _probe

    try:
        import torch
    except ImportError:
        # No torch here: only a TVM-FFI module that includes no torch header
        # can be keyed (its key has no torch line); a torch extension is
        # refused by the key ("none" is no torch version).
        return {**_probe.python_fields(), "torch_version": "none", "cxx11_abi": False}
    return {
        **_probe.python_fields(),
        "torch_version": str(torch.__version__),
        "torch_cuda": torch.version.cuda,
        "torch_hip": getattr(torch.version, "hip", None),
        "cxx11_abi": bool(torch._C._GLIBCXX_USE_CXX11_ABI),
        "torch_dir": os.path.dirname(os.path.abspath(torch.__file__)),
    }


def tvm_ffi_abi(c_api_h: str) -> str:
    """The TVM-FFI C ABI the header ``c_api_h`` (``tvm/ffi/c_api.h``) declares:
    ``0.X`` for ``TVM_FFI_VERSION_MAJOR`` 0 (TVM-FFI's releases ``0.X.Y``: a
    bump of ``X`` breaks the C ABI, of ``Y`` does not), else the major
    version (semantic versioning from 1.0). Raises ``ValueError`` naming the
    file when the macros are missing."""
    import re

    with open(c_api_h, encoding="utf-8") as f:
        text = f.read()
    found = {}
    for part in ("MAJOR", "MINOR"):
        m = re.search(rf"^\s*#\s*define\s+TVM_FFI_VERSION_{part}\s+(\d+)\s*$", text, re.MULTILINE)
        if m is None:
            raise ValueError(f"`{c_api_h}` defines no TVM_FFI_VERSION_{part}: is apache-tvm-ffi installed completely?")
        found[part] = int(m.group(1))
    return f"0.{found['MINOR']}" if found["MAJOR"] == 0 else str(found["MAJOR"])


def _tvm_ffi_fields() -> Dict[str, Any]:
    # What a TVM-FFI module is keyed and built with: the ABI its headers
    # declare, its include directories (TVM-FFI's and DLPack's, system
    # roots) and the directory of libtvm_ffi, as tvm_ffi.cpp finds them.
    from tvm_ffi import libinfo

    include = libinfo.find_include_path()
    dirs = [include]
    dlpack = libinfo.find_dlpack_include_path()
    if dlpack not in dirs:
        dirs.append(dlpack)
    return {
        "tvm_ffi_abi": tvm_ffi_abi(os.path.join(include, "tvm", "ffi", "c_api.h")),
        "tvm_ffi_include_dirs": dirs,
        "tvm_ffi_lib_dir": os.path.dirname(os.path.abspath(libinfo.find_libtvm_ffi())),
    }


def visible_cuda_archs() -> Optional[str]:
    """``TORCH_CUDA_ARCH_LIST`` when set, else the compute capabilities of
    the GPUs ``nvidia-smi`` lists (``"8.6 9.0"``), else ``None``: what a CUDA
    extension without ``cuda_archs`` is built for (Rust's rule, the command
    line's too)."""
    return _native.visible_cuda_archs()


def _probed() -> Dict[str, Any]:
    """This interpreter's environment, probed once per process."""
    global _base
    with _lock:
        if _base is None:
            _base = _base_environment()
        return _base


def environment(requires_cuda: bool) -> Dict[str, Any]:
    """The environment an extension is keyed and built for; for a CUDA
    extension with its arch list (:func:`visible_cuda_archs`; GPUs are only
    queried then)."""
    env = dict(_probed())
    if requires_cuda:
        env["cuda_archs"] = visible_cuda_archs()
    return env


def environment_json(tvm_ffi: bool = False) -> str:
    """This interpreter's environment as the JSON text ``_native`` takes
    (a CUDA extension's arch list is added by the session); with
    ``tvm_ffi``, TVM-FFI's fields too (``tvm_ffi_abi``, its include and
    library directories; TVM-FFI is imported only then). Made once per
    process (the answer cannot change while it runs), so a warm load pays
    for neither the probe nor the encoding again."""
    global _json, _tvm_ffi_json
    if tvm_ffi:
        if _tvm_ffi_json is None:
            _tvm_ffi_json = json.dumps({**_probed(), **_tvm_ffi_fields()})
        return _tvm_ffi_json
    if _json is None:
        _json = json.dumps(_probed())
    return _json


def site_packages() -> List[str]:
    """Directories searched for NVIDIA's pip wheels (``nvidia/*/bin/nvcc``),
    computed once per process."""
    global _site_packages
    if _site_packages is None:
        from . import _probe

        _site_packages = _probe.site_packages()
    return list(_site_packages)
