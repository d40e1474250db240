#!/usr/bin/env bash
# The GPU check: what only a machine with an NVIDIA GPU can show (issue 48).
#
#   scripts/gpu-check.sh          run it (skips, exit 0, without a GPU)
#   scripts/gpu-check.sh --help   this text
#
# With the GPU(s) `nvidia-smi` lists, in a throw-away cache:
# 1. builds examples/cuda_axpy for the visible GPU's capability, runs its op
#    on the GPU and compares the result with torch's own `alpha * x + y`;
# 2. builds it for a capability the GPU lacks (another major version) and
#    shows the GPU guard refuse it before the load (AbiError, exit 2),
#    naming the GPU and the fix;
# 3. builds a multi-arch entry (the visible capability and a second one,
#    `+PTX`), then loads the extension with no arch list named (the list
#    then comes from the visible GPU) and shows that entry serve it:
#    0 compiles, a hit (the covering lookup of issue 48).
# Uses .venv (torch 2.15 with CUDA, the pip nvcc) and the `abicache`
# installed there (scripts/install-python-package.sh). Without a GPU it says
# so and exits 0: scripts/test.sh calls it on every machine.
set -euo pipefail
cd "$(dirname "$0")/.."

if [ "${1:-}" = --help ]; then
  sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'
  exit 0
fi

gpus=$(nvidia-smi --query-gpu=index,name,compute_cap --format=csv,noheader 2>/dev/null || true)
if [ -z "$gpus" ]; then
  echo "gpu-check: skipped: \`nvidia-smi\` lists no GPU on this machine (the stubbed-GPU tests in" \
       "tests/python/test_gpu_guard.py and crates/abicache-cli/tests/it/gpu_guard.rs cover the guard)" >&2
  exit 0
fi
python=.venv/bin/python
[ -x "$python" ] || { echo "gpu-check: no .venv here; run \`scripts/setup-venv.sh dev\` first" >&2; exit 2; }

echo "gpu-check: GPUs:" >&2
echo "$gpus" | sed 's/^/  /' >&2
cap=$(echo "$gpus" | head -n1 | awk -F', ' '{print $NF}')
major=${cap%%.*}
# A capability this GPU lacks: another major version (sm_XY runs only on X.y).
if [ "$major" -ge 9 ]; then other=8.0; else other=9.0; fi
work=$(mktemp -d "${TMPDIR:-/tmp}/abicache-gpu-check.XXXXXX")
trap 'rm -rf "$work"' EXIT
export ABICACHE_DIR=$work/cache ABICACHE_PCH=0
unset ABICACHE_GPU_CHECK TORCH_CUDA_ARCH_LIST ABICACHE_READONLY_DIRS

run_py() { # run_py ARCHS CODE: the example built for ARCHS, then CODE with `ext` and `path`
  GPU_CHECK_ARCHS=$1 "$python" - <<PY
import os, sys, time, torch, abicache
ext = abicache.TorchOpsExtension(
    name="cuda_axpy", sources=["examples/cuda_axpy/ops.cpp", "examples/cuda_axpy/axpy_kernel.cu"],
    required_ops=["axpy"], cuda_archs=os.environ["GPU_CHECK_ARCHS"] or None)
$2
PY
}

echo "== 1. built for this GPU ($cap): the op's result against torch's" >&2
run_py "$cap" '
path = ext.load()
x = torch.randn(1 << 20, device="cuda"); y = torch.randn(1 << 20, device="cuda")
out = torch.ops.cuda_axpy.axpy(2.5, x, y)
torch.cuda.synchronize()
err = (out - (2.5 * x + y)).abs().max().item()
print(f"gpu-check: {path}: max |axpy - torch| = {err:.3g}")
sys.exit(0 if err <= 1e-5 else 1)'

echo "== 2. built for $other, which this GPU lacks: the guard refuses it before the load" >&2
if run_py "$other" '
try:
    ext.load()
except abicache.AbiError as e:
    print(f"gpu-check: refused as expected: {e}")
    sys.exit(0)
print("gpu-check: NOT refused: the guard let a library for another GPU through")
sys.exit(1)'; then :; else echo "gpu-check: FAILED at step 2" >&2; exit 1; fi

archs="$cap $other+PTX"
echo "== 3. a multi-arch entry ($archs) serves this GPU with 0 compiles" >&2
run_py "$archs" '
ext.load()
print("gpu-check: built the multi-arch entry")'
run_py "" '
from abicache import _native, _native_path
spec, env, root, cache = _native_path.native_args(ext)
again = _native.build(spec, env, root, cache)
hit, compiled, images = again["hit"], len(again["compiled"]), again.get("device_images")
print(f"gpu-check: no arch list named: hit={hit}, compiled={compiled}, images={images}")
x = torch.ones(4, device="cuda")
ext.load()
print("gpu-check: op result", torch.ops.cuda_axpy.axpy(1.0, x, x).tolist())
sys.exit(0 if hit and compiled == 0 else 1)'
echo "gpu-check: passed" >&2
