"""Issue 48, covering entries through the Python package: with no arch list
chosen, the list is the visible GPUs', and a CUDA extension built for
``8.0 9.0`` serves an 8.6 and a 9.0 GPU with no compile, then from the warm
record without the native module.

There is no GPU on the machines these tests run on. An ``nvidia-smi`` stub,
first on ``PATH``, stands in for one: it prints the ``index, name,
compute_cap`` lines of the file ``ABICACHE_TEST_STUB_GPUS`` names (none when
it is empty), and ``ABICACHE_TEST_ONLY_NO_NVML=1`` keeps NVML out, so a
machine with a real GPU runs the same test. The CUDA example is built once
(~1 min) with the pip nvcc.
"""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path
from typing import Dict, Optional

from _util import EXAMPLES, run_python

H100 = "0, NVIDIA H100 80GB HBM3, 9.0"
A10 = "0, NVIDIA A10, 8.6"

_LOAD = """
ext = abicache.TorchOpsExtension(**ARGS)
path = ext.load()
emit({"loaded": path, "native": "abicache._native" in sys.modules})
"""


def _env(root: Path, gpus: Optional[str], **extra: str) -> Dict[str, str]:
    # A process that sees `gpus` (None: no GPU) through the stub; one
    # process at a time (the listing file is rewritten).
    stub_bin = root / "stub-bin"
    listing = root / "stub-gpus"
    if not stub_bin.exists():
        stub_bin.mkdir()
        stub = stub_bin / "nvidia-smi"
        stub.write_text(
            '#!/bin/sh\nif [ -s "$ABICACHE_TEST_STUB_GPUS" ]; then cat "$ABICACHE_TEST_STUB_GPUS"; exit 0; fi\n'
            'echo "NVIDIA-SMI has failed: no NVIDIA driver" >&2\nexit 9\n'
        )
        stub.chmod(0o755)
    listing.write_text(gpus + "\n" if gpus else "")
    env = {
        "PATH": f"{stub_bin}:{os.environ['PATH']}",
        "ABICACHE_TEST_STUB_GPUS": str(listing),
        "ABICACHE_TEST_ONLY_NO_NVML": "1",
    }
    env.update(extra)
    return env


def test_an_8_0_9_0_entry_serves_stubbed_8_6_and_9_0_gpus_then_from_the_warm_record(tmp_path: Path) -> None:
    for var in ("TORCH_CUDA_ARCH_LIST", "ABICACHE_READONLY_DIRS", "ABICACHE_REBUILD", "ABICACHE_GPU_CHECK",
                "CUDA_VISIBLE_DEVICES"):
        os.environ.pop(var, None)
    src = tmp_path / "src"
    shutil.copytree(EXAMPLES / "cuda_axpy", src)
    cache = tmp_path / "cache"
    # No `cuda_archs`: the arch list is TORCH_CUDA_ARCH_LIST's, else the GPUs'.
    args = dict(
        name="cuda_axpy",
        sources=[str(src / "ops.cpp"), str(src / "axpy_kernel.cu")],
        required_ops=["axpy"],
        cache_dir=str(cache),
    )
    built = run_python(_LOAD, cache, args, env=_env(tmp_path, None, TORCH_CUDA_ARCH_LIST="8.0 9.0"))
    # Past the racy window a native hit writes the warm record.
    time.sleep(2.2)
    covered = run_python(_LOAD, cache, args, env=_env(tmp_path, A10))
    assert covered == {"loaded": built["loaded"], "native": True}, covered
    warm = run_python(_LOAD, cache, args, env=_env(tmp_path, A10))
    assert warm == {"loaded": built["loaded"], "native": False}, warm
    h100 = run_python(_LOAD, cache, args, env=_env(tmp_path, H100))
    assert h100["loaded"] == built["loaded"], h100
    # One build in all: every load after it compiled nothing.
    stats = run_python("emit(abicache.stats(ARGS['cache_dir']))", cache, args, env=_env(tmp_path, None))
    assert stats["builds"] == 1, stats
