#!/usr/bin/env bash
# Cold build of the 4-unit extension (benches/ext4) locally and through
# distcc to a distccd on loopback with more jobs than cores: a correctness
# run for ABICACHE_COMPILER_LAUNCHER=distcc (every unit must reach distccd,
# DISTCC_FALLBACK=0; the objects must be byte-identical to the local ones),
# with both times printed. On one machine the farm is this machine, so the
# ratio says what distcc costs here, not what a farm gains.
#
#   benches/distcc.sh [PYTHON]     (default: .venv/bin/python)
# Needs Debian's distcc (scripts/setup-services.sh) and a built `abicache`
# (cargo build -p abicache-cli; $CARGO_TARGET_DIR/debug/abicache).
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
. "$repo/scripts/dev-env.sh"
python=${1:-$repo/.venv/bin/python}
abicache=${ABICACHE_BIN:-$CARGO_TARGET_DIR/debug/abicache}
work=$(mktemp -d)
distccd_pid=
cleanup() { [ -n "$distccd_pid" ] && kill "$distccd_pid" 2>/dev/null; rm -rf "$work"; }
trap cleanup EXIT
cp -r "$repo/benches/ext4" "$work/ext4"
cp "$repo/examples/cpu_muladd/kernel.cpp" "$work/ext4/muladd.cpp"
cp "$repo/examples/cpu_muladd/muladd.h" "$work/ext4/muladd.h"
port=$("$python" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
distccd --daemon --no-detach --listen 127.0.0.1 --port "$port" --allow 127.0.0.1 \
  --log-stderr --log-level info --enable-tcp-insecure --jobs 8 2>"$work/distccd.log" &
distccd_pid=$!
mkdir -p "$work/distcc-dir"
sleep 1
export ABICACHE_PCH=0
t0=$(date +%s.%N)
ABICACHE_DIR=$work/local "$abicache" build "$work/ext4/abicache.toml" --python "$python" --quiet --json >"$work/local.json"
t1=$(date +%s.%N)
ABICACHE_DIR=$work/distcc ABICACHE_COMPILER_LAUNCHER=distcc ABICACHE_JOBS=8 \
  DISTCC_HOSTS="127.0.0.1:$port/8" DISTCC_FALLBACK=0 DISTCC_DIR=$work/distcc-dir \
  "$abicache" build "$work/ext4/abicache.toml" --python "$python" --quiet --json >"$work/distcc.json"
t2=$(date +%s.%N)
remote_units=$(grep -c COMPILE_OK "$work/distccd.log" || true)
same=$(cd "$work" && diff -r local/v1/objects distcc/v1/objects --exclude='*.json' >/dev/null 2>&1 && echo yes || echo no)
"$python" - "$t0" "$t1" "$t2" "$remote_units" "$same" "$(nproc)" "$work" <<'PY'
import json, os, sys
t0, t1, t2 = map(float, sys.argv[1:4])
units, same, cores, work = sys.argv[4], sys.argv[5], sys.argv[6], sys.argv[7]
local = json.load(open(os.path.join(work, "local.json")))
dist = json.load(open(os.path.join(work, "distcc.json")))
assert local["key"] == dist["key"], "keys differ"
assert units == "4", f"distccd compiled {units} units, not 4"
print(f"ext4 cold build, {cores} cores, load {os.getloadavg()[0]:.1f}: "
      f"local (MAX_JOBS=cores) {t1 - t0:.1f} s, distcc loopback (ABICACHE_JOBS=8) {t2 - t1:.1f} s, "
      f"ratio {(t2 - t1) / (t1 - t0):.2f}; units on distccd {units}/4; objects identical: {same}")
PY
