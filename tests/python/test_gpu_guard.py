"""Issue 48: a CUDA library no visible GPU can run is refused before it is
loaded, on every Python load path, with the GPU and the fix; it loads where
a GPU can run it, and where there is no GPU.

There is no GPU on the machines these tests run on. An ``nvidia-smi`` stub,
first on ``PATH``, stands in for one: it prints the GPUs listed in the file
``ABICACHE_TEST_STUB_GPUS`` names (``index, name, compute_cap`` lines), or
fails as ``nvidia-smi`` does without a driver when that file is empty; and
``ABICACHE_TEST_ONLY_NO_NVML=1`` keeps NVML out, so a machine with a real GPU
runs the same tests. One stub directory serves every process (``PATH`` is
part of what a CUDA warm-load record checks).

The CUDA example is built for ``8.0`` once per module (~1 min) and shared.
"""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path
from typing import Any, Dict, Iterator, Optional

import pytest

from _util import EXAMPLES, run_python

H100 = "0, NVIDIA H100 80GB HBM3, 9.0"
A10 = "0, NVIDIA A10, 8.6"


class Gpus:
    """The stub's state: a directory to put first on ``PATH`` and the file
    whose lines it prints."""

    def __init__(self, root: Path) -> None:
        self.bin = root / "stub-bin"
        self.bin.mkdir()
        self.listing = root / "stub-gpus"
        self.listing.write_text("")
        stub = self.bin / "nvidia-smi"
        stub.write_text(
            '#!/bin/sh\nif [ -s "$ABICACHE_TEST_STUB_GPUS" ]; then cat "$ABICACHE_TEST_STUB_GPUS"; exit 0; fi\n'
            'echo "NVIDIA-SMI has failed: no NVIDIA driver" >&2\nexit 9\n'
        )
        stub.chmod(0o755)

    def env(self, gpus: Optional[str], **extra: str) -> Dict[str, str]:
        # The environment of a process that sees `gpus` (None: no GPU). The
        # listing file is rewritten, so run one process at a time.
        self.listing.write_text(gpus + "\n" if gpus else "")
        env = {
            "PATH": f"{self.bin}:{os.environ['PATH']}",
            "ABICACHE_TEST_STUB_GPUS": str(self.listing),
            "ABICACHE_TEST_ONLY_NO_NVML": "1",
            "TORCH_CUDA_ARCH_LIST": "8.0",
        }
        env.update(extra)
        return env


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Dict[str, Any]]:
    # The CUDA example for `8.0`, built once with no GPU visible (no check),
    # through `TorchOpsExtension.load()`, which also writes the warm record.
    root = tmp_path_factory.mktemp("gpu-guard")
    for var in ("ABICACHE_READONLY_DIRS", "ABICACHE_REBUILD", "ABICACHE_GPU_CHECK", "CUDA_VISIBLE_DEVICES"):
        os.environ.pop(var, None)
    gpus = Gpus(root)
    src = root / "src"
    shutil.copytree(EXAMPLES / "cuda_axpy", src)
    cache = root / "cache"
    args = dict(
        name="cuda_axpy",
        sources=[str(src / "ops.cpp"), str(src / "axpy_kernel.cu")],
        required_ops=["axpy"],
        cuda_archs="8.0",
        cache_dir=str(cache),
    )
    out = run_python(
        """
        import abicache._native as native
        ext = abicache.TorchOpsExtension(**ARGS)
        path = ext.load()
        emit({"path": path, "schema": str(torch.ops.cuda_axpy.axpy.default._schema)})
        """,
        cache,
        args,
        env=gpus.env(None),
    )
    assert out["schema"].startswith("cuda_axpy::axpy("), out
    # Past the racy window a native hit writes the warm record; then the
    # record answers (no GPU: no check).
    time.sleep(2.2)
    hit = run_python(_LOAD, cache, args, env=gpus.env(None))
    assert hit == {"loaded": out["path"], "native": True}, hit
    warm = run_python(_LOAD, cache, args, env=gpus.env(None))
    assert warm == {"loaded": out["path"], "native": False}, warm
    yield {"gpus": gpus, "args": args, "cache": cache, "path": out["path"], "root": root}


_LOAD = """
ext = abicache.TorchOpsExtension(**ARGS)
try:
    path = ext.load()
    emit({"loaded": path, "native": "abicache._native" in sys.modules})
except abicache.AbiError as e:
    emit({"refused": str(e), "native": "abicache._native" in sys.modules})
"""


def _assert_refused_on_h100(out: Dict[str, Any]) -> None:
    message = out.get("refused")
    assert message, out
    for part in (
        "cuda_axpy.so has device code for sm_80",
        "GPU 0 (NVIDIA H100 80GB HBM3, 9.0) can run none of it",
        'set TORCH_CUDA_ARCH_LIST="9.0"',
        "then rebuild",
    ):
        assert part in message, (part, message)


def test_torch_ops_extension_load_refuses_a_library_for_8_0_on_a_stubbed_9_0_gpu(built: Dict[str, Any]) -> None:
    # No GPU here: the stub stands in for an H100. The warm record answers
    # nothing (the Python guard refuses), and the native path raises.
    gpus = built["gpus"]
    out = run_python(_LOAD, built["cache"], built["args"], env=gpus.env(H100))
    _assert_refused_on_h100(out)
    assert out["native"], "the refusal's wording is the native path's"


def test_the_warm_record_path_serves_8_6_without_the_native_module_and_refuses_9_0(built: Dict[str, Any]) -> None:
    # No GPU here: the stub stands in for an A10, then an H100. On the A10
    # the warm-load record answers (sm_80 SASS runs on 8.6), with no native
    # module loaded; on the H100 the record's check leaves it to the native
    # path, which refuses it.
    gpus = built["gpus"]
    served = run_python(_LOAD, built["cache"], built["args"], env=gpus.env(A10))
    assert served == {"loaded": built["path"], "native": False}, served
    refused = run_python(_LOAD, built["cache"], built["args"], env=gpus.env(H100))
    _assert_refused_on_h100(refused)
    # The guard off: the record answers again, on the H100.
    waived = run_python(_LOAD, built["cache"], built["args"], env=gpus.env(H100, ABICACHE_GPU_CHECK="0"))
    assert waived == {"loaded": built["path"], "native": False}, waived
    # No GPU at all: no check, the record answers.
    none = run_python(_LOAD, built["cache"], built["args"], env=gpus.env(None))
    assert none == {"loaded": built["path"], "native": False}, none


def test_the_warm_record_carries_the_device_images(built: Dict[str, Any]) -> None:
    import json

    records = list((built["cache"] / "v1" / "warm").iterdir())
    images = [json.loads(r.read_text()).get("device_images") for r in records]
    assert ["sm_80"] in images, images


def test_a_layer_hit_is_refused_on_a_stubbed_9_0_gpu_and_served_on_8_6(built: Dict[str, Any], tmp_path: Path) -> None:
    # No GPU here: the stub stands in for the GPU. The 8.0 cache is a
    # read-only layer of an empty cache: its entry is found there, and the
    # guard refuses it on an H100 as it would the own cache's.
    gpus = built["gpus"]
    args = dict(built["args"], cache_dir=str(tmp_path / "own"))
    layer = {"ABICACHE_READONLY_DIRS": str(built["cache"])}
    refused = run_python(_LOAD, tmp_path / "own", args, env=gpus.env(H100, **layer))
    _assert_refused_on_h100(refused)
    served = run_python(_LOAD, tmp_path / "own", args, env=gpus.env(A10, **layer))
    assert served.get("loaded", "").startswith(str(built["cache"])), served


def test_the_drop_in_load_refuses_on_a_stubbed_9_0_gpu_and_loads_on_8_6(built: Dict[str, Any]) -> None:
    # No GPU here: the stub stands in for the GPU. `abicache.load` with the
    # arch list from `TORCH_CUDA_ARCH_LIST=8.0` (the stub's env sets it),
    # built with no GPU visible, then loaded on an H100 and an A10.
    gpus = built["gpus"]
    src = built["root"] / "src"
    code = """
    try:
        path = abicache.load("cuda_axpy_dropin", ARGS["sources"], is_python_module=False, cache_dir=ARGS["cache_dir"])
        emit({"loaded": path})
    except abicache.AbiError as e:
        emit({"refused": str(e)})
    """
    args = {"sources": [str(src / "ops.cpp"), str(src / "axpy_kernel.cu")], "cache_dir": str(built["cache"])}
    first = run_python(code, built["cache"], args, env=gpus.env(None))
    assert "loaded" in first, first
    refused = run_python(code, built["cache"], args, env=gpus.env(H100))
    message = refused.get("refused", "")
    assert "cuda_axpy_dropin.so has device code for sm_80" in message, refused
    assert "GPU 0 (NVIDIA H100 80GB HBM3, 9.0) can run none of it" in message, refused
    served = run_python(code, built["cache"], args, env=gpus.env(A10))
    assert served == first, served


def test_under_interception_the_refusal_reaches_the_program(built: Dict[str, Any]) -> None:
    # No GPU here: the stub stands in for an H100. torch's own `load`,
    # intercepted, raises the guard's AbiError; it is not handed to torch's
    # build (which would build the same arch list and fail at the first
    # kernel launch).
    gpus = built["gpus"]
    src = built["root"] / "src"
    code = """
    import torch.utils.cpp_extension as cpp
    try:
        path = cpp.load("cuda_axpy_dropin", ARGS["sources"], is_python_module=False)
        emit({"loaded": path})
    except Exception as e:
        emit({"error": type(e).__name__, "message": str(e)})
    """
    args = {"sources": [str(src / "ops.cpp"), str(src / "axpy_kernel.cu")]}
    env = gpus.env(H100, ABICACHE_INTERCEPT="1", ABICACHE_DIR=str(built["cache"]))
    out = run_python(code, built["cache"], args, env=env)
    assert out.get("error") == "AbiError", out
    assert "GPU 0 (NVIDIA H100 80GB HBM3, 9.0) can run none of it" in out["message"], out


@pytest.mark.parametrize(
    "images, gpu, serves",
    [
        (["sm_80"], (8, 0), True),
        (["sm_80"], (8, 6), True),
        (["sm_80"], (9, 0), False),
        (["sm_86"], (8, 0), False),
        (["sm_90a"], (9, 0), True),
        (["sm_90a"], (10, 0), False),
        (["compute_90"], (9, 0), True),
        (["compute_90"], (12, 0), True),
        (["compute_90"], (8, 6), False),
        (["sm_100f"], (10, 3), True),
        (["sm_100f"], (12, 0), False),
        (["compute_100f"], (10, 3), True),
        (["compute_100f"], (12, 0), False),
        (["sm_80", "compute_80"], (9, 0), True),
    ],
)
def test_the_warm_paths_rules_are_cudas(images: list, gpu: tuple, serves: bool) -> None:
    # The warm path's restatement of `abicache_fatbin::runs_on` (the same
    # table as that crate's tests).
    from abicache import _gpu

    assert _gpu.serves(images, gpu) is serves


def test_cuda_visible_devices_is_read_as_the_native_guard_reads_it() -> None:
    from abicache import _gpu

    gpus = _gpu.parse_nvidia_smi("0, NVIDIA A100, PCIe, 8.0, GPU-aaaa\n1, NVIDIA H100, 9.0\nnot a gpu\n")
    assert gpus == [(0, "NVIDIA A100, PCIe", (8, 0), "GPU-aaaa"), (1, "NVIDIA H100", (9, 0), "")]
    assert _gpu.visible_among(gpus, None) == gpus
    assert _gpu.visible_among(gpus, "") == []
    assert _gpu.visible_among(gpus, "1") == [gpus[1]]
    assert _gpu.visible_among(gpus, "GPU-aa,1") == gpus
    assert _gpu.visible_among(gpus, "0,7,1") == [gpus[0]]
    assert _gpu.visible_among(gpus, "MIG-x") == gpus
