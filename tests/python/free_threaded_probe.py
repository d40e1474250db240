"""Run by an interpreter that has abicache installed (not imported by pytest):
abicache's Python API called from several threads at once, and, where torch
is importable, the CPU example built, loaded and its op called.

    python free_threaded_probe.py --cache DIR [--require-gil-disabled] [--example DIR]

On a free-threaded CPython (3.14t) with ``--require-gil-disabled`` it first
checks that importing abicache left the GIL disabled (``abicache._native``
declares ``gil_used = false``; a module that does not makes the interpreter
turn the GIL on at import, with a warning). The threads then really run at
once. Prints one line ``RESULT <json>``, and exits 1 naming what failed.

test_free_threaded.py runs it on the free-threaded wheel (and, with the GIL,
on the abi3 one, so the stress itself is tested wherever the tests run).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import sysconfig
import threading
from pathlib import Path
from typing import Any, Dict, List


def gil_enabled() -> bool:
    """Whether the GIL is on now (always, before 3.13)."""
    check = getattr(sys, "_is_gil_enabled", None)
    return True if check is None else bool(check())


def fail(message: str) -> None:
    print(f"free_threaded_probe: {message}", file=sys.stderr, flush=True)
    sys.exit(1)


def stress(cache: str, threads: int, rounds: int) -> Dict[str, Any]:
    """``threads`` threads, released together, each calling the torch-free API
    ``rounds`` times: descriptor-path spellings (each must be new), the
    generated-sources store (every thread writes the same content-addressed
    directory in the same round), the cache's counters, the stable-ABI define
    and the instruction-set guard."""
    import abicache
    from abicache import _extension, _native

    barrier = threading.Barrier(threads)
    lock = threading.Lock()
    spellings: List[str] = []
    stored: Dict[int, set] = {}
    errors: List[str] = []

    def worker(index: int) -> None:
        try:
            barrier.wait()
            for r in range(rounds):
                spelling = _extension.fd_path(3)
                files = [("ops.cpp", "int ops() { return %d; }\n" % r), ("ops.h", "int ops();\n")]
                directory = _native.store_generated_sources(files, cache)
                counters = abicache.stats(cache)
                define = abicache.torch_stable_abi_target_define(2, 10)
                _native.check_isa("[]", "the probe")
                if define != "-DTORCH_TARGET_VERSION=0x020A000000000000":
                    raise AssertionError(f"stable-ABI define {define!r}")
                if not isinstance(counters.get("hits"), int):
                    raise AssertionError(f"stats without an integer `hits`: {counters!r}")
                text = Path(directory, "ops.cpp").read_text()
                if text != files[0][1]:
                    raise AssertionError(f"{directory}/ops.cpp holds {text!r}, not {files[0][1]!r}")
                with lock:
                    spellings.append(spelling)
                    stored.setdefault(r, set()).add(directory)
        except BaseException as e:  # noqa: BLE001 - reported below, with the thread
            with lock:
                errors.append(f"thread {index}: {type(e).__name__}: {e}")

    workers = [threading.Thread(target=worker, args=(i,)) for i in range(threads)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    if errors:
        fail("the threaded stress failed:\n" + "\n".join(errors))
    if len(set(spellings)) != len(spellings):
        fail(f"descriptor paths repeated: {len(spellings) - len(set(spellings))} of {len(spellings)}")
    split = {r: sorted(d) for r, d in stored.items() if len(d) != 1}
    if split:
        fail(f"one content stored into several directories: {split}")
    return {"calls": len(spellings), "threads": threads, "rounds": rounds}


def load_example(example: str, cache: str, threads: int) -> Dict[str, Any]:
    """The CPU example (``examples/cpu_muladd``) loaded by ``threads``
    threads at once (one build), and its op called."""
    import torch

    import abicache

    ext = abicache.TorchOpsExtension(
        "muladd_example",
        [os.path.join(example, "ops.cpp"), os.path.join(example, "kernel.cpp")],
        required_ops=["muladd"],
        cache_dir=cache,
    )
    barrier = threading.Barrier(threads)
    paths: List[str] = []
    errors: List[str] = []

    def worker() -> None:
        try:
            barrier.wait()
            paths.append(ext.load())
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append(f"{type(e).__name__}: {e}")

    workers = [threading.Thread(target=worker) for _ in range(threads)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    if errors:
        fail("loading the CPU example failed:\n" + "\n".join(errors))
    a = torch.arange(4, dtype=torch.float32)
    out = torch.ops.muladd_example.muladd(a, a, 1.0).tolist()
    if out != [1.0, 2.0, 5.0, 10.0]:
        fail(f"muladd(a, a, 1.0) gave {out}, not a*a+1")
    return {"torch": torch.__version__, "paths": sorted(set(paths)), "muladd": out, "builds": abicache.stats(cache)["builds"]}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--cache", required=True)
    parser.add_argument("--require-gil-disabled", action="store_true")
    parser.add_argument("--example", help="examples/cpu_muladd, loaded when torch is importable")
    parser.add_argument("--threads", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=20)
    args = parser.parse_args()

    free_threaded_build = sysconfig.get_config_var("Py_GIL_DISABLED") == 1
    import abicache  # noqa: F401 - the import whose effect on the GIL is checked

    gil_on = gil_enabled()
    if args.require_gil_disabled:
        if not free_threaded_build:
            fail(f"`{sys.executable}` is not a free-threaded build (Py_GIL_DISABLED is not 1)")
        if gil_on:
            fail("the GIL is enabled after `import abicache` (a module without `gil_used = false`, or PYTHON_GIL=1)")
    result: Dict[str, Any] = {
        "python": sys.version.split()[0],
        "free_threaded_build": free_threaded_build,
        "gil_enabled_after_import": gil_on,
        "native_module": Path(abicache._native.__file__).name,
        "stress": stress(args.cache, args.threads, args.rounds),
    }
    try:
        import torch  # noqa: F401
    except ImportError as e:
        result["example"] = f"not loaded: torch is not importable here ({e})"
    else:
        if args.example:
            result["example"] = load_example(args.example, args.cache, 4)
    if args.require_gil_disabled and gil_enabled():
        fail("the GIL was enabled during the run (an extension imported on the way needs it)")
    print("RESULT " + json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
