#!/usr/bin/env bash
# Runs every test of the project, as CI does (`.ci/run` calls exactly this).
#
#   scripts/test.sh                          everything, as CI (below)
#   scripts/test.sh --quick [-p CRATE]...    the inner loop: Rust only (below)
#   scripts/test.sh --python-dev [PYTEST_ARG]...
#                                            a Python change without a release wheel (below)
#   scripts/test.sh --help                   this text
#
# The full run:
# 0. the tree's hygiene, cheapest first: `cargo fmt --check` (an unformatted
#    file fails CI), clippy with warnings as errors, `cargo doc` with warnings
#    as errors;
# 1. the documentation site: `mkdocs build --strict` in .venv-docs
#    (`scripts/setup-venv.sh docs`, ~160 MB), into target/site; quiet unless
#    a page, a link or an anchor is broken;
# 2. the Python venvs (.venv with torch 2.15 + nvcc wheels, .venv-compat with
#    torch 2.12), created once per machine and reused, and the servers the
#    remote-cache tests start (redis-server, moto);
# 3. the Python package: the release wheel (stripped, manylinux_2_28, built
#    with zig) built when its sources changed and installed into both venvs;
#    its tag, size and commands checked in a fresh venv; its `_native.pyi`
#    stub checked against the module (mypy's stubtest); the free-threaded
#    (cp314t) wheel built and checked beside it;
# 4. the Rust tests (cargo nextest), which run the real compiler against the
#    venv's torch;
# 5. PyTorch's own JIT-extension tests with abicache's load/load_inline
#    (the files from ../shared/torch-jit-upstream, used in place);
# 6. the Python tests (pytest), which load the built extensions into torch;
# 7. the GPU check (scripts/gpu-check.sh) where `nvidia-smi` lists a GPU
#    (it says that it skipped otherwise).
#
# --quick: `cargo fmt --check`, clippy and the Rust tests of the crates named
#    with -p (default: the whole workspace); no venv is set up, no wheel
#    built, no Python test run. Tests that run the real compiler against
#    torch use .venv and .venv-compat when they exist (made once by
#    `scripts/setup-venv.sh dev compat`; without them those tests fail or
#    skip). A skip is listed at the end but does not fail the run
#    (ABICACHE_TEST_NO_SKIPS=0 unless set): the full run is the one that
#    promises everything is there.
# --python-dev: `maturin develop` (a debug build, no zig, no wheel) installs
#    this checkout's package into .venv, replacing the release wheel there,
#    then runs pytest with the arguments given (default: tests/python), e.g.
#    `scripts/test.sh --python-dev tests/python/test_warm_path.py -k record`. It
#    removes .venv's wheel stamp first, so the next full run (or
#    scripts/install-python-package.sh) reinstalls the release wheel. The
#    .venv is per machine: every checkout on the machine sees the develop
#    install until then. Tests that run .venv-compat use the wheel installed
#    there by the last full run; the interception tests need the release
#    wheel (an editable install has no `abicache-intercept.pth`).
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
cd "$repo"
usage() { sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; }
mode=full
crates=()
pytest_args=()
while [ $# -gt 0 ]; do
  case $1 in
    --quick) mode=quick ;;
    -p|--package)
      [ $# -ge 2 ] || { echo "test: \`$1\` needs a crate name (e.g. -p abicache-key)" >&2; exit 2; }
      crates+=("$2"); shift ;;
    -p*) crates+=("${1#-p}") ;;
    --python-dev) mode=python-dev; shift; pytest_args=("$@"); break ;;
    -h|--help) usage; exit 0 ;;
    *) echo "test: unknown argument \`$1\` (see scripts/test.sh --help)" >&2; exit 2 ;;
  esac
  shift
done
if [ ${#crates[@]} -gt 0 ] && [ "$mode" != quick ]; then
  echo "test: -p selects crates for --quick only (the full run tests the whole workspace)" >&2
  exit 2
fi
. scripts/dev-env.sh
# No background precompiled-header builds from the tests' throw-away caches (a
# `torch/extension.h` PCH is ~40 s of CPU and ~800 MB each); the PCH tests
# drive the build crate directly, and the torch-sized case is in bench.sh.
export ABICACHE_PCH=${ABICACHE_PCH:-0}
# The target directory is shared by every checkout on the machine, and cargo
# reuses a test binary built in another checkout when this one's sources are
# older; insta would then look for snapshots in that other checkout (the path
# baked in at compile time). Point it at this checkout.
export INSTA_WORKSPACE_ROOT=$repo
# Skips are seen: every skipped test, Rust or Python, is appended to a log
# listed at the end of the run, and since this script sets up everything the
# tests need, a skip is a failure here unless the test needs hardware this
# machine lacks (a GPU, a CPU feature), a privilege the process lacks (a
# container without mount or chown), or is one of PyTorch's own file's
# skips: abicache_test_support::{skip, skip_for_hardware, skip_for_privilege},
# tests/skip_report.py.
# (--quick and --python-dev set nothing up: there a skip is listed, not failed.)
if [ "$mode" = full ]; then
  export ABICACHE_TEST_NO_SKIPS=${ABICACHE_TEST_NO_SKIPS:-1}
else
  export ABICACHE_TEST_NO_SKIPS=${ABICACHE_TEST_NO_SKIPS:-0}
fi
ABICACHE_TEST_SKIP_LOG=$(mktemp "${TMPDIR:-/tmp}/abicache-skips.XXXXXX")
export ABICACHE_TEST_SKIP_LOG
runner_log=$ABICACHE_TEST_SKIP_LOG.runners
jit_cold_cache=
# At the end, pass or fail: the skips, then one closing line adding up every
# runner's summary (nextest's and each pytest run's).
finish() {
  local rc=$?
  [ -n "$jit_cold_cache" ] && rm -rf "$jit_cold_cache"
  if [ "$ABICACHE_TEST_NO_SKIPS" = 1 ]; then
    echo "== skipped tests: $(wc -l < "$ABICACHE_TEST_SKIP_LOG") (hardware this machine lacks, a privilege" \
      "the process lacks (mount, chown), or PyTorch's own file's skips; any other skip fails the run)" >&2
  else
    echo "== skipped tests: $(wc -l < "$ABICACHE_TEST_SKIP_LOG") (ABICACHE_TEST_NO_SKIPS=$ABICACHE_TEST_NO_SKIPS:" \
      "listed, not failed; the full run fails on any skip but hardware, privilege or PyTorch's own)" >&2
  fi
  sed 's/^/  /' "$ABICACHE_TEST_SKIP_LOG" >&2
  if [ -s "$runner_log" ]; then
    python3 - "$runner_log" <<'PY'
import re, sys
text = open(sys.argv[1], errors="replace").read()
total = {"passed": 0, "failed": 0, "skipped": 0}
lines = re.findall(r"tests run: .*", text)  # nextest
lines += re.findall(r"^=*\s*(\d+ (?:passed|failed|skipped|xfailed|error).*) in [\d.]+s", text, re.M)  # pytest
for line in lines:
    for n, what in re.findall(r"(\d+) (passed|failed|skipped|errors?)", line):
        total["failed" if what.startswith("error") else what] += int(n)
print(f"all tests: {total['passed']} passed, {total['failed']} failed, {total['skipped']} skipped")
PY
  fi
  rm -f "$ABICACHE_TEST_SKIP_LOG" "$runner_log"
  exit "$rc"
}
trap finish EXIT

# rust_tests ARGS...: nextest (else cargo test) over ARGS (`--workspace`, or `-p CRATE`...).
rust_tests() {
  if cargo nextest --version >/dev/null 2>&1; then
    cargo nextest run "$@" --no-fail-fast 2>&1 | tee -a "$runner_log"
  else
    echo "cargo-nextest not found; running cargo test instead" >&2
    cargo test "$@" --no-fail-fast 2>&1 | tee -a "$runner_log"
  fi
}

if [ "$mode" = quick ]; then
  select=(--workspace)
  if [ ${#crates[@]} -gt 0 ]; then
    select=()
    for crate in "${crates[@]}"; do select+=(-p "$crate"); done
  fi
  echo "== quick: cargo fmt --check, clippy and the Rust tests of ${crates[*]:-the workspace}" \
    "(no venv set up, no wheel, no Python tests)" >&2
  cargo fmt --all --check
  cargo clippy "${select[@]}" --all-targets --quiet -- -D warnings
  # The crates whose tests run the real compiler against the venvs' torch.
  if [ ! -x .venv/bin/python ] || [ ! -x .venv-compat/bin/python ]; then
    need=$(cd crates && grep -l -r -e 'venv_python' -e '"\.venv' -- */tests 2>/dev/null | cut -d/ -f1 | sort -u \
      | { if [ ${#crates[@]} -gt 0 ]; then grep -x -F -f <(printf '%s\n' "${crates[@]}"); else cat; fi; } \
      | tr '\n' ' ' || true)
    need=${need% }
    if [ -n "$need" ]; then
      echo "test: no .venv or .venv-compat here: the tests of $need that compile against torch fail or skip;" \
        "\`scripts/setup-venv.sh dev compat\` makes them (once per machine, ~5 GB each)" >&2
    fi
  fi
  echo "== Rust tests" >&2
  rust_tests "${select[@]}"
  exit 0
fi

if [ "$mode" = python-dev ]; then
  [ ${#pytest_args[@]} -gt 0 ] || pytest_args=(tests/python)
  if [ ! -x .venv/bin/maturin ]; then
    echo "test: no .venv with maturin here; run \`scripts/setup-venv.sh dev\` first (once per machine)" >&2
    exit 2
  fi
  echo "== maturin develop into .venv (a debug build of this checkout; the next full run reinstalls the" \
    "release wheel)" >&2
  dev_lock dev_pkg_lock -x .venv/.abicache-packages.lock test
  # No stamp: install-python-package.sh and the full run then know .venv does
  # not hold a release wheel of any source state, and reinstall it.
  rm -f .venv/.abicache-wheel-stamp
  # By the venv's real directory (see dev_venv_python): the `abicache`
  # command pip writes names it, not this checkout's link.
  venv_real=$(cd .venv && pwd -P)
  VIRTUAL_ENV=$venv_real PATH=$venv_real/bin:$PATH .venv/bin/maturin develop --quiet >&2
  dev_unlock dev_pkg_lock
  dev_lock dev_pkg_lock -s .venv/.abicache-packages.lock test
  echo "== Python tests (${pytest_args[*]})" >&2
  .venv/bin/python -m pytest -q -rs "${pytest_args[@]}" 2>&1 | tee -a "$runner_log"
  exit 0
fi

echo "== cargo fmt --check, clippy, doc" >&2
cargo fmt --all --check
cargo clippy --workspace --all-targets --quiet -- -D warnings
RUSTDOCFLAGS="-D warnings" cargo doc --workspace --no-deps --quiet

# The documentation site, early: a broken link or page fails here, in seconds.
echo "== documentation site (mkdocs build --strict, into target/site)" >&2
docs_log=$(mktemp "${TMPDIR:-/tmp}/abicache-docs.XXXXXX")
if ! { scripts/setup-venv.sh docs && NO_MKDOCS_2_WARNING=1 .venv-docs/bin/mkdocs build --strict; } >"$docs_log" 2>&1; then
  cat "$docs_log" >&2
  rm -f "$docs_log"
  echo "test: the documentation site does not build (above: mkdocs.yml and docs/; a link names a missing" \
    "page or anchor, or a page is not in mkdocs.yml's nav)" >&2
  exit 1
fi
rm -f "$docs_log"

# Every piece of per-machine set-up runs here, once, before any test starts;
# the tests only use what it made (each script is also safe to run at once
# with another checkout's: see scripts/dev-env.sh).
echo "== per-machine set-up (venvs, services, uv, wheel, PyTorch's test files)" >&2
scripts/setup-venv.sh dev compat
scripts/setup-services.sh
ABICACHE_TEST_UV=$(scripts/setup-uv.sh)
ABICACHE_TEST_UV_CACHE=$(scripts/setup-uv.sh --cache-dir)
export ABICACHE_TEST_UV ABICACHE_TEST_UV_CACHE
scripts/install-python-package.sh
scripts/link-torch-jit-upstream.sh
jit_reqs=tests/torch_jit/requirements.txt
jit_stamp=.venv/.abicache-torch-jit-$(sha256sum "$jit_reqs" | cut -c1-16)
if [ ! -f "$jit_stamp" ]; then
  dev_lock jit_reqs_lock -x .venv/.abicache-packages.lock test
  if [ ! -f "$jit_stamp" ]; then
    "$(dev_venv_python .venv)" -m pip install --quiet -r "$jit_reqs"
    touch "$jit_stamp"
  fi
  dev_unlock jit_reqs_lock
fi
# From here on the shared venvs' packages must stay as installed: hold their
# package locks shared (another checkout installing a different abicache
# wheel waits for this run), and check the installed wheel is still ours.
hash=$(dev_source_hash)
for venv in .venv .venv-compat; do
  dev_lock "pkg_lock_${venv//[-.]/_}" -s "$venv/.abicache-packages.lock" test
  if [ "$(cat "$venv/.abicache-wheel-stamp" 2>/dev/null)" != "$hash" ]; then
    echo "test: \`$venv\` holds another source state's abicache wheel (another checkout installed it" \
      "meanwhile); run scripts/test.sh again" >&2
    exit 1
  fi
done
scripts/check-wheel.sh
# The release's free-threaded wheel (cp314t), from the same sources: built
# when they changed (one more release build of the bindings) and checked.
ft_wheels=$(scripts/build-free-threaded-wheels.sh)
for wheel in $ft_wheels; do
  scripts/check-wheel.sh "$wheel"
done
echo "== .pyi stub check (mypy.stubtest abicache._native)" >&2
.venv/bin/python -m mypy.stubtest abicache._native

echo "== Rust tests" >&2
rust_tests --workspace

# PyTorch's own test/test_cpp_extensions_jit.py, unmodified, with abicache's
# load/load_inline swapped in (tests/torch_jit/README.md). PyTorch's files are
# used in place, never vendored: tests/torch_jit/upstream is linked (above) to
# ../shared/torch-jit-upstream/ beside the checkout, else to a per-machine
# copy; with neither, the step reports a skip saying what is missing.
# Cache: cold (~17 compiles, several minutes) whenever the abicache package
# changed, warm (~1.5 min) otherwise: ABICACHE_DIR is a per-machine directory
# named by the source hash of the wheel just installed, so a change to
# abicache's code always gets a cold run and a cache is reused only by the
# identical code, whose builds it already checked; the keys cover the torch
# venv, compiler and sources. A run holds its cache's lock shared; caches
# unused for a day are removed by whoever can take their lock exclusively
# (renamed aside first), so no run deletes a cache another is using.
# ABICACHE_TORCH_JIT_COLD=1 runs cold in a private directory, removed after.
# `-v` lists every test, so the log shows them running.
if [ -d tests/torch_jit ]; then
  echo "== PyTorch's JIT-extension tests (abicache's load/load_inline)" >&2
  jit_caches=$ABICACHE_DEV_HOME/torch-jit-cache
  mkdir -p "$jit_caches"
  for old in "$jit_caches"/*/; do
    old=${old%/}
    [ -n "$(find "$old" -maxdepth 0 -mtime +0 2>/dev/null)" ] || continue
    ( exec {fd}>>"$old.lock"; flock -n -x "$fd" && mv -T "$old" "$old.trash.$$" && rm -rf "$old.trash.$$" ) || true
  done
  if [ "${ABICACHE_TORCH_JIT_COLD:-0}" = 1 ]; then
    jit_cache=$(mktemp -d "$jit_caches/.cold.XXXXXX")
    jit_cold_cache=$jit_cache
  else
    jit_cache=$jit_caches/$hash
    dev_lock jit_cache_lock -s "$jit_cache.lock" test
    mkdir -p "$jit_cache" && touch "$jit_cache"
  fi
  ABICACHE_DIR=$jit_cache .venv/bin/python -m pytest tests/torch_jit -v -rs 2>&1 | tee -a "$runner_log"
fi

if [ -d tests/python ]; then
  echo "== Python tests" >&2
  .venv/bin/python -m pytest tests/python -q -rs 2>&1 | tee -a "$runner_log"
fi

# 7. the GPU check (issue 48): runs where `nvidia-smi` lists a GPU, and says
#    it skipped otherwise.
echo "== GPU check (scripts/gpu-check.sh)" >&2
scripts/gpu-check.sh
