#!/usr/bin/env bash
# The fresh-machine check: what a new contributor (or a fresh CI machine) gets.
#
#   scripts/fresh-machine-check.sh [--no-race | --race-only] [--keep] [COMMIT]   (default COMMIT: HEAD)
#
# 1. clones COMMIT into a new temporary directory, with `../shared` beside it
#    linked to this checkout's (PyTorch's test files live there), and points
#    ABICACHE_DEV_HOME at an empty directory inside it, so nothing per-machine
#    is reused: venvs, uv, wheels and Cargo's target directory are all made
#    anew (downloads still come from pip's and Cargo's caches as usual);
# 2. runs the README's two commands there, `scripts/demo.sh` then
#    `scripts/test.sh` (as CI runs it: CI=true, no standard input), timed,
#    then checks that no console script in the per-machine venvs names the
#    clone's path (it would break in every other checkout once the clone is gone);
# 3. unless --no-race: runs every set-up script twice at once on a second
#    empty ABICACHE_DEV_HOME (Cargo's target directory of step 2 kept, its
#    wheels removed) (setup-venv.sh dev compat docs, setup-uv.sh,
#    setup-services.sh, install-python-package.sh, link-torch-jit-upstream.sh),
#    checks both runs of each exit 0, and that what they left works (the venvs
#    import torch and the abicache just built, uv runs, mkdocs runs, the link
#    resolves).
#    --race-only runs this step alone (after a full check failed only there):
#    its Cargo target directory is then seeded with a copy of this machine's
#    compiled release dependencies, so only abicache's own crates compile.
#
# Prints a summary with the times and the test counts, and exits non-zero if
# any step failed. Logs go to target/fresh-machine-check/<time>/ in this
# checkout. The temporary directory (~15 GB at its peak) is removed at the
# end unless --keep. Uncommitted changes are not in the clone: commit first.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
race=1
race_only=0
keep=0
commit=HEAD
for arg in "$@"; do
  case $arg in
    --no-race) race=0 ;;
    --race-only) race_only=1 ;;
    --keep) keep=1 ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; exit 0 ;;
    -*) echo "fresh-machine-check: unknown option \`$arg\` (see --help)" >&2; exit 2 ;;
    *) commit=$arg ;;
  esac
done
sha=$(git -C "$repo" rev-parse --verify "$commit^{commit}")
if [ -n "$(git -C "$repo" status --porcelain --untracked-files=no)" ]; then
  echo "fresh-machine-check: this checkout has uncommitted changes; they are not checked (the clone is of ${sha:0:12})" >&2
fi

logs=$repo/target/fresh-machine-check/$(date -u +%Y%m%dT%H%M%SZ)
mkdir -p "$logs"
tmp=$(mktemp -d "${TMPDIR:-/tmp}/abicache-fresh.XXXXXX")
cleanup() {
  if [ "$keep" = 1 ]; then echo "fresh-machine-check: kept \`$tmp\`" >&2; else rm -rf "$tmp"; fi
}
trap cleanup EXIT

clone=$tmp/main
git clone --quiet --no-hardlinks "$repo" "$clone"
git -C "$clone" checkout --quiet --detach "$sha"
shared=$(cd "$repo/.." && pwd)/shared
[ -d "$shared" ] && ln -s "$shared" "$tmp/shared"

# This machine's Cargo target directory (--race-only seeds from it), then
# nothing per-machine from this checkout's environment.
machine_target=${CARGO_TARGET_DIR:-${ABICACHE_DEV_HOME:-${XDG_CACHE_HOME:-$HOME/.cache}/abicache-dev}/target}
unset CARGO_TARGET_DIR VIRTUAL_ENV ABICACHE_DIR ABICACHE_TEST_UV ABICACHE_TEST_UV_CACHE
export ABICACHE_DEV_HOME=$tmp/dev-home
mkdir -p "$ABICACHE_DEV_HOME"

status=0
results=()
# step NAME LOG CMD...: runs CMD in the clone, timed, its output in LOG.
step() {
  local name=$1 log=$2 start rc
  shift 2
  echo "fresh-machine-check: $name (log: $log)" >&2
  start=$(date +%s)
  set +e
  (cd "$clone" && CI=true "$@" </dev/null >"$log" 2>&1)
  rc=$?
  set -e
  results+=("$(printf '%-28s exit %-3s %6s s' "$name" "$rc" "$(( $(date +%s) - start ))")")
  [ "$rc" -eq 0 ] || status=1
  return 0
}

if [ "$race_only" = 1 ]; then
  [ "$race" = 1 ] || { echo "fresh-machine-check: --race-only and --no-race leave nothing to do" >&2; exit 2; }
  mkdir -p "$tmp/dev-home/target"
  for dir in release x86_64-unknown-linux-gnu; do
    [ -d "$machine_target/$dir" ] && cp -a "$machine_target/$dir" "$tmp/dev-home/target/"
  done
else
  step "scripts/demo.sh" "$logs/demo.log" scripts/demo.sh
  step "scripts/test.sh" "$logs/test.log" scripts/test.sh
  # The per-machine venvs outlive this clone: a console script in them that
  # names the clone's `.venv` link breaks in every later checkout.
  venv_scripts_name_no_clone() {
    local bad
    # (A `#!` line, or the `exec "..."` line of pip's `/bin/sh` launcher.)
    bad=$(grep -l -s -e "^#!$clone/" -e "exec' \"$clone/" "$ABICACHE_DEV_HOME"/*/bin/* || true)
    if [ -n "$bad" ]; then
      echo "console scripts in the per-machine venvs that name this clone (they break once it is removed):"
      echo "$bad"
      return 1
    fi
    echo "no console script under $ABICACHE_DEV_HOME/*/bin names $clone"
  }
  step "venv scripts name no clone" "$logs/venv-scripts.log" venv_scripts_name_no_clone
fi

if [ "$race" = 1 ]; then
  # Every set-up script twice at once, on a second empty per-machine directory.
  # Cargo's compiled dependencies are kept from the first run (a release
  # build of the crate graph takes minutes); its wheels are not, so the two
  # install-python-package.sh runs race on building the wheel too.
  export CARGO_TARGET_DIR=$tmp/dev-home/target
  rm -rf "$CARGO_TARGET_DIR/wheels"
  export ABICACHE_DEV_HOME=$tmp/dev-home-race
  mkdir -p "$ABICACHE_DEV_HOME"
  race_two() {
    local name=$1 rc=0 a b
    shift
    (cd "$clone" && "$@" </dev/null >"$logs/race-$name.1.log" 2>&1) & a=$!
    (cd "$clone" && "$@" </dev/null >"$logs/race-$name.2.log" 2>&1) & b=$!
    wait "$a" || rc=1
    wait "$b" || rc=1
    return $rc
  }
  race_all() {
    set -e
    race_two setup-venv scripts/setup-venv.sh dev compat docs
    race_two setup-uv scripts/setup-uv.sh
    race_two setup-services scripts/setup-services.sh
    race_two install-python-package scripts/install-python-package.sh
    race_two link-torch-jit scripts/link-torch-jit-upstream.sh
    # One working result of each.
    cd "$clone"
    .venv/bin/python -c 'import torch, abicache; print(torch.__version__, abicache.__file__)'
    .venv-compat/bin/python -c 'import torch, abicache; print(torch.__version__, abicache.__file__)'
    [ "$(cat .venv/.abicache-wheel-stamp)" = "$(. scripts/dev-env.sh && dev_source_hash)" ]
    "$(scripts/setup-uv.sh)" --version
    .venv-docs/bin/mkdocs --version
    [ "$(ls -d "$ABICACHE_DEV_HOME"/venv-dev-*/ | wc -l)" = 1 ]
    [ "$(ls -d "$ABICACHE_DEV_HOME"/venv-compat-*/ | wc -l)" = 1 ]
    [ "$(ls -d "$ABICACHE_DEV_HOME"/venv-docs-*/ | wc -l)" = 1 ]
    [ -f tests/torch_jit/upstream/test_cpp_extensions_jit.py ]
  }
  step "set-up scripts, twice at once" "$logs/race.log" race_all
fi

summary=$logs/summary.txt
{
  echo "fresh-machine check of ${sha:0:12} ($(date -u +%FT%TZ)), ABICACHE_DEV_HOME empty at the start"
  printf '  %s\n' "${results[@]}"
  echo "  test counts (scripts/test.sh):"
  grep -E '^ *Summary \[|tests run:|^=+ .*(passed|failed|skipped|error).* =+$|torch-jit:|^all tests:' \
    "$logs/test.log" 2>/dev/null | sed 's/^/    /' || true
  echo "  demo:"
  grep -E '^(cold build|first warm load|warm load, )|^demo: phases' "$logs/demo.log" 2>/dev/null | sed 's/^/    /' || true
  [ "$status" = 0 ] && echo "  result: PASSED" || echo "  result: FAILED (logs in $logs)"
} | tee "$summary"
exit "$status"
