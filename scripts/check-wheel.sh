#!/usr/bin/env bash
# Checks a release wheel: WHEEL, else this source state's wheel that
# scripts/install-python-package.sh built:
#
#   scripts/check-wheel.sh [WHEEL]
#
#   - its platform tag is manylinux_2_28 or older (what `auditwheel show`
#     finds from the symbols it really uses, and the tag in its name), so pip
#     installs it wherever torch's own wheels install;
#   - it is at most 15 MB (a stripped native module);
#   - `pip install` of it into a fresh, empty venv gives both the `abicache`
#     command and `python -m abicache`.
# A wheel is checked on its own architecture: the aarch64 wheel inside the
# emulated root of scripts/aarch64-check.sh, where `.venv` is absent and
# auditwheel comes from `python3` on PATH (that root's venv).
# A free-threaded wheel (`cp314t`, scripts/build-free-threaded-wheels.sh)
# gets the same checks, its native module's name must carry its ABI tag,
# and its venv is made with `python3.14t` (ABICACHE_FREE_THREADED_PYTHON
# overrides it); where no such interpreter exists the venv step is skipped,
# and says so.
set -euo pipefail
wheel_arg=${1:+$(realpath -m -- "$1")}   # (before the cd below)
repo=$(cd "$(dirname "$0")/.." && pwd)
cd "$repo"
. scripts/dev-env.sh

max_bytes=$((15 * 1000 * 1000))
max_glibc_minor=28
# This source state's wheel (install-python-package.sh keeps one directory per state).
if [ -n "$wheel_arg" ]; then
  wheel=$wheel_arg
  [ -f "$wheel" ] || { echo "check-wheel: no wheel at \`$wheel\`" >&2; exit 2; }
else
  wheels=$CARGO_TARGET_DIR/wheels/abicache/$(dev_source_hash)
  wheel=$(ls "$wheels"/abicache-*.whl 2>/dev/null | head -n1 || true)
fi
# auditwheel's interpreter: .venv's (install-python-package.sh installs it there), else python3's.
tools_python=.venv/bin/python
[ -x "$tools_python" ] || tools_python=python3
if [ -z "$wheel" ]; then
  echo "check-wheel: no wheel in \`$wheels\` (this source state's); run scripts/install-python-package.sh" >&2
  exit 2
fi
fail() { echo "check-wheel: $(basename "$wheel"): $*" >&2; exit 1; }

# The fresh-venv install below runs the wheel: it is checked on its own architecture.
platform=$(basename "$wheel" .whl)
platform=${platform##*-}
wheel_arch=$(printf '%s\n' "${platform%%.*}" | sed 's/^manylinux_2_[0-9]*_//')
[ "$wheel_arch" = "$(uname -m)" ] || fail "an $wheel_arch wheel, and this machine is $(uname -m): check it on $wheel_arch \
(scripts/aarch64-check.sh runs this script on the aarch64 wheel in an emulated arm64 root)"

size=$(stat -c %s "$wheel")
[ "$size" -le "$max_bytes" ] || fail "$size bytes, over the $max_bytes-byte limit (is it stripped? see [tool.maturin] strip in pyproject.toml)"

case $(basename "$wheel") in
  *manylinux_2_*) name_minor=$(basename "$wheel" | sed -n 's/.*manylinux_2_\([0-9]*\)_.*/\1/p') ;;
  *) fail "its name carries no manylinux_2_N tag (built without --compatibility?)" ;;
esac
[ "$name_minor" -le "$max_glibc_minor" ] || fail "tagged manylinux_2_$name_minor, newer than manylinux_2_$max_glibc_minor"

show=$("$tools_python" -m auditwheel show "$wheel" 2>&1) || fail "auditwheel show failed: $show"
found_minor=$(printf '%s\n' "$show" | tr '\n' ' ' | sed -n 's/.*consistent with the following platform tag:[^"]*"manylinux_2_\([0-9]*\)_.*/\1/p')
[ -n "$found_minor" ] || fail "auditwheel found no manylinux tag:"$'\n'"$show"
[ "$found_minor" -le "$max_glibc_minor" ] || fail "its symbols need manylinux_2_$found_minor (auditwheel show):"$'\n'"$show"

# The interception start-up hook must sit at the root of site-packages.
listing=$("$tools_python" -m zipfile -l "$wheel")
for top in abicache-intercept.pth _abicache_intercept.py; do
  printf '%s\n' "$listing" | grep -q "^$top " || fail "\`$top\` is not at the wheel's root (see [tool.maturin] include in pyproject.toml)"
done

# A free-threaded wheel: its module is built for that ABI, and its venv
# needs that interpreter.
venv_python=python3
abi=$(basename "$wheel" | sed -n 's/^abicache-[^-]*-cp\([0-9]*\)-cp[0-9]*t-.*/\1t/p')
if [ -n "$abi" ]; then
  printf '%s\n' "$listing" | grep -q "^abicache/_native\.cpython-${abi}-[a-z0-9_]*-linux-gnu\.so " \
    || fail "its native module is not \`abicache/_native.cpython-${abi}-<arch>-linux-gnu.so\`"
  venv_python=${ABICACHE_FREE_THREADED_PYTHON:-python${abi:0:1}.${abi:1:-1}t}
  if ! command -v "$venv_python" >/dev/null; then
    echo "check-wheel: $(basename "$wheel"): $((size / 1000)) kB, manylinux_2_$found_minor (auditwheel); no fresh-venv check: no \`$venv_python\` here (set ABICACHE_FREE_THREADED_PYTHON)" >&2
    exit 0
  fi
fi

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$venv_python" -m venv "$tmp/venv"
"$tmp/venv/bin/python" -m pip install --quiet --no-index --no-deps "$wheel"
cli=$("$tmp/venv/bin/abicache" --version)
module=$("$tmp/venv/bin/python" -m abicache --version)
[ "$cli" = "$module" ] || fail "\`abicache --version\` ($cli) and \`python -m abicache --version\` ($module) differ"
echo "check-wheel: $(basename "$wheel"): $((size / 1000)) kB, manylinux_2_$found_minor (auditwheel), \`$cli\` in a fresh venv" >&2
