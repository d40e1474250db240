#!/usr/bin/env bash
# Builds the free-threaded CPython wheels of this source state beside the
# abi3 one, and prints their paths (one a line):
#
#   scripts/build-free-threaded-wheels.sh
#
# The abi3 wheel cannot serve a free-threaded interpreter (the limited API
# does not exist there, and pip refuses abi3 on it), so each free-threaded
# Python gets a version-specific wheel, `cp314-cp314t`: the same sources and
# the same build as scripts/install-python-package.sh's release wheel
# (`maturin build --release --zig --compatibility manylinux_2_28`, stripped),
# with `--interpreter python3.14t`. No such interpreter is needed here:
# maturin takes the target's sysconfig from its bundled table when none is on
# PATH. There is no `cp313t` wheel: PyO3 0.30 builds for free-threaded
# CPython 3.14 and later only (`MIN_FREE_THREADED_VERSION` in pyo3-ffi's
# build script), and 3.13t was experimental.
#
# Each version's wheel goes into its own directory of this source state,
# $CARGO_TARGET_DIR/wheels/abicache/<hash>-cp314t/, built under that
# directory's lock and renamed into place, as install-python-package.sh does
# (which also removes such directories once unused for two days).
# scripts/check-wheel.sh WHEEL checks each one. The build reuses the target
# directory: pyo3 and abicache-py are compiled again for each interpreter.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
cd "$repo"
. scripts/dev-env.sh

# The free-threaded Pythons with a wheel.
versions=(${ABICACHE_FREE_THREADED_VERSIONS:-3.14t})

# The abi3 wheel first: it installs zig and auditwheel into the tools venv.
scripts/install-python-package.sh --print-wheel >/dev/null
maturin=${MATURIN:-$repo/.venv/bin/maturin}
[ -x "$maturin" ] || maturin=$(command -v maturin) || {
  echo "build-free-threaded-wheels: \`maturin\` not found; run \`scripts/setup-venv.sh dev\` or set MATURIN" >&2
  exit 2
}

wheels=$CARGO_TARGET_DIR/wheels/abicache
hash=$(dev_source_hash)
for version in "${versions[@]}"; do
  case $version in
    3.[0-9]*t) tag=cp${version//./} ;;
    *) echo "build-free-threaded-wheels: \`$version\` in ABICACHE_FREE_THREADED_VERSIONS is not a free-threaded version such as 3.14t" >&2; exit 2 ;;
  esac
  dir=$wheels/$hash-$tag
  dev_lock wheel_lock -x "$dir.lock" build-free-threaded-wheels
  if ! compgen -G "$dir/abicache-*.whl" >/dev/null; then
    echo "build-free-threaded-wheels: building the $tag wheel (source state $hash)" >&2
    tmp=$(mktemp -d "$wheels/.build-$hash-$tag.XXXXXX")
    if ! PATH=$(dirname "$maturin"):$PATH "$maturin" build --release --quiet --zig \
        --compatibility manylinux_2_28 -o "$tmp" --interpreter "python$version" >&2; then
      rm -rf "$tmp"
      exit 1
    fi
    rm -rf "$dir"
    mv -T "$tmp" "$dir"
  fi
  touch "$dir"
  dev_unlock wheel_lock
  ls "$dir"/abicache-*.whl | head -n1
done
