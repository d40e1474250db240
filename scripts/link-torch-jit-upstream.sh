#!/usr/bin/env bash
# Links `tests/torch_jit/upstream` (git-ignored) to this machine's copy of
# PyTorch's JIT-extension test files, `$ABICACHE_DEV_HOME/torch-jit-upstream/`
# (default `~/.cache/abicache-dev/torch-jit-upstream/`), when that copy exists.
#
# Those files are PyTorch's (BSD-3-Clause) and code taken from public
# repositories is never committed here (the workplace's rule), nor can CI
# download them (it reaches package registries only): they are kept per
# machine, like the venvs. See tests/torch_jit/README.md for what goes there.
#
# A real directory at `tests/torch_jit/upstream` (files copied in by hand) is
# left alone. Without the per-machine copy a stale link is removed, so that
# `tests/torch_jit/test_upstream_present.py` reports the skip and what is
# missing. Prints one line saying which case applied. Always exits 0.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
cd "$repo"
. scripts/dev-env.sh
copy=$ABICACHE_DEV_HOME/torch-jit-upstream
link=tests/torch_jit/upstream

if [ -e "$link" ] && [ ! -L "$link" ]; then
  echo "torch-jit: using the files in \`$link\` (a directory, not a link)" >&2
elif [ -f "$copy/test_cpp_extensions_jit.py" ]; then
  ln -sfn "$copy" "$link"
  echo "torch-jit: \`$link\` -> \`$copy\`" >&2
else
  [ -L "$link" ] && rm -f "$link"
  echo "torch-jit: no PyTorch test files in \`$copy\` (this machine's copy): PyTorch's" \
    "JIT-extension tests will be skipped; see tests/torch_jit/README.md to add them" >&2
fi
