#!/usr/bin/env bash
# Builds the `key_time` example of an earlier abicache (default: 91db52b, the
# last commit before issue 12 added the stat cache, the key memo and the
# absent lookups: "today" in that issue's "a cold key no slower than today")
# and prints the binary's path. Built once per machine and commit, from a
# copy of that commit's tree (`git archive`) with its own target dir under
# ~/.cache/abicache-dev (~12 minutes on 2 cores the first time: a release
# build of the whole crate graph).
#
#   benches/build_reference_key_time.sh [COMMIT]
#
# Needs the repository's history (a shallow clone lacks the commit: then it
# says so and exits 3, and bench.sh skips the comparison).
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
commit=${1:-91db52b}
if ! full=$(git -C "$repo" rev-parse --verify --quiet "$commit^{commit}"); then
  echo "build_reference_key_time: commit $commit is not in this clone's history (shallow clone?): fetch it or pass another" >&2
  exit 3
fi
. "$repo/scripts/dev-env.sh"
home=$ABICACHE_DEV_HOME/reference-${full:0:12}
bin=$home/target/release/examples/key_time
if [ ! -x "$bin" ]; then
  # Per-machine state: built under its lock (scripts/dev-env.sh), re-checked once held.
  dev_lock reference_lock -x "$home.lock" build_reference_key_time
fi
if [ ! -x "$bin" ]; then
  mkdir -p "$home"
  if [ ! -f "$home/src/Cargo.toml" ]; then
    # The commit's files only: this clone's checkout and its git state are
    # left as they are.
    rm -rf "$home/src.tmp" && mkdir -p "$home/src.tmp"
    git -C "$repo" archive "$full" | tar -x -C "$home/src.tmp"
    rm -rf "$home/src" && mv "$home/src.tmp" "$home/src"
  fi
  echo "build_reference_key_time: building key_time at ${full:0:12} (release, once per machine)" >&2
  (cd "$home/src" && CARGO_TARGET_DIR=$home/target cargo build --release --quiet -p abicache --example key_time)
fi
echo "$bin"
