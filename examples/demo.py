"""Loads the CPU example through abicache and runs its op.

Run in fresh processes by scripts/demo.sh: the first run builds the
extension (cold), the later ones load it from the cache (warm). Each line
says whether the load was answered from the warm-load record or took the
native path.
"""

import pathlib
import sys
import time
import warnings

warnings.filterwarnings("ignore")  # torch's NumPy notice on a venv without NumPy

started = time.perf_counter()
import torch  # noqa: E402

imported = time.perf_counter()
import abicache  # noqa: E402

here = pathlib.Path(__file__).resolve().parent / "cpu_muladd"
ext = abicache.TorchOpsExtension(
    "muladd_example",
    [here / "ops.cpp", here / "kernel.cpp"],
    required_ops=["muladd"],
)
path = ext.load()
loaded = time.perf_counter()

a = torch.arange(4.0)
result = torch.ops.muladd_example.muladd(a, a, 1.0).tolist()
assert result == [1.0, 2.0, 5.0, 10.0], result
label = sys.argv[1] if len(sys.argv) > 1 else "load"
# A load answered from the warm-load record never imports the native module.
how = "warm-load record" if "abicache._native" not in sys.modules else "native path"
print(f"{label}: {1000 * (loaded - imported):8.1f} ms beyond `import torch` "
      f"({1000 * (imported - started):.0f} ms; {how})  muladd(a, a, 1.0) = {result}")
print(f"  library: {path}")
