#!/usr/bin/env bash
# Builds the `abicache` wheel once per source state and installs it into the
# project venvs (.venv, and .venv-compat when it exists).
#
#   scripts/install-python-package.sh [VENV_DIR]...   (default: .venv .venv-compat)
#
# The wheel is abi3 (CPython >= 3.9), so one wheel serves every venv, and it
# is the release wheel itself (the only wheel build, so CI builds it once):
# `maturin build --release --zig --compatibility manylinux_2_28`, stripped
# (pyproject.toml), linked by zig against glibc 2.28 so pip accepts it
# wherever torch's own manylinux_2_28 wheels install. zig and auditwheel come
# from PyPI into .venv (scripts/requirements-packaging.txt, once per venv).
# It is built into $CARGO_TARGET_DIR/wheels/abicache using the shared target
# dir (incremental builds are reused) and skipped when the hash of crates/,
# python/, pyproject.toml, Cargo.toml, Cargo.lock and this script matches the
# stamp of the last build. A venv is reinstalled only when its stamp differs.
# `scripts/check-wheel.sh` checks the wheel's tag, size and commands.
# Run after `scripts/setup-venv.sh dev compat`.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
cd "$repo"
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$repo/target}
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
tools_python=$(dirname "$maturin")/python
reqs=$repo/scripts/requirements-packaging.txt
tools_stamp=$("$tools_python" -c 'import sys; print(sys.prefix)')/.abicache-packaging-$(sha256sum "$reqs" | cut -c1-16)
if [ ! -f "$tools_stamp" ] || ! "$tools_python" -c 'import ziglang' 2>/dev/null; then
  echo "install-python-package: installing zig and auditwheel (scripts/requirements-packaging.txt)" >&2
  "$tools_python" -m pip install --quiet -r "$reqs"
  touch "$tools_stamp"
fi

list_sources() {
  git ls-files -co --exclude-standard -z -- crates python pyproject.toml Cargo.toml Cargo.lock \
      scripts/install-python-package.sh 2>/dev/null \
    || find crates python pyproject.toml Cargo.toml Cargo.lock scripts/install-python-package.sh \
      -type f -not -path '*/__pycache__/*' -print0
}
hash=$(list_sources | sort -z | xargs -0 sha256sum | sha256sum | cut -c1-16)
stamp=$wheels/.stamp
if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$hash" ] || ! ls "$wheels"/abicache-*.whl >/dev/null 2>&1; then
  echo "install-python-package: building the abicache wheel (source state $hash)" >&2
  rm -rf "$wheels"
  mkdir -p "$wheels"
  interpreter=()
  [ -x "$repo/.venv/bin/python" ] && interpreter=(--interpreter "$repo/.venv/bin/python")
  # maturin runs `python3 -m ziglang` when no `zig` is on PATH: the tools venv's.
  PATH=$(dirname "$maturin"):$PATH "$maturin" build --release --quiet --zig \
    --compatibility manylinux_2_28 -o "$wheels" "${interpreter[@]}" >&2
  echo "$hash" > "$stamp"
fi
wheel=$(ls "$wheels"/abicache-*.whl | head -n1)

[ $# -eq 0 ] && set -- "$repo/.venv" "$repo/.venv-compat"
for venv in "$@"; do
  if [ ! -x "$venv/bin/python" ]; then
    echo "install-python-package: skipping \`$venv\` (no venv there; create it with scripts/setup-venv.sh)" >&2
    continue
  fi
  vstamp=$venv/.abicache-wheel-stamp
  if [ -f "$vstamp" ] && [ "$(cat "$vstamp")" = "$hash" ] \
     && compgen -G "$venv/lib/python*/site-packages/abicache-*.dist-info" >/dev/null; then
    continue
  fi
  "$venv/bin/python" -m pip install --quiet --no-deps --force-reinstall --no-index "$wheel"
  echo "$hash" > "$vstamp"
  echo "install-python-package: installed $(basename "$wheel") into $venv" >&2
done
