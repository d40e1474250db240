"""The GPU guard on the warm CUDA path (issue 48): what it costs a warm
`TorchOpsExtension.load()`, with and without it, in one run.

Run with the project venv's interpreter (torch, the pip nvcc and the
installed wheel):

    .venv/bin/python benches/bench_gpu_guard.py [--runs 20000] [--processes 15]

examples/cuda_axpy is built for `8.0` into a fresh cache (~1 min; no GPU is
needed), which writes its warm-load record. Without a GPU on the machine,
an `nvidia-smi` stub first on `PATH` stands in for one (an A10, `8.6`, which
the library's `sm_80` serves) and `ABICACHE_TEST_ONLY_NO_NVML=1` keeps NVML
out; on a machine with a GPU pass `--real-gpu` to use it (NVML).

Two measurements, each with the guard on (the stubbed GPU) and off
(`ABICACHE_GPU_CHECK=0`), alternating:

- **per warm load**, in one process: the warm-load record's whole check
  (`_warm_record.check_record`, what a warm `load()` runs before its
  `dlopen`), `--runs` times after a first call (which read the GPUs); the
  difference of the medians is the guard's per-load cost (target ≤ 20 µs);
- **per process**: `--processes` fresh interpreters each timing one warm
  `load()` (beyond `import torch`); the difference includes the guard's
  once-per-process cost (importing `_gpu` and reading the GPUs: here the
  stub's process start; NVML's `nvmlInit` on a real machine).

Prints the medians and differences in µs; the cache is deleted at the end.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Dict, List

REPO = Path(__file__).resolve().parent.parent
CUDA = REPO / "examples" / "cuda_axpy"
ARGS = dict(
    name="cuda_axpy",
    sources=[str(CUDA / "ops.cpp"), str(CUDA / "axpy_kernel.cu")],
    required_ops=["axpy"],
    cuda_archs="8.0",
)

IN_PROCESS = """
import json, os, sys, time, statistics
import torch, abicache
from abicache import _warm_record
from abicache._warm_record import check_record, record_name
args = json.loads(os.environ["BENCH_ARGS"])
ext = abicache.TorchOpsExtension(**args)
name = record_name(ext._warm_spec, ext._warm_root, ext.cache_dir)
runs = int(os.environ["BENCH_RUNS"])
results = {}
for label, guard in (("off", "0"), ("on", "1"), ("off2", "0"), ("on2", "1")):
    os.environ["ABICACHE_GPU_CHECK"] = guard
    first = check_record(name, ext.cache_dir)  # reads the GPUs once (guard on)
    assert first is not None, "the warm record does not answer"
    os.close(first["fd"])
    samples = []
    for _ in range(runs):
        t0 = time.perf_counter()
        r = check_record(name, ext.cache_dir)
        samples.append(time.perf_counter() - t0)
        os.close(r["fd"])
    results[label] = statistics.median(samples)
print("RESULT " + json.dumps(results))
"""

ONE_LOAD = """
import json, os, sys, time
import torch
t0 = time.perf_counter()
import abicache
path = abicache.TorchOpsExtension(**json.loads(os.environ["BENCH_ARGS"])).load()
t1 = time.perf_counter()
print("RESULT " + json.dumps([t1 - t0, "abicache._native" in sys.modules]))
"""


def run(code: str, env: Dict[str, str]) -> object:
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=1800)
    for line in out.stdout.splitlines():
        if line.startswith("RESULT "):
            return json.loads(line[len("RESULT ") :])
    raise SystemExit(f"bench_gpu_guard: a sample failed:\n{out.stdout}\n{out.stderr}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=20000)
    parser.add_argument("--processes", type=int, default=15)
    parser.add_argument("--real-gpu", action="store_true", help="use this machine's GPU (NVML) instead of the stub")
    opts = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="abicache-bench-gpu-guard-"))
    try:
        env = dict(os.environ)
        for var in ("ABICACHE_GPU_CHECK", "CUDA_VISIBLE_DEVICES", "ABICACHE_READONLY_DIRS", "ABICACHE_REBUILD"):
            env.pop(var, None)
        if not opts.real_gpu:
            stub = work / "bin"
            stub.mkdir()
            (stub / "nvidia-smi").write_text("#!/bin/sh\necho '0, NVIDIA A10, 8.6'\n")
            (stub / "nvidia-smi").chmod(0o755)
            env.update(PATH=f"{stub}:{env['PATH']}", ABICACHE_TEST_ONLY_NO_NVML="1")
        env.update(
            BENCH_ARGS=json.dumps(dict(ARGS, cache_dir=str(work / "cache"))),
            BENCH_RUNS=str(opts.runs),
            ABICACHE_PCH="0",
        )
        print("bench_gpu_guard: building examples/cuda_axpy for 8.0 (~1 min) ...", file=sys.stderr)
        first = run(ONE_LOAD, env)
        assert first[1], "the first load is the native path's"
        time.sleep(2.2)  # the racy window: then a native hit writes the warm record
        assert run(ONE_LOAD, env)[1], "the second load is a native hit"
        assert not run(ONE_LOAD, env)[1], "the warm record does not answer"
        gpu = "this machine's GPU (NVML)" if opts.real_gpu else "a stubbed 8.6 GPU (no GPU here)"

        r = run(IN_PROCESS, env)
        off = min(r["off"], r["off2"]) * 1e6
        on = min(r["on"], r["on2"]) * 1e6
        print(f"per warm load (record check, median of {opts.runs}, {gpu}):")
        print(f"  guard off (ABICACHE_GPU_CHECK=0): {off:8.1f} us")
        print(f"  guard on:                         {on:8.1f} us")
        print(f"  difference:                       {on - off:8.1f} us  (target <= 20 us)")

        samples: Dict[str, List[float]] = {"off": [], "on": []}
        for i in range(opts.processes):
            for label in (("off", "on") if i % 2 == 0 else ("on", "off")):
                e = dict(env, ABICACHE_GPU_CHECK="0" if label == "off" else "1")
                seconds, native = run(ONE_LOAD, e)
                assert not native, "a warm load took the native path"
                samples[label].append(seconds)
        off_p = statistics.median(samples["off"]) * 1e6
        on_p = statistics.median(samples["on"]) * 1e6
        print(f"per process (import abicache + one warm load(), median of {opts.processes} fresh interpreters):")
        print(f"  guard off: {off_p:9.0f} us")
        print(f"  guard on:  {on_p:9.0f} us")
        print(f"  difference:{on_p - off_p:9.0f} us  (the GPUs read once per process, plus the per-load check)")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
