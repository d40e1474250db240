"""One process of the real-client interception benchmark
(`benches/bench_intercept_clients.py`), run inside a side venv, with or
without `abicache run` around it: the client's own code builds and loads
its extensions, and this checks them against pure-torch references.

    python intercept_clients_driver.py deepspeed --out RESULT.json
    python intercept_clients_driver.py gptq --sdist DIR --out RESULT.json
    python intercept_clients_driver.py deepspeed --floor-libraries '[[NAME, PATH], ...]' --out RESULT.json

Records every `torch.utils.cpp_extension.load` call the client makes (name,
seconds, the library it returned), which `load` that was (torch's, or abicache's through the
interception, or the floor: `--floor-libraries` replaces `load` with an
import of the built module from its path), and the largest difference
from the reference.
"""

from __future__ import annotations

import argparse
import importlib
import json
import sys
import time
import types
from pathlib import Path
from typing import Any, Callable, Dict, List

import torch
import torch.utils.cpp_extension as cpp_extension

CALLS: List[Dict[str, Any]] = []


def time_load() -> str:
    """Wraps the module's `load` (abicache's when intercepting: the import
    above patched it) so each call is timed; returns whose `load` it is."""
    inner = cpp_extension.load
    owner = ("abicache" if hasattr(inner, "_abicache_original")
             else "floor" if hasattr(inner, "_abicache_floor") else "torch")

    def load(*args: Any, **kwargs: Any) -> Any:
        started = time.perf_counter()
        loaded = None
        try:
            loaded = inner(*args, **kwargs)
            return loaded
        finally:
            seconds = time.perf_counter() - started
            CALLS.append({"name": kwargs.get("name", args[0] if args else None), "seconds": seconds,
                          "path": loaded if isinstance(loaded, str) else getattr(loaded, "__file__", None)})

    cpp_extension.load = load
    return owner


def lion_reference(params: List[torch.Tensor], grads: List[List[torch.Tensor]], lr: float, betas: tuple,
                   weight_decay: float) -> List[torch.Tensor]:
    """Lion (Chen et al. 2023) in pure torch, as DeepSpeed's CPU kernel computes it."""
    out = [p.clone() for p in params]
    momentum = [torch.zeros_like(p) for p in params]
    for step in grads:
        for p, m, g in zip(out, momentum, step):
            update = (betas[0] * m + (1 - betas[0]) * g).sign()
            p.mul_(1 - lr * weight_decay).add_(update, alpha=-lr)
            m.mul_(betas[1]).add_(g, alpha=1 - betas[1])
    return out


def run_optimizer(make: Callable[[List[torch.nn.Parameter]], Any], params: List[torch.Tensor],
                  grads: List[List[torch.Tensor]]) -> List[torch.Tensor]:
    live = [torch.nn.Parameter(p.clone()) for p in params]
    optimizer = make(live)
    for step in grads:
        for p, g in zip(live, step):
            p.grad = g.clone()
        optimizer.step()
    return [p.detach() for p in live]


def deepspeed_client() -> Dict[str, Any]:
    from deepspeed.ops.adagrad import DeepSpeedCPUAdagrad
    from deepspeed.ops.adam import DeepSpeedCPUAdam
    from deepspeed.ops.lion import DeepSpeedCPULion

    torch.manual_seed(0)
    params = [torch.randn(257, 33), torch.randn(1000)]
    grads = [[torch.randn_like(p) for p in params] for _ in range(3)]
    cases = {
        "cpu_adam": (lambda ps: DeepSpeedCPUAdam(ps, lr=1e-2, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0),
                     run_optimizer(lambda ps: torch.optim.Adam(ps, lr=1e-2, betas=(0.9, 0.999), eps=1e-8),
                                   params, grads)),
        "cpu_adagrad": (lambda ps: DeepSpeedCPUAdagrad(ps, lr=1e-2, eps=1e-10, weight_decay=0.0),
                        run_optimizer(lambda ps: torch.optim.Adagrad(ps, lr=1e-2, eps=1e-10), params, grads)),
        "cpu_lion": (lambda ps: DeepSpeedCPULion(ps, lr=1e-3, betas=(0.9, 0.99), weight_decay=0.0),
                     lion_reference(params, grads, 1e-3, (0.9, 0.99), 0.0)),
    }
    diffs = {}
    for op, (make, expected) in cases.items():
        got = run_optimizer(make, params, grads)
        diffs[op] = max(float((a - b).abs().max()) for a, b in zip(got, expected))
    return {"max_abs_diff": diffs, "ok": all(d < 1e-5 for d in diffs.values())}


def gptq_client(sdist: Path) -> Dict[str, Any]:
    # GPTQModel's loader module straight from the sdist, without the
    # package's __init__ (which pulls heavy dependencies), as
    # benches/gptq_reference.py imports it.
    for pkg in ["gptqmodel", "gptqmodel.utils"]:
        module = types.ModuleType(pkg)
        module.__path__ = [str(sdist.joinpath(*pkg.split(".")))]
        module.__package__ = pkg
        sys.modules[pkg] = module
    cpp = importlib.import_module("gptqmodel.utils.cpp")
    extension = cpp._pack_block_extension()
    loaded = extension.load()
    if not loaded:
        return {"ok": False, "error": getattr(extension, "_last_error", "")}
    out_features, in_features, bits = 32, 64, 4
    q = (torch.arange(out_features * in_features, dtype=torch.int32) * 7 % 16).reshape(out_features, in_features)
    zeros = (torch.arange(out_features, dtype=torch.int32) % 16).reshape(1, out_features)
    scales = torch.ones(1, out_features)
    g_idx = torch.zeros(in_features, dtype=torch.int32)
    weight = (q - zeros.T).to(torch.float32)
    qweight, qzeros = torch.ops.gptqmodel.pack_block_cpu(weight, scales, zeros, g_idx, bits, 32, 32, 1)
    shifts = torch.arange(8, dtype=torch.int64) * bits
    planes = q.to(torch.int64).reshape(out_features, in_features // 32, bits, 32 // bits)
    expected = (planes << shifts).sum(-1).reshape(out_features, -1).T
    expected = ((expected + 2**31) % 2**32 - 2**31).to(torch.int32)
    expected_zeros = (zeros.to(torch.int64).reshape(1, out_features // 8, 8) << shifts).sum(-1)
    expected_zeros = ((expected_zeros + 2**31) % 2**32 - 2**31).to(torch.int32)
    ok = torch.equal(qweight, expected) and torch.equal(qzeros, expected_zeros)
    return {"ok": ok, "build_root": str(extension.build_root())}


def floor_load(libraries: List[List[str]]) -> Callable[..., Any]:
    """A `load` that only imports the module the client asks for from the
    path given for its name (`[name, path]` pairs): the floor a warm `load`
    is compared with, timed by `time_load` in the client's own process, at
    the same points of its work as the real `load`."""
    import importlib.machinery
    import importlib.util

    paths = dict((name, path) for name, path in libraries)

    def load(name: str, *args: Any, **kwargs: Any) -> Any:
        path = paths[name]
        loader = importlib.machinery.ExtensionFileLoader(name, path)
        spec = importlib.util.spec_from_file_location(name, path, loader=loader)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module

    load._abicache_floor = True  # type: ignore[attr-defined]
    return load


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("client", choices=["deepspeed", "gptq"])
    parser.add_argument("--sdist", type=Path)
    parser.add_argument("--floor-libraries", help="a JSON list of [module name, library path]: `load` only "
                        "imports the module from its path (the floor), for a client that loads Python modules")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    if args.floor_libraries:
        cpp_extension.load = floor_load(json.loads(args.floor_libraries))
    owner = time_load()
    started = time.perf_counter()
    result = deepspeed_client() if args.client == "deepspeed" else gptq_client(args.sdist)
    result.update(load_owner=owner, calls=CALLS, client_seconds=time.perf_counter() - started,
                  abicache_native_loaded="abicache._native" in sys.modules,
                  libraries=sorted(set(_loaded_libraries())))
    args.out.write_text(json.dumps(result, indent=1))
    return 0 if result["ok"] else 1


def _loaded_libraries() -> List[str]:
    """The shared libraries this process has mapped from the benchmark's
    state directory (torch's build directories, abicache's cache,
    GPTQModel's build root)."""
    import os

    state = os.environ.get("ABICACHE_BENCH_STATE", "/nonexistent")
    with open("/proc/self/maps") as maps:
        return [line.split()[-1] for line in maps if line.rstrip().endswith(".so") and state in line]


if __name__ == "__main__":
    sys.exit(main())
