# Sourced by the project's scripts: shared settings for builds and tests, and
# the helpers every script that writes per-machine state uses.
#
# Cargo's target directory is kept per machine (not per clone) unless
# CARGO_TARGET_DIR is set, so a fresh clone — CI clones into a new folder
# every run — reuses the compiled dependencies instead of rebuilding them.
export ABICACHE_DEV_HOME=${ABICACHE_DEV_HOME:-${XDG_CACHE_HOME:-$HOME/.cache}/abicache-dev}
if [ -n "${CARGO_TARGET_DIR:-}" ]; then
  dev_target_from="CARGO_TARGET_DIR, set by the caller"
else
  export CARGO_TARGET_DIR=$ABICACHE_DEV_HOME/target
  dev_target_from="the per-machine default, \$ABICACHE_DEV_HOME/target; set CARGO_TARGET_DIR to use another"
fi
mkdir -p "$ABICACHE_DEV_HOME"
# Said once per top-level run, on stderr: the scripts call each other, and
# the first to source this file exports ABICACHE_DEV_TARGET_SHOWN for the
# rest. (Not in an interactive shell that sources it: the variable would
# then silence every script started from that shell.)
if [ -z "${ABICACHE_DEV_TARGET_SHOWN:-}" ] && [[ $- != *i* ]]; then
  echo "$(basename "$0" .sh): Cargo's target directory is $CARGO_TARGET_DIR ($dev_target_from)" >&2
  export ABICACHE_DEV_TARGET_SHOWN=1
fi
unset dev_target_from

# Per-machine state (the venvs, the uv tools venv, the wheels, the packages
# installed into the shared venvs, the torch-jit caches) is shared by every
# checkout and every process on the machine. The rule for it:
#   - create-then-stamp runs under an exclusive `flock` on a lock file beside
#     what it creates, and re-checks the stamp once it holds the lock;
#   - a directory is deleted only by the holder of its lock (a half-made one
#     left by a killed run: the kernel released that run's lock with it);
#   - a link in the checkout is replaced by an atomic rename, never rm + ln.
# Locks die with their holder, so a killed set-up never blocks the next one.

# dev_lock VAR MODE FILE WHO: opens FILE (creating it and its directory) on a
# new descriptor stored in VAR and takes a `flock` on it, MODE `-x`
# (exclusive) or `-s` (shared). Says so when it has to wait, and gives up
# after $ABICACHE_DEV_LOCK_TIMEOUT seconds (default 3600). The lock is held
# until `dev_unlock VAR` or the end of the process (children inherit it).
dev_lock() {
  local var=$1 mode=$2 file=$3 who=$4 fd
  mkdir -p "$(dirname "$file")"
  exec {fd}>>"$file"
  printf -v "$var" '%s' "$fd"
  if ! flock -n "$mode" "$fd"; then
    echo "$who: waiting for the lock \`$file\` (another process is setting up or using the same thing)" >&2
    if ! flock -w "${ABICACHE_DEV_LOCK_TIMEOUT:-3600}" "$mode" "$fd"; then
      echo "$who: timed out after ${ABICACHE_DEV_LOCK_TIMEOUT:-3600} s waiting for \`$file\`;" \
        "find the process holding it (\`fuser $file\`) or raise ABICACHE_DEV_LOCK_TIMEOUT" >&2
      exit 1
    fi
  fi
}

# dev_unlock VAR: closes the descriptor dev_lock stored in VAR, releasing its lock.
dev_unlock() {
  local fd=${!1}
  exec {fd}>&-
}

# dev_link TARGET LINK: makes LINK a symlink to TARGET by an atomic rename, so
# two processes making the same link never see it missing or fail on it.
dev_link() {
  local target=$1 link=$2 tmp
  tmp=$link.tmp.$$.$RANDOM
  ln -s "$target" "$tmp"
  mv -T "$tmp" "$link"
}

# dev_venv_python VENV: VENV's python named through the venv's real
# directory (every link resolved): for a checkout's `.venv` link,
# $ABICACHE_DEV_HOME/venv-dev-<hash>/bin/python. Every `pip install` into a
# shared venv runs through it: pip writes each console script's `#!` line
# with the path the interpreter was started by, and a path through one
# checkout's link breaks that script in every other checkout once the first
# is removed (CI clones into a new folder each run).
dev_venv_python() {
  printf '%s/bin/python\n' "$(cd "$1" && pwd -P)"
}

# dev_source_hash: the hash (16 hex digits) of every file the abicache
# package is built from, run from the repository root. Names the wheel
# directory (install-python-package.sh, check-wheel.sh) and the torch-jit
# cache (test.sh).
dev_source_hash() {
  { git ls-files -co --exclude-standard -z -- crates python pyproject.toml Cargo.toml Cargo.lock \
      scripts/install-python-package.sh 2>/dev/null \
    || find crates python pyproject.toml Cargo.toml Cargo.lock scripts/install-python-package.sh \
      -type f -not -path '*/__pycache__/*' -print0; } \
    | sort -z | xargs -0 sha256sum | sha256sum | cut -c1-16
}
