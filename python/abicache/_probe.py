"""What abicache needs to know about a Python interpreter, without importing torch.

One definition for both probes: imported by ``abicache._env`` for the running
interpreter, and run by the command line (Rust, ``crates/abicache-fleet/src/probe.rs``)
as ``python -I -B -c <this file>`` for another one, where it prints one line:
``ABICACHE-PROBE <json>``. Keep it free of imports from ``abicache``.
"""

import importlib.util
import json
import os
import sys
import sysconfig


def python_fields():
    """The environment fields of this interpreter that do not need torch
    (named as in ``abicache_key::Environment``)."""
    return {
        "python_version": "%d.%d.%d" % sys.version_info[:3],
        "python_soabi": sysconfig.get_config_var("SOABI") or None,
        "python_abiflags": getattr(sys, "abiflags", None),
        "python_include": sysconfig.get_paths().get("include"),
    }


def site_packages():
    """Where this interpreter's packages live (``purelib``, ``platlib``):
    searched for NVIDIA's pip wheels (``nvidia/*/bin/nvcc``)."""
    paths = sysconfig.get_paths()
    return sorted({paths["purelib"], paths["platlib"]})


def torch_files():
    """Where torch is and what its files say (``version.py``,
    ``TorchConfig.cmake``), found without executing torch; ``None`` when it
    is not installed. A read error is reported in ``error``, not raised."""
    spec = importlib.util.find_spec("torch")
    if spec is None or not spec.submodule_search_locations:
        return None
    torch_dir = list(spec.submodule_search_locations)[0]
    version_py = os.path.join(torch_dir, "version.py")
    torch = {"dir": torch_dir, "version_py": version_py, "version": None, "cuda": None, "hip": None,
             "cxx11_abi_flag": None}
    try:
        ns = {}
        with open(version_py, encoding="utf-8") as f:
            exec(compile(f.read(), version_py, "exec"), ns)
        torch["version"] = ns.get("__version__")
        torch["cuda"] = ns.get("cuda")
        torch["hip"] = ns.get("hip")
    except Exception as e:  # reported, not raised: the caller explains it
        torch["error"] = "%s: %s" % (type(e).__name__, e)
    config = os.path.join(torch_dir, "share", "cmake", "Torch", "TorchConfig.cmake")
    try:
        with open(config, encoding="utf-8") as f:
            text = f.read()
        marker = "_GLIBCXX_USE_CXX11_ABI="
        if marker in text:
            torch["cxx11_abi_flag"] = text.split(marker, 1)[1][:1]
    except OSError:
        pass
    return torch


if __name__ == "__main__":
    out = dict(python_fields(), executable=sys.executable, site_packages=site_packages(), torch=torch_files())
    print("ABICACHE-PROBE " + json.dumps(out))
