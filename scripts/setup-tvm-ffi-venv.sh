#!/usr/bin/env bash
# Creates (once per machine) a small venv of a second Python release (3.12)
# holding only apache-tvm-ffi (no torch), for the TVM-FFI cross-Python test
# (tests/python/test_tvm_ffi.py), and prints the path of its python.
#
#   scripts/setup-tvm-ffi-venv.sh     prints e.g. ~/.cache/abicache-dev/venv-tvmffi-<hash>/bin/python
#
# The Python is pyenv's 3.12 when ~/.pyenv/versions has one, else uv's
# (`uv venv --python 3.12` downloads a managed CPython once). The pin is
# scripts/requirements-dev.txt's `apache-tvm-ffi` line, so the venv is
# keyed by it: the venv lives in
# ${ABICACHE_DEV_HOME:-~/.cache/abicache-dev}/venv-tvmffi-<hash> (~30 MB),
# a stamp file written last marks it complete, and creation holds an
# exclusive lock (`venv-tvmffi-<hash>.lock`) as scripts/setup-uv.sh does.
# abicache itself is not installed into it: the test puts this checkout's
# package (abi3) on PYTHONPATH.
set -euo pipefail
. "$(dirname "$0")/dev-env.sh"
repo=$(cd "$(dirname "$0")/.." && pwd)
requirement=$(grep -E '^apache-tvm-ffi==' "$repo/scripts/requirements-dev.txt")
python=$(ls -d "$HOME"/.pyenv/versions/3.12.*/bin/python3.12 2>/dev/null | sort -V | tail -n 1 || true)
[ -n "$python" ] || python=3.12
hash=$(printf '%s\n%s\n' "$requirement" "$python" | sha256sum | cut -c1-16)
dir=$ABICACHE_DEV_HOME/venv-tvmffi-$hash
if [ ! -f "$dir/.abicache-stamp" ]; then
  uv=${ABICACHE_TEST_UV:-$("$repo/scripts/setup-uv.sh")}
  dev_lock venv_lock -x "$dir.lock" setup-tvm-ffi-venv
  if [ ! -f "$dir/.abicache-stamp" ]; then
    echo "setup-tvm-ffi-venv: creating the Python 3.12 + $requirement venv in $dir (once per machine; ~30 MB)" >&2
    rm -rf "$dir"
    "$uv" venv --quiet --python "$python" "$dir" >&2
    "$uv" pip install --quiet --python "$dir/bin/python" "$requirement" >&2
    date -u +%FT%TZ > "$dir/.abicache-stamp.tmp"
    mv -f "$dir/.abicache-stamp.tmp" "$dir/.abicache-stamp"
  fi
  dev_unlock venv_lock
fi
echo "$dir/bin/python"
