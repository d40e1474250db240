#!/usr/bin/env bash
# Builds the `abicache` wheel once per source state and installs it into the
# project venvs (.venv, and .venv-compat when it exists).
#
#   scripts/install-python-package.sh [VENV_DIR]...   (default: .venv .venv-compat)
#   scripts/install-python-package.sh --print-wheel   prints this source state's wheel (built if missing)
#   scripts/install-python-package.sh --print-wheel --target aarch64-unknown-linux-gnu
#                                                     the same for another Linux target, cross-built
#                                                     (manylinux_2_28_aarch64; `rustup target add` run
#                                                     first), into its own directory <hash>-<target>/
#
# The wheel is abi3 (CPython >= 3.9), so one wheel serves every venv, and it
# is the release wheel itself (the only wheel build, so CI builds it once):
# `maturin build --release --zig --compatibility manylinux_2_28`, stripped
# (pyproject.toml), linked by zig against glibc 2.28 so pip accepts it
# wherever torch's own manylinux_2_28 wheels install. zig and auditwheel come
# from PyPI into .venv (scripts/requirements-packaging.txt, once per venv).
#
# Each source state has its own wheel directory,
# $CARGO_TARGET_DIR/wheels/abicache/<hash>/ (the hash of crates/, python/,
# pyproject.toml, Cargo.toml, Cargo.lock and this script: `dev_source_hash`),
# built under that hash's lock into a temporary directory and renamed into
# place, so checkouts at different commits never delete or install each
# other's wheel. Every install into a shared venv holds the venv's exclusive
# package lock (`<venv>/.abicache-packages.lock`): `scripts/test.sh` holds it
# shared while its tests run, so another checkout's different wheel waits
# until they are done. A venv is reinstalled only when its stamp differs.
# Wheel directories unused for two days are removed (by whoever can take
# their lock). `scripts/check-wheel.sh` checks the wheel's tag, size and
# commands. Run after `scripts/setup-venv.sh dev compat`.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
cd "$repo"
. scripts/dev-env.sh
wheels=$CARGO_TARGET_DIR/wheels/abicache
maturin=${MATURIN:-}
if [ -z "$maturin" ]; then
  if [ -x "$repo/.venv/bin/maturin" ]; then maturin=$repo/.venv/bin/maturin
  elif command -v maturin >/dev/null; then maturin=$(command -v maturin)
  else
    echo "install-python-package: \`maturin\` not found; run \`scripts/setup-venv.sh dev\` (it installs maturin into .venv) or set MATURIN" >&2
    exit 2
  fi
fi

# zig and auditwheel, into the venv that has maturin (a stamp per requirements hash).
# (By its real directory: see dev_venv_python.)
tools_python=$(dev_venv_python "$(dirname "$maturin")/..")
reqs=$repo/scripts/requirements-packaging.txt
tools_prefix=$("$tools_python" -c 'import sys; print(sys.prefix)')
tools_stamp=$tools_prefix/.abicache-packaging-$(sha256sum "$reqs" | cut -c1-16)
if [ ! -f "$tools_stamp" ] || ! "$tools_python" -c 'import ziglang' 2>/dev/null; then
  dev_lock tools_lock -x "$tools_prefix/.abicache-packages.lock" install-python-package
  if [ ! -f "$tools_stamp" ] || ! "$tools_python" -c 'import ziglang' 2>/dev/null; then
    echo "install-python-package: installing zig and auditwheel (scripts/requirements-packaging.txt)" >&2
    "$tools_python" -m pip install --quiet -r "$reqs"
    touch "$tools_stamp"
  fi
  dev_unlock tools_lock
fi

# --print-wheel [--target TRIPLE]: a cross-built wheel for TRIPLE (the
# release wheels for aarch64), never installed here.
print_only=0
target=
if [ "${1:-}" = --print-wheel ]; then
  print_only=1
  if [ "${2:-}" = --target ]; then
    target=${3:?--target needs a Rust target triple, e.g. aarch64-unknown-linux-gnu}
  fi
fi
target_args=()
if [ -n "$target" ]; then
  target_args=(--target "$target")
  if ! rustup target list --installed 2>/dev/null | grep -qx "$target"; then
    echo "install-python-package: adding the Rust target $target (rustup target add)" >&2
    rustup target add "$target" >&2
  fi
fi

hash=$(dev_source_hash)
dir=$wheels/$hash${target:+-$target}
mkdir -p "$wheels"
dev_lock wheel_lock -s "$dir.lock" install-python-package
if ! compgen -G "$dir/abicache-*.whl" >/dev/null; then
  dev_unlock wheel_lock
  dev_lock wheel_lock -x "$dir.lock" install-python-package
  if ! compgen -G "$dir/abicache-*.whl" >/dev/null; then
    echo "install-python-package: building the abicache wheel (source state $hash${target:+, for $target})" >&2
    tmp=$(mktemp -d "$wheels/.build-$hash.XXXXXX")
    interpreter=()
    [ -x "$repo/.venv/bin/python" ] && interpreter=(--interpreter "$repo/.venv/bin/python")
    # maturin runs `python3 -m ziglang` when no `zig` is on PATH: the tools venv's.
    if ! PATH=$(dirname "$maturin"):$PATH "$maturin" build --release --quiet --zig \
        --compatibility manylinux_2_28 -o "$tmp" "${interpreter[@]}" "${target_args[@]}" >&2; then
      rm -rf "$tmp"
      exit 1
    fi
    rm -rf "$dir"   # a partial directory cannot exist (rename below), but a hand-made one may
    mv -T "$tmp" "$dir"
  fi
fi
touch "$dir"
wheel=$(ls "$dir"/abicache-*.whl | head -n1)

# Wheel directories of other source states unused for two days; one still in
# use holds its lock shared, and is skipped.
for old in "$wheels"/*/; do
  old=${old%/}
  [ "$old" = "$dir" ] && continue
  [ -n "$(find "$old" -maxdepth 0 -mtime +1 2>/dev/null)" ] || continue
  ( exec {fd}>>"$old.lock"; flock -n -x "$fd" && rm -rf "$old" "$old.lock" ) || true
done
find "$wheels" -maxdepth 1 -name '.build-*' -mtime +1 -exec rm -rf {} + 2>/dev/null || true

if [ "$print_only" = 1 ]; then
  echo "$wheel"
  exit 0
fi

# script_names_venv SCRIPT: whether the console script SCRIPT runs $python:
# its `#!` line names it, or, where pip writes a `/bin/sh` launcher instead
# (a path with a blank, or longer than a `#!` line may be), its
# `exec "$python"` line does.
script_names_venv() {
  local head
  head=$(head -n 3 "$1" 2>/dev/null) || return 1
  [ "${head%%$'\n'*}" = "#!$python" ] || [[ "$head" == "#!/bin/sh"*"\"$python\""* ]]
}

[ $# -eq 0 ] && set -- "$repo/.venv" "$repo/.venv-compat"
for venv in "$@"; do
  if [ ! -x "$venv/bin/python" ]; then
    echo "install-python-package: skipping \`$venv\` (no venv there; create it with scripts/setup-venv.sh)" >&2
    continue
  fi
  vstamp=$venv/.abicache-wheel-stamp
  python=$(dev_venv_python "$venv")
  # Installed: this source state's wheel, and an `abicache` command that
  # names the venv by its real directory (one installed through a
  # checkout's link, as before 2026-12-03, is reinstalled; see dev_venv_python).
  installed() {
    [ -f "$vstamp" ] && [ "$(cat "$vstamp")" = "$hash" ] \
      && compgen -G "$venv/lib/python*/site-packages/abicache-*.dist-info" >/dev/null \
      && script_names_venv "$venv/bin/abicache"
  }
  installed && continue
  dev_lock venv_lock -x "$venv/.abicache-packages.lock" install-python-package
  if ! installed; then
    "$python" -m pip install --quiet --no-deps --force-reinstall --no-index "$wheel"
    echo "$hash" > "$vstamp.tmp" && mv -f "$vstamp.tmp" "$vstamp"
    echo "install-python-package: installed $(basename "$wheel") into $venv" >&2
  fi
  dev_unlock venv_lock
done
