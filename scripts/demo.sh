#!/usr/bin/env bash
# The main job, end to end: builds the CPU example extension through the
# Python package (cold, in a fresh cache), then loads it again from the
# cache in a new process (warm), and prints both times.
#
#   scripts/demo.sh            (cache: target/demo-cache, emptied first; ABICACHE_DEMO_DIR moves it)
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
cd "$repo"
. scripts/dev-env.sh

scripts/setup-venv.sh dev
scripts/install-python-package.sh .venv
cargo build --release --quiet -p abicache-cli

export ABICACHE_DIR=${ABICACHE_DEMO_DIR:-$repo/target/demo-cache}
rm -rf "$ABICACHE_DIR"
echo "== cold: a fresh cache, so the extension is compiled" >&2
.venv/bin/python examples/demo.py "cold build"
echo "== warm: a new process loads it from the cache" >&2
.venv/bin/python examples/demo.py "warm load "
echo "== abicache stats" >&2
"$CARGO_TARGET_DIR/release/abicache" stats
