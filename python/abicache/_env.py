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
_site_packages: Optional[List[str]] = None


def _base_environment() -> Dict[str, Any]:
    import torch

    from . import _probe

    return {
        **_probe.python_fields(),
        "torch_version": str(torch.__version__),
        "torch_cuda": torch.version.cuda,
        "torch_hip": getattr(torch.version, "hip", None),
        "cxx11_abi": bool(torch._C._GLIBCXX_USE_CXX11_ABI),
        "torch_dir": os.path.dirname(os.path.abspath(torch.__file__)),
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


def environment_json() -> str:
    """This interpreter's environment as the JSON text ``_native`` takes
    (a CUDA extension's arch list is added by the session). Made once per
    process (the answer cannot change while it runs), so a warm load pays
    for neither the probe nor the encoding again."""
    global _json
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
