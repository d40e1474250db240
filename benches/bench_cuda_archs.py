"""Issue 50 benchmark: CUDA device code reused per architecture.

Run with the project venv's interpreter (it needs torch and the pip nvcc; no GPU):

    .venv/bin/python benches/bench_cuda_archs.py --abicache target/release/abicache --work benches/.work

A generated extension of two `.cu` units whose device code dominates the
compile (templated register-tiled kernels, fully unrolled, several
instantiations per unit, as CUTLASS-style code is), in one run:

1. on cache A: build it for `8.0`, then for `8.0 9.0` (the second build must
   compile only the `9.0` device steps and the host objects: read from
   `abicache stats --json`);
2. on an empty cache B: a cold `8.0 9.0` build.

Prints `second / cold` (target <= 0.6) and `first / cold`, checks that both
libraries load (`torch.ops.load_library`, no GPU needed) and that their
fat-binary images (cuobjdump from `nvidia-cuda-cuobjdump`) equal those of a
one-shot nvcc build of the same compile commands. Writes `cuda_archs.json`
in the work dir.
"""

from __future__ import annotations

import argparse
import glob
import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

from bench_common import abicache_build, builder_env, fresh_work_dir

KERNEL = r"""#include <cuda_runtime.h>
template <int TM, int TN, int K>
__global__ void tile_gemm_{unit}(const float* __restrict__ a, const float* __restrict__ b,
                                 float* __restrict__ c, int n) {{
  float acc[TM][TN];
#pragma unroll
  for (int i = 0; i < TM; ++i)
#pragma unroll
    for (int j = 0; j < TN; ++j) acc[i][j] = 0.f;
  int row = (blockIdx.y * blockDim.y + threadIdx.y) * TM;
  int col = (blockIdx.x * blockDim.x + threadIdx.x) * TN;
#pragma unroll
  for (int k = 0; k < K; ++k) {{
    float ra[TM], rb[TN];
#pragma unroll
    for (int i = 0; i < TM; ++i) ra[i] = a[(row + i) * n + k];
#pragma unroll
    for (int j = 0; j < TN; ++j) rb[j] = b[k * n + col + j];
#pragma unroll
    for (int i = 0; i < TM; ++i)
#pragma unroll
      for (int j = 0; j < TN; ++j) acc[i][j] = fmaf(ra[i], rb[j], acc[i][j] * 1.0001f + (float)(i ^ j));
  }}
#pragma unroll
  for (int i = 0; i < TM; ++i)
#pragma unroll
    for (int j = 0; j < TN; ++j) c[(row + i) * n + col + j] = acc[i][j];
}}
{instances}
extern "C" int cuda_archs_{unit}(void) {{ return 0; }}
"""

SHAPES = [(8, 8, 64), (8, 4, 64), (4, 8, 64), (8, 8, 32), (6, 8, 64), (8, 6, 64), (4, 4, 128), (8, 8, 48)]


def write_extension(root: Path, instances: int) -> None:
    root.mkdir(parents=True, exist_ok=True)
    for unit in ("a", "b"):
        shapes = SHAPES[:instances] if unit == "a" else SHAPES[-instances:]
        inst = "\n".join(
            f"template __global__ void tile_gemm_{unit}<{m}, {n}, {k}>(const float*, const float*, float*, int);"
            for m, n, k in shapes
        )
        (root / f"{unit}.cu").write_text(KERNEL.format(unit=unit, instances=inst))
    for archs, spec in (("8.0", "archs80.toml"), ("8.0 9.0", "archs8090.toml")):
        (root / spec).write_text(
            f'[[extension]]\nname = "cuda_archs"\nsources = ["a.cu", "b.cu"]\ncuda_archs = "{archs}"\n'
        )


def cuobjdump() -> str:
    for d in sys.path:
        for path in glob.glob(os.path.join(d, "nvidia", "cu*", "bin", "cuobjdump")):
            return path
    sys.exit("bench_cuda_archs: no cuobjdump: pip install -r scripts/requirements-dev.txt into .venv")


def images(tool: str, path: Path, scratch: Path) -> list:
    """The embedded cubins of `path`, as sorted (file-name architecture, sha256)."""
    shutil.rmtree(scratch, ignore_errors=True)
    scratch.mkdir(parents=True)
    subprocess.run([tool, "--list-elf", "--list-ptx", str(path)], check=True, capture_output=True)
    subprocess.run([tool, "-xelf", "all", str(path)], check=True, capture_output=True, cwd=scratch)
    found = []
    for f in scratch.iterdir():
        arch = next((p for p in f.name.split(".") if p.startswith("sm_")), "?")
        found.append((arch, hashlib.sha256(f.read_bytes()).hexdigest()))
    return sorted(found)


def one_shot_images(tool: str, library: Path, scratch: Path) -> list:
    """Compiles each unit one-shot with nvcc, with the exact command the
    build used (its compile_commands.json), and returns their images."""
    commands = json.loads((library.parent / "compile_commands.json").read_text())
    found = []
    for i, entry in enumerate(commands):
        argv = list(entry["arguments"])
        obj = scratch / f"ref{i}.o"
        scratch.mkdir(parents=True, exist_ok=True)
        argv[-1] = str(obj)
        subprocess.run(argv, check=True, capture_output=True, cwd=entry["directory"])
        found += images(tool, obj, scratch / f"x{i}")
    return sorted(found)


def loads(library: Path) -> bool:
    code = "import sys, torch; torch.ops.load_library(sys.argv[1])"
    return subprocess.run([sys.executable, "-c", code, str(library)], capture_output=True).returncode == 0


def device_steps(abicache: Path, cache: Path, env: dict) -> dict:
    out = subprocess.run([str(abicache), "--cache-dir", str(cache), "stats", "--json"], check=True,
                         capture_output=True, text=True, env=env)
    return json.loads(out.stdout).get("device_steps", {})


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--abicache", type=Path, required=True)
    ap.add_argument("--work", type=Path, required=True)
    ap.add_argument("--instances", type=int, default=4, help="kernel instantiations per unit (1-8)")
    ap.add_argument("--cuobjdump", help="the cuobjdump to read images with (default: the venv's pip one)")
    args = ap.parse_args()
    work = fresh_work_dir(args.work, "cuda_archs")
    ext = work / "ext"
    write_extension(ext, args.instances)
    env = builder_env()
    tool = args.cuobjdump or cuobjdump()

    cache_a, cache_b = work / "cache-a", work / "cache-b"
    first = abicache_build(args.abicache, ext / "archs80.toml", cache_a, env)
    after_first = device_steps(args.abicache, cache_a, env)
    second = abicache_build(args.abicache, ext / "archs8090.toml", cache_a, env)
    after_second = device_steps(args.abicache, cache_a, env)
    cold = abicache_build(args.abicache, ext / "archs8090.toml", cache_b, env)

    second_steps = {
        arch: {k: after_second[arch][k] - after_first.get(arch, {}).get(k, 0) for k in ("reused", "compiled")}
        for arch in after_second
    }
    expected_steps = {"sm_80": {"reused": 2, "compiled": 0}, "sm_90": {"reused": 0, "compiled": 2}}
    checks = {}
    for label, outcome in (("8.0", first), ("8.0 9.0", second)):
        library = Path(outcome["path"])
        got = images(tool, library, work / "x-lib")
        want = one_shot_images(tool, library, work / f"ref-{label.replace(' ', '-')}")
        checks[label] = {"loads": loads(library), "images_equal_one_shot": got == want, "images": len(got)}

    ratio_second = second["process_s"] / cold["process_s"]
    ratio_first = first["process_s"] / cold["process_s"]
    result = {
        "instances_per_unit": args.instances,
        "first_8.0_s": first["process_s"],
        "second_8.0_9.0_s": second["process_s"],
        "cold_8.0_9.0_s": cold["process_s"],
        "second_over_cold": ratio_second,
        "first_over_cold": ratio_first,
        "second_device_steps": second_steps,
        "second_device_steps_as_expected": second_steps == expected_steps,
        "libraries": checks,
    }
    (work.parent / "cuda_archs.json").write_text(json.dumps(result, indent=2) + "\n")
    print(f"cuda archs: 8.0 {first['process_s']:.1f}s, then 8.0 9.0 {second['process_s']:.1f}s; "
          f"cold 8.0 9.0 {cold['process_s']:.1f}s")
    print(f"  second / cold = {ratio_second:.2f} (target <= 0.6); first / cold = {ratio_first:.2f}")
    print(f"  second build's device steps: {second_steps}")
    for label, check in checks.items():
        print(f"  {label}: loads={check['loads']}, images equal one-shot nvcc={check['images_equal_one_shot']} "
              f"({check['images']} cubins)")
    ok = (second_steps == expected_steps and ratio_second <= 0.6
          and all(c["loads"] and c["images_equal_one_shot"] for c in checks.values()))
    if not ok:
        sys.exit("bench_cuda_archs: a check failed (above)")


if __name__ == "__main__":
    main()
