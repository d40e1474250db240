# Probes a Python interpreter for abicache without importing torch.
# Run as `python -I -B -c <this>`; prints one line: `ABICACHE-PROBE <json>`.
import importlib.util
import json
import os
import sys
import sysconfig

out = {
    "executable": sys.executable,
    "python_version": "%d.%d.%d" % sys.version_info[:3],
    "python_soabi": sysconfig.get_config_var("SOABI"),
    "python_abiflags": getattr(sys, "abiflags", None),
    "python_include": sysconfig.get_paths().get("include"),
    "site_packages": sorted({sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]}),
    "torch": None,
}
spec = importlib.util.find_spec("torch")
if spec is not None and spec.submodule_search_locations:
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
    out["torch"] = torch
print("ABICACHE-PROBE " + json.dumps(out))
