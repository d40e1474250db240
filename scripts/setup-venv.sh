#!/usr/bin/env bash
# Creates (once per machine) and links the heavy Python venvs the project needs.
#
#   scripts/setup-venv.sh [dev|compat]...     (default: dev)
#
# Each venv lives in a per-machine directory keyed by the hash of its
# requirements file, ${ABICACHE_DEV_HOME:-~/.cache/abicache-dev}/venv-<name>-<hash>,
# and is symlinked into the repository (.venv, .venv-compat). A fresh clone
# therefore reuses a venv another clone created instead of downloading ~5 GB
# again. A stamp file written last marks a venv as complete; a venv without it
# (an interrupted install) is removed and created anew.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
home=${ABICACHE_DEV_HOME:-${XDG_CACHE_HOME:-$HOME/.cache}/abicache-dev}
python=${PYTHON:-python3}
mkdir -p "$home"

setup_one() {
  local name=$1 reqs link
  case $name in
    dev) reqs=$repo/scripts/requirements-dev.txt; link=$repo/.venv ;;
    compat) reqs=$repo/scripts/requirements-compat.txt; link=$repo/.venv-compat ;;
    *) echo "setup-venv: unknown venv \`$name\` (expected dev or compat)" >&2; exit 2 ;;
  esac
  local hash dir
  hash=$( (cat "$reqs"; "$python" -c 'import sys; print(sys.version)') | sha256sum | cut -c1-16)
  dir=$home/venv-$name-$hash
  if [ ! -f "$dir/.abicache-stamp" ]; then
    echo "setup-venv: creating $name venv in $dir (once per machine; downloads torch)" >&2
    rm -rf "$dir"
    "$python" -m venv "$dir"
    "$dir/bin/python" -m pip install --quiet --upgrade pip
    "$dir/bin/python" -m pip install --quiet -r "$reqs"
    date -u +%FT%TZ > "$dir/.abicache-stamp"
  fi
  ln -sfn "$dir" "$link"
  echo "setup-venv: $name venv ready at $link -> $dir" >&2
}

[ $# -eq 0 ] && set -- dev
for name in "$@"; do setup_one "$name"; done
