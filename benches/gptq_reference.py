"""The reference side of the GPTQModel fingerprint benchmark (issue 2).

Imports GPTQModel 7.7.0's JIT loader modules straight from an unpacked sdist
(without the package ``__init__``, which pulls heavy dependencies), and for
every ``TorchOpsJitExtension`` its loaders define:

* resolves its sources, include paths and flags exactly as the loader does,
  so that ``bench_gptq.py`` can write the same extension as an abicache spec;
* times ``TorchOpsJitExtension._cache_fingerprint()`` (the reference key);
* reports the reference's Python-ABI evidence (the regexes of
  ``_source_abi_details``, with file, line and token).

Run with the project venv's interpreter (it needs torch, PyPcre and LogBar):

    .venv/bin/python benches/gptq_reference.py --sdist DIR --cutlass DIR \
        --cache DIR --out reference.json [--only NAME,...] [--reps N]

Writes one JSON object: ``{"env": {...}, "extensions": {name: {...}}}``.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import json
import os
import statistics
import sys
import sysconfig
import time
import types
from pathlib import Path

# Loader modules that define TorchOpsJitExtension instances (module globals)
# and, for cpp.py, factory functions that create them on first use.
LOADER_MODULES = [
    "gptqmodel.utils.cpp",
    "gptqmodel.utils.awq",
    "gptqmodel.utils.exllamav2",
    "gptqmodel.exllamav3.ext",
    "gptqmodel.utils.marlin",
    "gptqmodel.utils.machete",
    "gptqmodel.utils.swordfish",
    "gptqmodel.utils.hadamard",
    "gptqmodel.utils.paroquant",
    "gptqmodel.utils.qqq",
    "gptqmodel.utils.vptq_cuda",
    "gptqmodel.quantization.gptq_cuda",
]
CPP_FACTORIES = [
    "_pack_block_extension",
    "_floatx_cpu_extension",
    "_int4_qzero_group_scaled_cpu_extension",
]

# Repetitions per extension (median reported); machete takes ~a minute a key.
SLOW_REPS = {"gptqmodel_machete_ops": 1}


def bare_package(name: str, path: Path) -> None:
    """Registers `name` as a package whose modules load from `path`, without its __init__."""
    module = types.ModuleType(name)
    module.__path__ = [str(path)]
    module.__package__ = name
    sys.modules[name] = module


def import_loaders(sdist: Path, cutlass: Path, only: set[str] | None) -> dict[str, object]:
    for pkg in ["gptqmodel", "gptqmodel.utils", "gptqmodel.exllamav3", "gptqmodel.exllamav3.util",
                "gptqmodel.quantization"]:
        bare_package(pkg, sdist.joinpath(*pkg.split(".")))
    import torch  # noqa: F401,PLC0415 - before the numpy stub below: torch probes numpy itself

    if importlib.util.find_spec("numpy") is None:
        # marlin.py imports numpy at module level but only uses it in weight
        # repacking helpers that the fingerprint never calls.
        sys.modules["numpy"] = types.ModuleType("numpy")

    cpp = importlib.import_module("gptqmodel.utils.cpp")
    machete = importlib.import_module("gptqmodel.utils.machete")
    # Point CUTLASS at the headers of the `nvidia-cutlass` wheel instead of
    # downloading the pinned archive (validation would insist on v4.7.1; the
    # fingerprint only walks the headers).
    machete._ensure_cutlass_source = lambda: cutlass
    swordfish = importlib.import_module("gptqmodel.utils.swordfish")
    swordfish._ensure_cutlass_source = lambda: cutlass

    found: dict[str, object] = {}
    for module_name in LOADER_MODULES:
        try:
            module = importlib.import_module(module_name)
        except Exception as exc:  # noqa: BLE001 - report and go on
            print(f"reference: cannot import {module_name}: {exc!r}", file=sys.stderr)
            continue
        for value in vars(module).values():
            if isinstance(value, cpp.TorchOpsJitExtension):
                found.setdefault(value.name, value)
    for factory in CPP_FACTORIES:
        ext = getattr(cpp, factory)()
        found.setdefault(ext.name, ext)
    if only:
        found = {k: v for k, v in found.items() if k in only}
    return found


def resolved_definition(ext) -> dict:
    """The extension as the loader resolves it: what an abicache spec needs."""
    sources = ext._resolve_sequence(ext.sources)
    return {
        "name": ext.name,
        "namespace": ext.namespace,
        "required_ops": list(ext.required_ops),
        "sources": sources,
        "extra_cflags": ext._resolved_extra_cflags(),
        "extra_cuda_cflags": ext._resolved_extra_cuda_cflags(),
        "extra_include_paths": ext._resolved_extra_include_paths(),
        "extra_ldflags": ext._resolved_extra_ldflags(),
        "requires_cuda": ext.requires_cuda,
        "python_abi_dependent": ext.python_abi_dependent,
        "torch_stable_abi_target": list(ext.torch_stable_abi_target) if ext.torch_stable_abi_target else None,
    }


def time_fingerprint(ext, reps: int) -> tuple[str, list[float]]:
    """Wall time of `_cache_fingerprint()`, each rep as a fresh process would pay it.

    The instance memoizes ABI detection per source text; a new process has no
    such memo, so it is cleared before each rep. `_system_include_roots` (an
    lru_cache) stays warm: a process pays it once, not per key.
    """
    times = []
    fingerprint = ""
    for _ in range(reps):
        ext._source_abi_detection_cache = {}
        start = time.perf_counter()
        fingerprint = ext._cache_fingerprint()
        times.append((time.perf_counter() - start) * 1e3)
    return fingerprint, times


def reference_markers(cpp, ext, sources, include_paths) -> list[dict]:
    """Python-ABI evidence as `_source_abi_details` sees it, with file and line.

    Same regexes over the same texts (`_source_texts`), but comments are
    replaced by their newlines instead of removed so that a match's line
    number can be given; the verdict is checked against the reference's own.
    """
    marker_patterns = [cpp._PYTHON_ABI_USAGE_PATTERN, cpp._REGISTER_EXTENSION_PATTERN]
    out = []
    seen = set()
    for source in sources:
        for path, text in ext._source_texts(source, include_paths):
            file_key = cpp._fingerprint_path_key(path)
            if file_key in seen:
                continue
            seen.add(file_key)
            stripped = cpp._C_COMMENT_PATTERN.sub(lambda m: "\n" * m.group(0).count("\n"), text)
            hits = []
            for pattern in marker_patterns:
                for m in pattern.finditer(stripped):
                    hits.append((m.start(), m.group(0).rstrip("( \t")))
            for m in cpp._SOURCE_INCLUDE_PATTERN.finditer(stripped):
                name = m.group(2)
                if name == "Python.h" or name.startswith("pybind11/") or name in {"torch/extension.h", "torch/python.h"}:
                    hits.append((m.start(2), name))
            for pos, token in sorted(hits):
                line = stripped.count("\n", 0, pos) + 1
                out.append({"file": file_key, "line": line, "marker": token})
    return out


def nvcc_release() -> str | None:
    """Release of the nvcc from NVIDIA's pip wheel next to torch (what abicache would find)."""
    import re  # noqa: PLC0415
    import subprocess  # noqa: PLC0415

    import torch  # noqa: PLC0415

    for nvcc in sorted(Path(torch.__file__).parent.parent.glob("nvidia/*/bin/nvcc")):
        out = subprocess.run([str(nvcc), "--version"], capture_output=True, text=True).stdout
        m = re.search(r"release (\d+\.\d+)", out)
        if m:
            return m.group(1)
    return None


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sdist", type=Path, required=True)
    ap.add_argument("--cutlass", type=Path, required=True)
    ap.add_argument("--cache", type=Path, required=True, help="GPTQMODEL_CACHE_DIR (generated kernels)")
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--only", default="", help="comma-separated extension names")
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--describe-only", action="store_true", help="resolve definitions, time nothing")
    ap.add_argument("--detect-only", action="store_true",
                    help="resolve definitions and the reference's Python-ABI detection, time nothing")
    args = ap.parse_args()

    os.environ.setdefault("TORCH_CUDA_ARCH_LIST", "9.0")
    os.environ["GPTQMODEL_CACHE_DIR"] = str(args.cache.resolve())
    only = {n for n in args.only.split(",") if n} or None
    exts = import_loaders(args.sdist.resolve(), args.cutlass.resolve(), only)
    cpp = sys.modules["gptqmodel.utils.cpp"]
    import torch  # noqa: PLC0415 - after the loaders, as they import it

    torch_dir = Path(torch.__file__).parent.resolve()
    python_include = Path(sysconfig.get_paths()["include"]).resolve()
    env = {
        "python_version": sys.version.split()[0],
        "python_soabi": sysconfig.get_config_var("SOABI"),
        "python_abiflags": getattr(sys, "abiflags", None),
        "torch_version": torch.__version__,
        "torch_cuda": torch.version.cuda,
        "cxx11_abi": bool(torch._C._GLIBCXX_USE_CXX11_ABI),
        "nvcc_version": nvcc_release(),
        "torch_dir": str(torch_dir),
        "python_include": str(python_include),
        # The reference's system roots beyond torch and Python: CUDA toolkit
        # and NVIDIA wheel include dirs. abicache gets the same set.
        "cuda_include_dirs": [str(p) for p in cpp._system_include_roots()
                              if not p.is_relative_to(torch_dir) and p != python_include],
        "torch_cuda_arch_list": os.environ["TORCH_CUDA_ARCH_LIST"],
    }
    result = {"env": env, "extensions": {}}
    for name, ext in sorted(exts.items()):
        try:
            definition = resolved_definition(ext)
        except Exception as exc:  # noqa: BLE001
            print(f"reference: {name}: cannot resolve: {exc!r}", file=sys.stderr)
            continue
        entry = {"definition": definition}
        if args.detect_only:
            detected = ext._source_abi_details(definition["sources"], definition["extra_include_paths"])
            entry["python_abi_detected"] = bool(detected[0])
        elif not args.describe_only:
            # Warm-up: generates kernels (marlin, machete) and fills the
            # process-wide caches; not timed.
            ext._cache_fingerprint()
            reps = SLOW_REPS.get(name, args.reps)
            fingerprint, times = time_fingerprint(ext, reps)
            include_paths = definition["extra_include_paths"]
            detected = ext._source_abi_details(definition["sources"], include_paths)
            markers = reference_markers(cpp, ext, definition["sources"], include_paths)
            visited = sorted({cpp._fingerprint_path_key(path) for source in definition["sources"]
                              for path, _ in ext._source_texts(source, include_paths)})
            entry.update({
                "fingerprint": fingerprint,
                "times_ms": times,
                "median_ms": statistics.median(times),
                "python_abi_detected": bool(detected[0]),
                "markers": markers,
                "visited": visited,
            })
            print(f"reference: {name}: {statistics.median(times):.1f} ms (x{reps})", file=sys.stderr)
        result["extensions"][name] = entry
    args.out.write_text(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
