#!/usr/bin/env bash
# Creates (once per machine) a small tools venv holding `uv`, which
# `abicache prebuild --matrix` drives to create missing environments, and
# prints the path of its `uv` binary.
#
#   scripts/setup-uv.sh              prints e.g. ~/.cache/abicache-dev/tools-uv-<hash>/bin/uv
#   scripts/setup-uv.sh --cache-dir  prints the per-machine uv cache the tests use,
#                                    ${ABICACHE_DEV_HOME:-~/.cache/abicache-dev}/uv-cache
#                                    (torch wheels: ~1 GB per Python release, downloaded once)
#
# The venv lives in ${ABICACHE_DEV_HOME:-~/.cache/abicache-dev}/tools-uv-<hash>
# (keyed by the pinned release below), apart from the 5 GB project venvs so
# that pinning uv never re-creates them. A stamp file written last marks it
# complete. Creation holds an exclusive lock (`tools-uv-<hash>.lock`), so
# runs started at once create it once; a venv without its stamp (an
# interrupted install) is created anew by the lock's holder only.
# `scripts/test.sh` runs this once before the tests and hands the result to
# them (ABICACHE_TEST_UV, ABICACHE_TEST_UV_CACHE).
set -euo pipefail
. "$(dirname "$0")/dev-env.sh"
if [ "${1:-}" = --cache-dir ]; then
  echo "$ABICACHE_DEV_HOME/uv-cache"
  exit 0
fi
requirement='uv==0.13.*'
python=${PYTHON:-python3}
hash=$(echo "$requirement" | sha256sum | cut -c1-16)
dir=$ABICACHE_DEV_HOME/tools-uv-$hash
if [ ! -f "$dir/.abicache-stamp" ]; then
  dev_lock uv_lock -x "$dir.lock" setup-uv
  if [ ! -f "$dir/.abicache-stamp" ]; then
    echo "setup-uv: creating the uv tools venv in $dir (once per machine; ~20 MB)" >&2
    rm -rf "$dir"
    "$python" -m venv "$dir"
    "$dir/bin/python" -m pip install --quiet "$requirement"
    date -u +%FT%TZ > "$dir/.abicache-stamp.tmp"
    mv -f "$dir/.abicache-stamp.tmp" "$dir/.abicache-stamp"
  fi
  dev_unlock uv_lock
fi
echo "$dir/bin/uv"
