#!/usr/bin/env bash
# The main job, end to end: builds the CPU example extension (cold, in a
# fresh cache), then loads it again from the cache in a new process, and
# prints both times.
#
#   scripts/demo.sh            (cache: target/demo-cache, emptied first)
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
cd "$repo"
. scripts/dev-env.sh

scripts/setup-venv.sh dev
cargo build --release --quiet -p abicache-cli
abicache=$CARGO_TARGET_DIR/release/abicache
export ABICACHE_DIR=${ABICACHE_DEMO_DIR:-$repo/target/demo-cache}
rm -rf "$ABICACHE_DIR"
spec=examples/cpu_muladd/abicache.toml
python=.venv/bin/python

load_and_run() {
  "$python" - "$1" <<'PY'
import sys, warnings
warnings.filterwarnings("ignore")
import torch
torch.ops.load_library(sys.argv[1])
a = torch.arange(4.0)
print("  muladd(a, a, 1.0) =", torch.ops.muladd_example.muladd(a, a, 1.0).tolist())
PY
}

echo "== cold: build $spec" >&2
cold=$("$abicache" build "$spec" --python "$python" --json)
path=$("$python" -c 'import json,sys; print(json.load(sys.stdin)["path"])' <<<"$cold")
load_and_run "$path"

echo "== warm: a new process asks for the same extension" >&2
warm=$("$abicache" build "$spec" --python "$python" --json)
load_and_run "$(
  "$python" -c 'import json,sys; print(json.load(sys.stdin)["path"])' <<<"$warm")"

"$python" - "$cold" "$warm" <<'PY'
import json, sys
cold, warm = (json.loads(s) for s in sys.argv[1:])
print(f"cold build: {cold['seconds']:.2f} s (compiled {len(cold['compiled'])} units, hit={cold['hit']})")
print(f"warm load:  {warm['seconds'] * 1000:.1f} ms (hit={warm['hit']})")
PY
"$abicache" stats
