# Sourced by the project's scripts: shared settings for builds and tests.
#
# Cargo's target directory is kept per machine (not per clone) unless
# CARGO_TARGET_DIR is set, so a fresh clone — CI clones into a new folder
# every run — reuses the compiled dependencies instead of rebuilding them.
export ABICACHE_DEV_HOME=${ABICACHE_DEV_HOME:-${XDG_CACHE_HOME:-$HOME/.cache}/abicache-dev}
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$ABICACHE_DEV_HOME/target}
mkdir -p "$ABICACHE_DEV_HOME"
