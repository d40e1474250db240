#!/usr/bin/env bash
# Runs every test of the project, as CI does (`.ci/run` calls exactly this).
#
# 0. the tree's hygiene, cheapest first: `cargo fmt --check` (an unformatted
#    file fails CI), clippy with warnings as errors, `cargo doc` with warnings
#    as errors;
# 1. the Python venvs (.venv with torch 2.15 + nvcc wheels, .venv-compat with
#    torch 2.12), created once per machine and reused, and the servers the
#    remote-cache tests start (redis-server, moto);
# 2. the Python package: the release wheel (stripped, manylinux_2_28, built
#    with zig) built when its sources changed and installed into both venvs;
#    its tag, size and commands checked in a fresh venv; its `_native.pyi`
#    stub checked against the module (mypy's stubtest);
# 3. the Rust tests (cargo nextest), which run the real compiler against the
#    venv's torch;
# 4. the Python tests (pytest), which load the built extensions into torch;
# 5. PyTorch's own JIT-extension tests with abicache's load/load_inline.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
cd "$repo"
. scripts/dev-env.sh
# No background precompiled-header builds from the tests' throw-away caches (a
# `torch/extension.h` PCH is ~40 s of CPU and ~800 MB each); the PCH tests
# drive the build crate directly, and the torch-sized case is in bench.sh.
export ABICACHE_PCH=${ABICACHE_PCH:-0}
# The target directory is shared by every checkout on the machine, and cargo
# reuses a test binary built in another checkout when this one's sources are
# older; insta would then look for snapshots in that other checkout (the path
# baked in at compile time). Point it at this checkout.
export INSTA_WORKSPACE_ROOT=$repo

echo "== cargo fmt --check, clippy, doc" >&2
cargo fmt --all --check
cargo clippy --workspace --all-targets --quiet -- -D warnings
RUSTDOCFLAGS="-D warnings" cargo doc --workspace --no-deps --quiet

scripts/setup-venv.sh dev compat
scripts/setup-services.sh
scripts/install-python-package.sh
scripts/check-wheel.sh
echo "== .pyi stub check (mypy.stubtest abicache._native)" >&2
.venv/bin/python -m mypy.stubtest abicache._native

echo "== Rust tests" >&2
if cargo nextest --version >/dev/null 2>&1; then
  cargo nextest run --workspace --no-fail-fast
else
  echo "cargo-nextest not found; running cargo test instead" >&2
  cargo test --workspace --no-fail-fast
fi

# PyTorch's own test/test_cpp_extensions_jit.py, unmodified, with abicache's
# load/load_inline swapped in (tests/torch_jit/README.md). PyTorch's files are
# kept per machine, never in git: tests/torch_jit/upstream is linked to
# $ABICACHE_DEV_HOME/torch-jit-upstream/ when that exists, else the step
# reports a skip saying what is missing. Cache: cold (~47 min here under the
# usual load of 15-25, ~17 compiles) whenever the abicache package changed,
# warm (~1.5 min) otherwise: ABICACHE_DIR is a per-machine directory named by
# the source hash of the wheel just installed (install-python-package.sh's
# stamp: crates/, python/, Cargo.*), so a change to abicache's code always gets
# a cold run and a cache is reused only by the identical code, whose builds it
# already checked; the keys cover the torch venv, compiler and sources.
# ABICACHE_TORCH_JIT_COLD=1 forces a cold run; caches unused for a day go.
# Its imports need expecttest and numpy, installed once into .venv (a stamp
# keyed by the file). They run before the project's own Python tests, so the
# run closes on the suite that always executes tests (the JIT step may only
# skip).
if [ -d tests/torch_jit ]; then
  echo "== PyTorch's JIT-extension tests (abicache's load/load_inline)" >&2
  scripts/link-torch-jit-upstream.sh
  reqs=tests/torch_jit/requirements.txt
  stamp=.venv/.abicache-torch-jit-$(sha256sum "$reqs" | cut -c1-16)
  if [ ! -f "$stamp" ]; then
    .venv/bin/python -m pip install --quiet -r "$reqs"
    touch "$stamp"
  fi
  jit_caches=$ABICACHE_DEV_HOME/torch-jit-cache
  mkdir -p "$jit_caches"
  find "$jit_caches" -mindepth 1 -maxdepth 1 -type d -mtime +0 -exec rm -rf {} +
  jit_cache=$jit_caches/$(cat "$CARGO_TARGET_DIR/wheels/abicache/.stamp")
  if [ "${ABICACHE_TORCH_JIT_COLD:-0}" = 1 ]; then rm -rf "$jit_cache"; fi
  mkdir -p "$jit_cache" && touch "$jit_cache"
  ABICACHE_DIR=$jit_cache .venv/bin/python -m pytest tests/torch_jit -q -rs
fi

if [ -d tests/python ]; then
  echo "== Python tests" >&2
  .venv/bin/python -m pytest tests/python -q
fi
