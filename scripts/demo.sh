#!/usr/bin/env bash
# The main job, end to end: builds the CPU example extension through the
# Python package (cold, in a fresh cache), then loads it again from the
# cache in new processes (warm: the first warm load, then the steady state
# once the warm-load record exists), and prints the times.
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
echo "== warm: new processes load it from the cache" >&2
.venv/bin/python examples/demo.py "first warm load       "
echo "   (the first warm load after a build can be slower: it takes the native path, and the warm-load" \
  "record later loads use is written only once the library's stamps are older than the 2 s racy window)" >&2
sleep 2.5
.venv/bin/python examples/demo.py "warm load, 2.5 s later"
echo "== steady state: later processes are answered from the warm-load record" >&2
.venv/bin/python examples/demo.py "steady-state warm load"
echo "== abicache stats" >&2
"$CARGO_TARGET_DIR/release/abicache" stats
