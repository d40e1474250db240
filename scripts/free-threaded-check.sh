#!/usr/bin/env bash
# The free-threaded wheels, built and checked, then run in a real free-threaded
# CPython with the GIL disabled (scripts/bench.sh runs this; it is slow: one
# more release build per free-threaded version).
#
#   scripts/free-threaded-check.sh
#
#   1. scripts/build-free-threaded-wheels.sh builds the cp314t wheel beside
#      the abi3 one, and scripts/check-wheel.sh checks it (tag, size,
#      auditwheel, its module's ABI, a fresh venv where 3.14t exists);
#   2. tests/python/test_free_threaded.py's slow test installs it into a venv
#      of the free-threaded interpreter (ABICACHE_FREE_THREADED_PYTHON, else
#      `python3.14t` on PATH), checks `sys._is_gil_enabled()` is False after
#      `import abicache`, and runs 8 threads against the Python API at once;
#      with ABICACHE_FREE_THREADED_TORCH (a pip requirement, e.g.
#      `torch==2.15.0`) it installs torch there from PyPI and builds, loads
#      and calls the CPU example too. Without such an interpreter the test
#      is skipped, naming why.
#
# No free-threaded CPython can be installed on this project's machines (see
# docs/index.md, "Free-threaded CPython"): Debian packages none, pyenv needs python.org's
# sources, and PyPI ships no interpreter. Set ABICACHE_FREE_THREADED_PYTHON
# where one exists.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
cd "$repo"
. scripts/dev-env.sh

started=$(date +%s)
ft_wheels=$(scripts/build-free-threaded-wheels.sh)
for wheel in $ft_wheels; do
  scripts/check-wheel.sh "$wheel"
done
ABICACHE_TEST_FREE_THREADED_WHEEL=${ft_wheels%%$'\n'*} \
  .venv/bin/python -m pytest -m slow -q -rs tests/python/test_free_threaded.py
echo "free-threaded-check: done in $(( $(date +%s) - started )) s" >&2
