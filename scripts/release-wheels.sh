#!/usr/bin/env bash
# The release job: builds every wheel abicache ships, from this source state,
# checks each with scripts/check-wheel.sh, and copies them into DIR.
#
#   scripts/release-wheels.sh [DIR]     (default: target/dist; as root, for the aarch64 check)
#
# The wheels (README.md, "Installation", lists them):
#   - abi3, manylinux_2_28_x86_64: scripts/install-python-package.sh (the
#     wheel CI builds and checks too), checked here;
#   - abi3, manylinux_2_28_aarch64: cross-built with zig
#     (`install-python-package.sh --print-wheel --target aarch64-unknown-linux-gnu`),
#     checked by check-wheel.sh run under emulation: scripts/aarch64-check.sh
#     runs it in its arm64 root (tag, size, auditwheel, a fresh venv gets
#     `abicache`), then builds and loads the CPU example there (minutes);
#   - cp314t (free-threaded CPython 3.14), manylinux_2_28_x86_64:
#     scripts/build-free-threaded-wheels.sh, checked here (its fresh-venv
#     step only where a `python3.14t` exists; it says when it skips it).
# Any wheel that fails its check fails the job; nothing is copied then.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
cd "$repo"
. scripts/dev-env.sh
dist=${1:-$repo/target/dist}

if [ "$(id -u)" != 0 ]; then
  echo "release-wheels: needs root: the aarch64 wheel is checked in an emulated root (scripts/aarch64-check.sh mounts and chroots)" >&2
  exit 2
fi

wheels=()
echo "release-wheels: == x86_64 (abi3)" >&2
x86=$(scripts/install-python-package.sh --print-wheel)
scripts/check-wheel.sh "$x86"
wheels+=("$x86")

echo "release-wheels: == aarch64 (abi3, cross-built; checked under emulation)" >&2
aarch64=$(scripts/install-python-package.sh --print-wheel --target aarch64-unknown-linux-gnu)
scripts/aarch64-check.sh
wheels+=("$aarch64")

echo "release-wheels: == x86_64 (free-threaded: cp314t)" >&2
free_threaded=$(scripts/build-free-threaded-wheels.sh)
for wheel in $free_threaded; do
  scripts/check-wheel.sh "$wheel"
  wheels+=("$wheel")
done

mkdir -p "$dist"
cp "${wheels[@]}" "$dist/"
echo "release-wheels: ${#wheels[@]} wheels checked, in $dist:" >&2
for w in "${wheels[@]}"; do echo "  $(basename "$w")" >&2; done
