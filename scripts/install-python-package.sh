#!/usr/bin/env bash
# Builds the `abicache` wheel once per source state and installs it into the
# project venvs (.venv, and .venv-compat when it exists).
#
#   scripts/install-python-package.sh [VENV_DIR]...   (default: .venv .venv-compat)
#
# The wheel is abi3 (CPython >= 3.9), so one wheel serves every venv. It is
# built with `maturin build --release` into target/wheels/ using the
# repository's target dir (incremental builds are reused) and skipped when
# the hash of crates/, python/, pyproject.toml, Cargo.toml and Cargo.lock matches the stamp
# of the last build. A venv is reinstalled only when its stamp differs.
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

list_sources() {
  git ls-files -co --exclude-standard -z -- crates python pyproject.toml Cargo.toml Cargo.lock 2>/dev/null \
    || find crates python pyproject.toml Cargo.toml Cargo.lock -type f -not -path '*/__pycache__/*' -print0
}
hash=$(list_sources | sort -z | xargs -0 sha256sum | sha256sum | cut -c1-16)
stamp=$wheels/.stamp
if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$hash" ] || ! ls "$wheels"/abicache-*.whl >/dev/null 2>&1; then
  echo "install-python-package: building the abicache wheel (source state $hash)" >&2
  rm -rf "$wheels"
  mkdir -p "$wheels"
  interpreter=()
  [ -x "$repo/.venv/bin/python" ] && interpreter=(--interpreter "$repo/.venv/bin/python")
  "$maturin" build --release --quiet -o "$wheels" "${interpreter[@]}" >&2
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
