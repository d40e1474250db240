#!/usr/bin/env bash
# Creates (once per machine) and links the Python venvs the project needs.
#
#   scripts/setup-venv.sh [dev|compat|docs|build]...     (default: dev)
#
#   dev     .venv: torch 2.15, the pip nvcc, maturin, pytest (~5 GB)
#   compat  .venv-compat: torch 2.12, for the cross-version tests (~5 GB)
#   docs    .venv-docs: mkdocs and mkdocs-material, for the documentation
#           site (~160 MB; a venv of its own so that pinning them never
#           re-creates a torch venv)
#   build   .venv-build: maturin, zig and auditwheel alone (~450 MB), so that
#           scripts/demo.sh builds the wheel while .venv is being made
#
# Each venv lives in a per-machine directory keyed by the hash of its
# requirements file (with the files it includes by `-r`) and of the Python
# that makes it, ${ABICACHE_DEV_HOME:-~/.cache/abicache-dev}/venv-<name>-<hash>,
# and is symlinked into the repository (.venv, .venv-compat, .venv-docs,
# .venv-build). A fresh clone therefore reuses a venv another clone created
# instead of downloading ~5 GB again. A stamp file written last marks a venv
# as complete. Creation holds
# an exclusive lock (`venv-<name>-<hash>.lock` beside it), so runs started at
# once create it once and the others wait for it; a venv without its stamp
# (left by a killed run, whose lock died with it) is removed and created anew
# by the lock's holder only. Safe to run concurrently, and after a kill.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
. "$repo/scripts/dev-env.sh"
python=${PYTHON:-python3}

setup_one() {
  local name=$1 reqs link what
  case $name in
    dev) reqs=$repo/scripts/requirements-dev.txt; link=$repo/.venv; what="downloads torch" ;;
    compat) reqs=$repo/scripts/requirements-compat.txt; link=$repo/.venv-compat; what="downloads torch" ;;
    docs) reqs=$repo/scripts/requirements-docs.txt; link=$repo/.venv-docs; what="mkdocs, ~160 MB" ;;
    build) reqs=$repo/scripts/requirements-build.txt; link=$repo/.venv-build; what="maturin and zig, ~450 MB" ;;
    *) echo "setup-venv: unknown venv \`$name\` (expected dev, compat, docs or build)" >&2; exit 2 ;;
  esac
  local hash dir
  hash=$( (cat "$reqs"
    sed -n 's/^-r *//p' "$reqs" | while read -r included; do cat "$(dirname "$reqs")/$included"; done
    "$python" -c 'import sys; print(sys.version)') | sha256sum | cut -c1-16)
  dir=$ABICACHE_DEV_HOME/venv-$name-$hash
  if [ ! -f "$dir/.abicache-stamp" ]; then
    dev_lock venv_lock -x "$dir.lock" setup-venv
    if [ ! -f "$dir/.abicache-stamp" ]; then
      echo "setup-venv: creating $name venv in $dir (once per machine; $what)" >&2
      rm -rf "$dir"
      "$python" -m venv "$dir"
      "$dir/bin/python" -m pip install --quiet --upgrade pip
      "$dir/bin/python" -m pip install --quiet -r "$reqs"
      date -u +%FT%TZ > "$dir/.abicache-stamp.tmp"
      mv -f "$dir/.abicache-stamp.tmp" "$dir/.abicache-stamp"
    fi
    dev_unlock venv_lock
  fi
  dev_link "$dir" "$link"
  echo "setup-venv: $name venv ready at $link -> $dir" >&2
}

[ $# -eq 0 ] && set -- dev
for name in "$@"; do setup_one "$name"; done
