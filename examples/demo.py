"""Loads the CPU example through abicache and runs its op.

    python examples/demo.py [LABEL]            load through abicache; say how long it took
    python examples/demo.py --floor LIBRARY    the floor: torch.ops.load_library(LIBRARY) alone

Run in fresh processes by scripts/demo.sh: the first run builds the
extension (cold), the later ones load it from the cache (warm), and each
warm load is set beside its floor, the same library loaded by
``torch.ops.load_library`` with no cache in front of it. Both times are
measured from the end of ``import torch`` to the op being registered (for
abicache that includes ``import abicache``), and each run then calls the op
and checks its result. A line says whether the load was answered from the
warm-load record or took the native path.

``--porcelain`` (before the other arguments) prints one tab-separated line
instead, for scripts: the milliseconds, how the load was answered, and the
library's path.
"""

import pathlib
import sys
import time
import warnings

warnings.filterwarnings("ignore")  # torch's NumPy notice on a venv without NumPy

args = sys.argv[1:]
porcelain = bool(args) and args[0] == "--porcelain"
if porcelain:
    args = args[1:]
floor = bool(args) and args[0] == "--floor"
if floor and len(args) != 2:
    sys.exit("usage: demo.py [--porcelain] --floor LIBRARY (a library abicache built, e.g. from a run without --floor)")

started = time.perf_counter()
import torch  # noqa: E402

imported = time.perf_counter()
if floor:
    path = args[1]
    torch.ops.load_library(path)
    how = "torch.ops.load_library"
else:
    import abicache  # noqa: E402

    here = pathlib.Path(__file__).resolve().parent / "cpu_muladd"
    ext = abicache.TorchOpsExtension(
        "muladd_example",
        [here / "ops.cpp", here / "kernel.cpp"],
        required_ops=["muladd"],
    )
    path = ext.load()
    # A load answered from the warm-load record never imports the native module.
    how = "warm-load record" if "abicache._native" not in sys.modules else "native path"
loaded = time.perf_counter()

a = torch.arange(4.0)
result = torch.ops.muladd_example.muladd(a, a, 1.0).tolist()
assert result == [1.0, 2.0, 5.0, 10.0], result
ms = 1000 * (loaded - imported)
if porcelain:
    print(f"{ms:.3f}\t{how}\t{path}")
else:
    label = args[0] if args and not floor else ("floor" if floor else "load")
    print(f"{label}: {ms:8.1f} ms beyond `import torch` "
          f"({1000 * (imported - started):.0f} ms; {how})  muladd(a, a, 1.0) = {result}")
    print(f"  library: {path}")
