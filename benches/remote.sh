#!/usr/bin/env bash
# Remote cache benchmark: how long node B takes to get a ready library from
# the remote (download, verify, audit, publish) versus node A compiling it,
# for the 4-unit CPU extension (benches/ext4) and the CUDA example
# (examples/cuda_axpy), over Redis and S3 (moto) on loopback.
#
#   benches/remote.sh [RUNS]        (default 3 runs per case; prints a table)
#
# Needs: the `abicache` binary (built here with cargo), .venv (torch + nvcc;
# no GPU needed, the CUDA example builds for sm_90), and the servers from
# scripts/setup-services.sh. "whole" is the command's wall-clock time (it
# includes probing the interpreter, ~0.1-0.5 s); "build()" is the façade call
# alone, as reported in the outcome's `seconds`.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
cd "$repo"
. scripts/dev-env.sh
runs=${1:-3}
cargo build -q -p abicache-cli
bin=$CARGO_TARGET_DIR/debug/abicache
python=$repo/.venv/bin/python
work=$(mktemp -d)
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; rm -rf "$work"; }
trap cleanup EXIT

free_port() { "$python" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
wait_port() { for _ in $(seq 600); do (echo > /dev/tcp/127.0.0.1/$1) 2>/dev/null && return; sleep 0.1; done; echo "port $1 never opened" >&2; exit 1; }

redis_port=$(free_port)
redis-server --port "$redis_port" --bind 127.0.0.1 --save '' --appendonly no --dir "$work" >/dev/null &
pids+=($!)
s3_port=$(free_port)
(cd "$work" && exec "$python" -m moto.server -H 127.0.0.1 -p "$s3_port" >/dev/null 2>&1) &
pids+=($!)
wait_port "$redis_port"; wait_port "$s3_port"
"$python" - "$s3_port" <<'PY'
import sys, urllib.request
urllib.request.urlopen(urllib.request.Request(f"http://127.0.0.1:{sys.argv[1]}/bench", method="PUT")).read()
PY

export AWS_ENDPOINT_URL=http://127.0.0.1:$s3_port AWS_ACCESS_KEY_ID=bench AWS_SECRET_ACCESS_KEY=bench AWS_REGION=us-east-1
export ABICACHE_CONFIG=/nonexistent
unset ABICACHE_TRUSTED_KEYS ABICACHE_SIGNING_KEY ABICACHE_REMOTE_MODE || true

# build SPEC REMOTE CACHE -> "wall_seconds build_seconds remote_flag bytes"
build() {
  local start end json
  start=$(date +%s.%N)
  json=$(ABICACHE_DIR=$3 ABICACHE_REMOTE=$2 "$bin" build "$1" --python "$python" --json --quiet)
  end=$(date +%s.%N)
  "$python" -c 'import json,sys; o=json.loads(sys.argv[1]); print("%.3f %.3f %s" % (float(sys.argv[3])-float(sys.argv[2]), o["seconds"], o.get("remote", False)))' "$json" "$start" "$end"
}

printf '%-10s %-6s %-5s %10s %10s %10s %10s %8s\n' extension remote size compile_s c_build_s fetch_s f_build_s ratio
for spec in benches/ext4/abicache.toml examples/cuda_axpy/abicache.toml; do
  name=$(basename "$(dirname "$spec")")
  for backend in redis s3; do
    for run in $(seq "$runs"); do
      case $backend in
        redis) url=redis://127.0.0.1:$redis_port/$run ;;
        s3) url=s3://bench/$name-$run-$RANDOM ;;
      esac
      a=$work/$backend-$name-$run-a; b=$work/$backend-$name-$run-b
      read -r a_wall a_build _ < <(build "$spec" "$url" "$a")
      read -r b_wall b_build b_remote < <(build "$spec" "$url" "$b")
      [ "$b_remote" = True ] || { echo "node B did not download ($backend, $name)" >&2; exit 1; }
      size=$(du -k "$a"/v1/entries/*/*.so | cut -f1 | head -1)
      ratio=$("$python" -c "print(f'{$a_wall/$b_wall:.1f}x')")
      printf '%-10s %-6s %4sK %10s %10s %10s %10s %8s\n' "$name" "$backend" "$size" "$a_wall" "$a_build" "$b_wall" "$b_build" "$ratio"
    done
  done
done
