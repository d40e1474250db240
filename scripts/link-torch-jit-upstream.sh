#!/usr/bin/env bash
# Links `tests/torch_jit/upstream` (git-ignored) to a copy of PyTorch's
# JIT-extension test files, the first of these that holds
# `test_cpp_extensions_jit.py`:
#   1. $ABICACHE_TORCH_JIT_UPSTREAM, when set;
#   2. `../shared/torch-jit-upstream/` beside the checkout (read-only; every
#      checkout of the project and every CI run has it there);
#   3. this machine's copy, `$ABICACHE_DEV_HOME/torch-jit-upstream/`
#      (default `~/.cache/abicache-dev/torch-jit-upstream/`).
#
# Those files are PyTorch's (BSD-3-Clause). The project's policy is that
# third-party code is not vendored into this repository, so they are used in
# place, never copied in. See tests/torch_jit/README.md for what they are.
#
# A real directory at `tests/torch_jit/upstream` (files copied in by hand) is
# left alone. With none of the above a stale link is removed, so that
# `tests/torch_jit/test_upstream_present.py` reports the skip and what is
# missing. The link is replaced by an atomic rename (safe to run at once).
# Prints one line saying which case applied. Always exits 0.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
cd "$repo"
. scripts/dev-env.sh
link=tests/torch_jit/upstream

candidates=()
[ -n "${ABICACHE_TORCH_JIT_UPSTREAM:-}" ] && candidates+=("$ABICACHE_TORCH_JIT_UPSTREAM")
candidates+=("$(cd "$repo/.." && pwd)/shared/torch-jit-upstream" "$ABICACHE_DEV_HOME/torch-jit-upstream")
copy=
for candidate in "${candidates[@]}"; do
  if [ -f "$candidate/test_cpp_extensions_jit.py" ]; then copy=$candidate; break; fi
done

if [ -e "$link" ] && [ ! -L "$link" ]; then
  echo "torch-jit: using the files in \`$link\` (a directory, not a link)" >&2
elif [ -n "$copy" ]; then
  dev_link "$copy" "$link"
  echo "torch-jit: \`$link\` -> \`$copy\`" >&2
else
  [ -L "$link" ] && rm -f "$link"
  echo "torch-jit: no PyTorch test files in any of: ${candidates[*]}; PyTorch's" \
    "JIT-extension tests will be skipped; see tests/torch_jit/README.md to add them" >&2
fi
