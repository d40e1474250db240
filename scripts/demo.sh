#!/usr/bin/env bash
# The main job, end to end: builds the CPU example extension through the
# Python package (cold, in a fresh cache), then loads it again from the
# cache in new processes (warm: the first warm load, then the steady state
# once the warm-load record exists), and sets each warm load beside its
# floor: `torch.ops.load_library` of the same library in a fresh process,
# measured in the same run (examples/demo.py).
#
#   scripts/demo.sh            (cache: target/demo-cache, emptied first; ABICACHE_DEMO_DIR moves it)
#
# Set-up: the dev venv (.venv with torch, once per machine) and the release
# wheel (once per source state), whose `abicache` command prints the cache's
# stats at the end; no other build. The two are made at once: the wheel is
# built with the build tools' own small venv (.venv-build: maturin and zig)
# while torch installs, instead of after it. The steady state is the median
# of 5 fresh processes, the floor the median of 7 (one after each warm
# load), so one process disturbed by other work does not move them. Ends with the time each phase took.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
cd "$repo"
. scripts/dev-env.sh

phases=()
phase_start=$SECONDS
demo_start=$SECONDS
# phase NAME: records the time since the previous phase ended under NAME.
phase() {
  phases+=("$1 $((SECONDS - phase_start)) s")
  phase_start=$SECONDS
}

# (On a machine that has both, each finds its stamp and returns at once.)
scripts/setup-venv.sh build
venv_pid=
# Never leave the torch install running behind a failed wheel build: it is
# waited for (it finishes the venv the next run needs).
trap '[ -z "$venv_pid" ] || wait "$venv_pid" || true' EXIT
scripts/setup-venv.sh dev & venv_pid=$!
export MATURIN=$repo/.venv-build/bin/maturin   # (so zig is needed in .venv-build only)
scripts/install-python-package.sh --print-wheel >/dev/null
wait "$venv_pid"
venv_pid=
phase "torch venv and wheel (at once)"
scripts/install-python-package.sh .venv
unset MATURIN
phase "wheel install"

export ABICACHE_DIR=${ABICACHE_DEMO_DIR:-$repo/target/demo-cache}
rm -rf "$ABICACHE_DIR"
# demo VAR ARGS...: one fresh process of examples/demo.py; VAR gets its
# milliseconds, VAR_how how the load was answered, `library` the path.
demo() {
  local var=$1 line ms how
  shift
  line=$(.venv/bin/python examples/demo.py --porcelain "$@")
  IFS=$'\t' read -r ms how library <<<"$line"
  printf -v "$var" '%s' "$ms"
  printf -v "${var}_how" '%s' "$how"
}
floors=()
floor() {
  demo f --floor "$library"
  floors+=("$f")
}
median() { printf '%s\n' "$@" | sort -g | awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }'; }
# row LABEL MS [FLOOR]: one line of the table.
row() {
  if [ $# -eq 2 ]; then
    printf '%-44s %9.1f ms\n' "$1" "$2"
  else
    printf '%-44s %9.1f ms   floor (torch.ops.load_library) %5.1f ms   %4.1fx\n' "$1" "$2" "$3" \
      "$(awk -v a="$2" -v b="$3" 'BEGIN { print (b > 0 ? a / b : 0) }')"
  fi
}

echo "== cold: a fresh cache, so the extension is compiled" >&2
demo cold
phase "cold build"
echo "   library: $library" >&2
echo "== warm: new processes load it from the cache, each followed by its floor (a fresh process" \
  "loading the same library with torch.ops.load_library)" >&2
demo first
floor
echo "   (the first warm load after a build can be slower: it takes the native path, and the warm-load" \
  "record later loads use is written only once the library's stamps are older than the 2 s racy window)" >&2
sleep 2.5
demo later
floor
echo "== steady state: later processes are answered from the warm-load record" >&2
steady=()
steady_hows=()
for _ in 1 2 3 4 5; do
  demo s
  steady+=("$s")
  steady_hows+=("$s_how")
  floor
done
phase "warm loads and floors"
floor_ms=$(median "${floors[@]}")
steady_how=$(printf '%s\n' "${steady_hows[@]}" | sort -u | paste -sd/)

echo
row "cold build (compiles the extension)" "$cold"
row "first warm load ($first_how)" "$first" "$floor_ms"
row "warm load, 2.5 s later ($later_how)" "$later" "$floor_ms"
row "warm load, steady state ($steady_how)" "$(median "${steady[@]}")" "$floor_ms"
echo "(times from the end of \`import torch\` to the op registered; steady state: the median of ${#steady[@]} fresh" \
  "processes; floor: the median of ${#floors[@]}, one after each warm load)"
echo
echo "== abicache stats (the wheel's command line)" >&2
.venv/bin/abicache stats
phase "stats"
phases+=("total $((SECONDS - demo_start)) s")
echo "demo: phases: $(printf '%s, ' "${phases[@]}" | sed 's/, $//')" >&2
