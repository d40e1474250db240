"""`import abicache` and the warm loads, for two or more versions of the
Python package side by side: what a change to `python/abicache` costs.

Run with the project venv's interpreter (it needs torch and the installed
wheel, whose native module every version borrows):

    .venv/bin/python benches/bench_import.py --version before=/tmp/old-checkout/python \
        --version after=python [--runs 200] [--processes]

Each `--version LABEL=DIR` names a directory holding an `abicache` package
(a checkout's `python/`). It is copied with the installed wheel's native
module beside it and compiled to `.pyc` once. Into a fresh cache per
version, examples/cpu_muladd is built, loaded again after the racy window
(that native hit writes the warm-load record), and checked to be answered
by the record. Then `--runs` rounds, the versions in turn (alternating
order), of the two warm rows of benches/bench_warm_paths.py:

- `cpu ops`: `abicache.TorchOpsExtension(...).load()`;
- `load ops`: `abicache.load(..., is_python_module=False)`.

Each sample is a process that has imported torch and nothing of abicache,
with the version's directory first on `sys.path`; it times `import abicache`
alone and the whole warm load (the import included), beyond `import torch`,
as wall-clock time and as the process's CPU time (on a loaded machine the
wall-clock time mostly measures waiting for a core).
By default the samples are children forked from one server that imported
torch once (~2 ms a sample instead of ~2.5 s, so hundreds of runs are
cheap; the server registered each version's directory with the path finder,
as a process started with it on `PYTHONPATH` has); `--processes`: a new
interpreter per sample instead, as bench_warm_paths.py does. Prints the
median and the 10th and 90th percentiles per version and row, and writes
`import.json` in the work dir; the copies and caches are deleted at the end.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Dict, List, Tuple

REPO = Path(__file__).resolve().parent.parent
CPU = REPO / "examples" / "cpu_muladd"
SOURCES = [str(CPU / "ops.cpp"), str(CPU / "kernel.cpp")]

ROWS = {
    "cpu ops": 'abicache.TorchOpsExtension("muladd_example", {sources!r}, required_ops=["muladd"], '
    "cache_dir={cache!r}).load()",
    "load ops": 'abicache.load("muladd_example", {sources!r}, is_python_module=False, cache_dir={cache!r})',
}

# One sample: `import abicache`, then the row's call; gives both times
# (seconds beyond `import torch`), as wall-clock and as CPU time (this
# process's, user and system: what the machine's other work does not
# inflate), and whether the native module was loaded.
SAMPLE = """
c0, t0 = time.process_time(), time.perf_counter()
import abicache
t1, c1 = time.perf_counter(), time.process_time()
{call}
t2, c2 = time.perf_counter(), time.process_time()
result = "%r %r %r %r %s" % (t1 - t0, t2 - t0, c1 - c0, c2 - c0, "abicache._native" in sys.modules)
"""

# The fork server: imports torch once, then per line of stdin (a JSON
# `[directory, code]`) forks a child that puts the directory first on
# `sys.path`, runs the code and writes `result` back; prints it.
SERVER = """
import gc, json, os, sys, time, warnings
import importlib.util
warnings.filterwarnings("ignore")
import torch
registered = set()
# What torch made stays out of the collector's sight, so a child's
# collection writes none of the pages it shares with the server.
gc.collect()
gc.freeze()
for line in sys.stdin:
    directory, code = json.loads(line)
    if directory not in registered:
        # The path finder's entry for the directory, as a process started
        # with it on PYTHONPATH has it by now (every import of torch's
        # looked there first).
        sys.path.insert(0, directory)
        importlib.util.find_spec("abicache_bench_import_none")
        sys.path.pop(0)
        registered.add(directory)
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        try:
            sys.path.insert(0, directory)
            scope = {"sys": sys, "time": time, "torch": torch}
            exec(code, scope)
            os.write(w, scope["result"].encode())
        finally:
            os._exit(0)
    os.close(w)
    with os.fdopen(r) as f:
        out = f.read()
    os.waitpid(pid, 0)
    if not out:
        raise SystemExit("bench_import: a sample failed (run it with --processes to see why)")
    print(out, flush=True)
"""

PROCESS = """
import sys, time, warnings
warnings.filterwarnings("ignore")
import torch
""" + SAMPLE + "\nprint(result)\n"


def native_module() -> Path:
    """The installed wheel's native module (found without importing abicache)."""
    import importlib.util

    spec = importlib.util.find_spec("abicache")
    if spec is None or not spec.submodule_search_locations:
        raise SystemExit("bench_import: no installed abicache (run scripts/install-python-package.sh .venv)")
    found = sorted(Path(list(spec.submodule_search_locations)[0]).glob("_native*.so"))
    if not found:
        raise SystemExit("bench_import: the installed abicache has no native module")
    return found[0]


def prepare(label: str, source: Path, root: Path, native: Path) -> Path:
    """A copy of `source/abicache` under `root/label`, with the native module, compiled."""
    directory = root / label
    shutil.copytree(source / "abicache", directory / "abicache", ignore=shutil.ignore_patterns("__pycache__", "*.so"))
    shutil.copy2(native, directory / "abicache" / native.name)
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(directory / "abicache")], check=True)
    return directory


def run_process(directory: Path, code: str, env: Dict[str, str]) -> str:
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env=dict(env, PYTHONPATH=str(directory)))
    if out.returncode != 0:
        raise SystemExit(f"bench_import: a child failed:\n{out.stderr[-3000:]}")
    return out.stdout.strip().splitlines()[-1]


def quantiles(samples: List[float]) -> Tuple[float, float, float]:
    """Median, 10th and 90th percentile, in microseconds."""
    deciles = statistics.quantiles(samples, n=10)
    return 1e6 * statistics.median(samples), 1e6 * deciles[0], 1e6 * deciles[-1]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--version", action="append", required=True, metavar="LABEL=DIR",
                        help="a directory holding an `abicache` package (repeat: at least two to compare)")
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--processes", action="store_true", help="a new interpreter per sample (slow)")
    parser.add_argument("--work", type=Path, default=REPO / "benches" / ".work")
    args = parser.parse_args()
    versions = {}
    for item in args.version:
        label, sep, directory = item.partition("=")
        if not sep or not (Path(directory) / "abicache" / "__init__.py").is_file():
            raise SystemExit(f"bench_import: `--version {item}` is not LABEL=DIR with DIR/abicache/__init__.py")
        versions[label] = Path(directory).resolve()
    args.work.mkdir(parents=True, exist_ok=True)
    root = Path(tempfile.mkdtemp(prefix="abicache-bench-import-", dir=args.work)).resolve()
    env = dict(os.environ, MAX_JOBS=os.environ.get("MAX_JOBS", "2"))
    env.pop("ABICACHE_REBUILD", None)
    env.pop("ABICACHE_INTERCEPT", None)
    native = native_module()
    samples: Dict[str, Dict[str, Dict[str, List[float]]]] = {}
    try:
        dirs = {label: prepare(label, source, root, native) for label, source in versions.items()}
        codes = {}
        for label, directory in dirs.items():
            cache = str(root / f"{label}-cache")
            codes[label] = {row: SAMPLE.format(call=call.format(sources=SOURCES, cache=cache))
                            for row, call in ROWS.items()}
            print(f"bench_import: {label}: building (cold)", file=sys.stderr)
            for code in codes[label].values():
                run_process(directory, PROCESS.replace(SAMPLE, code), env)
        time.sleep(2.2)  # the racy window: then the stamps can be trusted
        for label, directory in dirs.items():
            for row, code in codes[label].items():
                run_process(directory, PROCESS.replace(SAMPLE, code), env)  # writes the record
                if not run_process(directory, PROCESS.replace(SAMPLE, code), env).endswith("False"):
                    raise SystemExit(f"bench_import: {label} {row}: the warm-load record did not answer")
        samples = {label: {row: {"import": [], "load": [], "import_cpu": [], "load_cpu": []} for row in ROWS}
                   for label in dirs}
        jobs = []
        for i in range(args.runs):
            order = list(dirs) if i % 2 == 0 else list(reversed(dirs))
            for row in ROWS:
                jobs.extend((label, row) for label in order)
        if args.processes:
            outputs = [run_process(dirs[label], PROCESS.replace(SAMPLE, codes[label][row]), env) for label, row in jobs]
        else:
            stdin = "".join(json.dumps([str(dirs[label]), codes[label][row]]) + "\n" for label, row in jobs)
            out = subprocess.run([sys.executable, "-c", SERVER], input=stdin, capture_output=True, text=True, env=env)
            if out.returncode != 0:
                raise SystemExit(f"bench_import: the fork server failed:\n{out.stderr[-3000:]}")
            outputs = out.stdout.strip().splitlines()
        for (label, row), line in zip(jobs, outputs):
            *times, native_loaded = line.split()
            if native_loaded != "False":
                raise SystemExit(f"bench_import: {label} {row}: a sample took the native path")
            for what, t in zip(("import", "load", "import_cpu", "load_cpu"), times):
                samples[label][row][what].append(float(t))
    finally:
        shutil.rmtree(root, ignore_errors=True)
    result = {"runs": args.runs, "processes": args.processes, "load_average": os.getloadavg(),
              "versions": {label: str(source) for label, source in versions.items()}, "us": {}}
    print(f"\nbeyond `import torch`, {'a new interpreter' if args.processes else 'a forked child'} per sample, "
          f"{args.runs} runs; median [p10-p90] in us; load average {result['load_average'][0]:.1f}")
    titles = (("import", "import abicache"), ("load", "import abicache + warm load"),
              ("import_cpu", "CPU time: import abicache"), ("load_cpu", "CPU time: import + warm load"))
    for what, title in titles:
        for row in ROWS:
            if what.startswith("import") and row != next(iter(ROWS)):
                # `import abicache` is the same statement in both rows: pooled.
                continue
            for label in samples:
                data = samples[label][row][what]
                if what.startswith("import"):
                    data = [t for r in ROWS for t in samples[label][r][what]]
                med, p10, p90 = quantiles(data)
                name = title if what.startswith("import") else f"{title} ({row})"
                result["us"].setdefault(name, {})[label] = {"median": med, "p10": p10, "p90": p90}
                print(f"  {name:<42} {label:<10} {med:8.0f}  [{p10:6.0f}-{p90:6.0f}]")
    (args.work / "import.json").write_text(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
