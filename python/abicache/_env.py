"""The environment of the running interpreter, as ``abicache_key::Environment``.

Probed from this process (SPEC §1.2): the CPython ABI from ``sysconfig`` and
``sys.abiflags``, torch's release, CUDA/HIP versions and C++ ABI from the
imported ``torch``, and — only for CUDA extensions — the arch list from
``TORCH_CUDA_ARCH_LIST`` or the visible GPUs. Build-only paths (``torch_dir``,
``python_include``) travel along but never enter a key.
"""

from __future__ import annotations

import json
import os
import platform
import sys
import sysconfig
import threading
from typing import Any, Dict, List, Optional

_lock = threading.Lock()
_base: Optional[Dict[str, Any]] = None
_archs: Optional[List[Optional[str]]] = None  # one-element box once computed
# requires_cuda -> the environment as JSON: what `_native` takes, made once per process.
_json: Dict[bool, str] = {}
_site_packages: Optional[List[str]] = None


def _base_environment() -> Dict[str, Any]:
    import torch

    paths = sysconfig.get_paths()
    soabi = sysconfig.get_config_var("SOABI")
    return {
        "python_version": platform.python_version(),
        "python_soabi": soabi or None,
        "python_abiflags": getattr(sys, "abiflags", None),
        "torch_version": str(torch.__version__),
        "torch_cuda": torch.version.cuda,
        "torch_hip": getattr(torch.version, "hip", None),
        "cxx11_abi": bool(torch._C._GLIBCXX_USE_CXX11_ABI),
        "torch_dir": os.path.dirname(os.path.abspath(torch.__file__)),
        "python_include": paths.get("include"),
    }


def visible_cuda_archs() -> Optional[str]:
    """``TORCH_CUDA_ARCH_LIST`` when set, else the compute capabilities of
    the visible GPUs (``"8.6 9.0"``), else ``None`` (no GPU visible)."""
    value = os.environ.get("TORCH_CUDA_ARCH_LIST", "").strip()
    if value:
        return value
    import torch

    if not torch.cuda.is_available():
        return None
    caps = {"%d.%d" % torch.cuda.get_device_capability(i) for i in range(torch.cuda.device_count())}
    return " ".join(sorted(caps)) or None


def environment(requires_cuda: bool) -> Dict[str, Any]:
    """The environment dict for one extension. GPUs are only queried for a
    CUDA extension (a CPU extension never initialises CUDA)."""
    global _base, _archs
    with _lock:
        if _base is None:
            _base = _base_environment()
        env = dict(_base)
        if requires_cuda:
            if _archs is None:
                _archs = [visible_cuda_archs()]
            env["cuda_archs"] = _archs[0]
    return env


def environment_json(requires_cuda: bool) -> str:
    """:func:`environment` as the JSON text ``_native`` takes. The interpreter
    is probed once per process (the answer cannot change while it runs), so a
    warm load pays for neither the probe nor the encoding again."""
    text = _json.get(requires_cuda)
    if text is None:
        text = _json.setdefault(requires_cuda, json.dumps(environment(requires_cuda)))
    return text


def site_packages() -> List[str]:
    """Directories searched for NVIDIA's pip wheels (``nvidia/*/bin/nvcc``),
    computed once per process."""
    global _site_packages
    if _site_packages is None:
        paths = sysconfig.get_paths()
        out: List[str] = []
        for p in (paths.get("purelib"), paths.get("platlib")):
            if p and p not in out:
                out.append(p)
        _site_packages = out
    return list(_site_packages)
