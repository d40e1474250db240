#!/usr/bin/env bash
# Runs every benchmark and prints the figures against their targets, then
# records the headline figures in benches/latest.json and README.md's
# figures block (benches/readme_figures.py). Benchmarks measure, not test:
# this exits 0 when the measurements ran, whatever the ratios. See
# benches/README.md.
#
#   scripts/bench.sh [--floors] [--reference COMMIT]   (after scripts/setup-venv.sh dev)
#
# --floors: only the figures measured against a floor, in one run (~15
#   minutes): the GPTQModel keys, the generated tree's cold key against its
#   read+BLAKE3 floor, the lexer alone, the cold keys of machete and of the
#   tree against the reference scanner, and every warm path against its
#   floor (bench_warm_paths.py: TorchOpsExtension CPU and CUDA, the
#   drop-ins, same-process repeats, `abicache key`).
# --reference COMMIT: the earlier abicache whose key_time the cold keys are
#   compared with (default 91db52b, before the stat cache and key memo).
#
# The whole run takes about an hour on a 2-core machine (the interception
# clients, PyTorch's JIT file cold and warm, the PCH and build benchmarks;
# the GPTQModel reference alone needs ~2 minutes: marlin ~2.5 s and swordfish
# ~6 s a key, machete ~1 min once), plus ~12 minutes once per machine to
# build the reference scanner's key_time that the cold keys are compared with.
# Downloads once into benches/.work/ (git-ignored): the GPTQModel 7.7.0 sdist
# and the nvidia-cutlass wheel (CUTLASS headers); installs benches/requirements.txt
# (PyPcre, LogBar: what GPTQModel's cpp.py imports) into .venv.
set -euo pipefail
floors_only=0
reference_commit=91db52b
while [ $# -gt 0 ]; do
  case $1 in
    --floors) floors_only=1 ;;
    --reference) reference_commit=${2:?--reference needs a commit}; shift ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d'; exit 0 ;;
    *) echo "bench: unknown argument \`$1\` (see --help)" >&2; exit 2 ;;
  esac
  shift
done
repo=$(cd "$(dirname "$0")/.." && pwd)
cd "$repo"
work=$repo/benches/.work
venv=$repo/.venv
# The per-machine target directory the other scripts build in (scripts/dev-env.sh).
. "$repo/scripts/dev-env.sh"

if [ ! -x "$venv/bin/python" ]; then
  echo "bench: no project venv at \`.venv\`: run \`scripts/setup-venv.sh dev\` first" >&2
  exit 2
fi
mkdir -p "$work"
# The summary shows this run's figures only.
rm -f "$work"/*.json

# Bench-only Python packages, installed once (a stamp keyed by the file).
stamp=$venv/.abicache-bench-$(sha256sum benches/requirements.txt | cut -c1-16)
if [ ! -f "$stamp" ]; then
  echo "bench: installing benches/requirements.txt into .venv" >&2
  "$(dev_venv_python "$venv")" -m pip install --quiet -r benches/requirements.txt
  touch "$stamp"
fi

echo "bench: building release binaries (abicache, key_time, audit_time)" >&2
cargo build --release --quiet -p abicache-cli
cargo build --release --quiet -p abicache --example key_time
cargo build --release --quiet -p abicache-audit --example audit_time
bin=$CARGO_TARGET_DIR/release

python3 benches/bench_gptq.py --venv "$venv" --abicache "$bin/abicache" \
  --key-time "$bin/examples/key_time" --work "$work"
python3 benches/bench_tree.py --key-time "$bin/examples/key_time" \
  --env "$work/gptq-env.toml" --work "$work"
# The lexer alone on the same tree: 16-bytes-at-a-time vs the scalar reference vs BLAKE3.
echo "bench: lexer throughput on the generated tree (lex_time)" >&2
cargo run --release --quiet -p abicache-scan --example lex_time -- "$work/tree"
# The cold keys of machete and of the tree against the previous scanner
# (commit 91db52b), whose key_time is built once per machine (~12 minutes
# the first time).
if reference=$(benches/build_reference_key_time.sh "$reference_commit"); then
  python3 benches/bench_cold_key.py --key-time "$bin/examples/key_time" \
    --reference-key-time "$reference" --reference-label "$reference_commit" --out "$work" --name machete \
    --spec "$work/gptqmodel-7.7.0/abicache-bench-machete.toml" --env "$work/gptq-env.toml"
  python3 benches/bench_cold_key.py --key-time "$bin/examples/key_time" \
    --reference-key-time "$reference" --reference-label "$reference_commit" --out "$work" --name tree \
    --spec "$work/tree/abicache.toml" --env "$work/gptq-env.toml"
else
  echo "bench: no reference key_time (above): the cold keys against the previous scanner are skipped" >&2
fi
if [ "$floors_only" = 1 ]; then
  # Every warm path against its floor (needs the package in .venv).
  scripts/install-python-package.sh .venv
  "$venv/bin/python" benches/bench_warm_paths.py --work "$work" --abicache "$bin/abicache" --runs 21
  python3 benches/summary.py "$work" --write benches/latest.json
  python3 benches/readme_figures.py
  exit 0
fi
"$venv/bin/python" -W ignore benches/bench_build.py --abicache "$bin/abicache" \
  --audit-time "$bin/examples/audit_time" --work "$work"
# torch/extension.h extensions with shared PCHs, a second checkout.
# Several minutes on 2 cores (nine 3-unit compiles of torch/extension.h, one
# ~40 s PCH; ~800 MB of disk under benches/.work/pch while it runs).
"$venv/bin/python" -W ignore benches/bench_pch.py --abicache "$bin/abicache" --work "$work"
rm -rf "$work/pch"
"$venv/bin/python" -W ignore benches/bench_cuda_archs.py --abicache "$bin/abicache" --work "$work"
rm -rf "$work/cuda_archs"
# Interception: what the wheel's abicache-intercept.pth adds to every interpreter start (target ≤ 0.1 ms).
"$venv/bin/python" benches/bench_intercept_startup.py --work "$work"
# Warm load beyond `import torch` (needs the package in .venv).
scripts/install-python-package.sh .venv
"$venv/bin/python" benches/bench_load.py --work "$work"
# Hit latency on a shared (sshfs) mount against a local cache, on the two-node
# test bed (issue 51; root and scripts/setup-services.sh's sshfs, else it says
# why it skipped).
"$venv/bin/python" benches/bench_shared_hit.py --work "$work"
# Interception: DeepSpeed 0.19.8 and GPTQModel 7.7.0, unmodified, under `abicache run` and with torch's
# own load (side venvs under benches/.work/intercept; ~15 minutes on 2 cores, 12 extension compiles).
python3 benches/bench_intercept_clients.py --venv "$venv" --work "$work/intercept" \
  --wheel "$(scripts/install-python-package.sh --print-wheel)"
# A hit whose stat stamp matches costs no re-hash, whatever the size.
echo "bench: store hit latency, hashed vs stamped (lookup_latency)" >&2
cargo run --release --quiet -p abicache-store --example lookup_latency
# Warm load against the torch.ops.load_library floor, 0.5 and 256 MiB libraries.
"$venv/bin/python" benches/bench_warm.py --work "$work" --breakdown
# Every warm path against its floor, in one run: TorchOpsExtension.load (CPU,
# CUDA), load/load_inline (is_python_module True and False), same-process
# repeats, `abicache key` and `build` warm (benches/README.md's table).
"$venv/bin/python" benches/bench_warm_paths.py --work "$work" --abicache "$bin/abicache" --runs 21
# PyTorch's JIT-extension tests, cold and warm, torch's vs abicache's load/load_inline.
scripts/link-torch-jit-upstream.sh
"$(dev_venv_python "$venv")" -m pip install --quiet -r tests/torch_jit/requirements.txt
"$venv/bin/python" benches/bench_torch_jit.py --work "$work/torch_jit"
python3 benches/summary.py "$work" --write benches/latest.json
python3 benches/readme_figures.py
# Every GPTQModel extension keyed (16 rows, swordfish across torch
# releases with no toolchain on PATH), then the CPU kernels built from the
# sdist by `abicache build`, loaded and checked against pure-torch references
# (the slow pytest marker: three ATen compiles).
python3 benches/check_gptq.py --abicache "$bin/abicache" --work "$work"
ABICACHE_BIN=$bin/abicache "$venv/bin/python" -m pytest -m slow -q tests/python/test_gptq_cpu_kernels.py
# The production recipe with DeepSpeed 0.19.8's CPU optimizers: record under
# `abicache run --record`, prebuild the plan into an empty cache, export a
# cache wheel, install it into a fresh venv, run there offline (0 compiles,
# the same numbers), then one changed flag fails with `CacheMiss` (the slow
# marker; six compiles of DeepSpeed's CPU ops, about 20 minutes on a busy 2-core machine; the
# bench-only venvs get scripts/requirements-bench-deepspeed.txt with --no-deps).
ABICACHE_TEST_WHEEL=$(scripts/install-python-package.sh --print-wheel) ABICACHE_BENCH_OUT=$work \
  "$venv/bin/python" -m pytest -m slow -q -s tests/python/test_record_deepspeed.py
# The free-threaded wheel (cp314t): built, checked, and run with the GIL off
# in a 3.14t interpreter where one exists (one more release build of the
# bindings when the sources changed, about a minute).
scripts/free-threaded-check.sh
# The aarch64 wheel on an emulated arm64 machine (issue 52; root only: it
# mounts and chroots): the CPU example built and called under qemu,
# `-mcpu=native` keyed by the emulated CPU, the SVE2 refusal. Several minutes.
if [ "$(id -u)" = 0 ]; then
  scripts/aarch64-check.sh
else
  echo "bench: scripts/aarch64-check.sh skipped: it needs root (debootstrap, mount, chroot)" >&2
fi
# FlashInfer's JIT under `abicache run` (flashinfer-python 0.7.4 with --no-deps in overlay venvs of
# .venv and .venv-compat): silu_and_mul built once (sm_90a, the pip nvcc), audited, then loaded warm
# from torch 2.12's venv with 0 compiles; prints abicache's cold and warm times and FlashInfer's own
# cold and warm times on its own cache (about 3 minutes on 2 cores).
ABICACHE_TEST_WHEEL=$(scripts/install-python-package.sh --print-wheel) ABICACHE_BENCH_OUT=$work \
  "$venv/bin/python" -m pytest -m slow -q -s tests/python/test_flashinfer.py
