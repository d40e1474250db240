"""Each example builds, loads and computes; a second load compiles nothing."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch

import abicache
from _util import EXAMPLES, example_spec, run_python
from skip_report import skip_for_hardware


def test_cpu_example_builds_loads_and_computes(cpu_loaded: str) -> None:
    a, b = torch.arange(6, dtype=torch.float32), torch.full((6,), 2.0)
    out = torch.ops.muladd_example.muladd(a, b, 0.5)
    torch.testing.assert_close(out, a * b + 0.5)
    assert Path(cpu_loaded).is_file()


def test_stable_example_builds_loads_and_computes(stable_loaded: str) -> None:
    a = torch.linspace(-1, 1, 7)
    torch.testing.assert_close(torch.ops.stable_scale.scale_shift(a, 3.0, -1.0), a * 3.0 - 1.0)


def test_cuda_example_loads_and_registers_ops(cache_dir: Path) -> None:
    ext = abicache.TorchOpsExtension(**example_spec("cuda"), cache_dir=cache_dir)
    path = ext.load()
    assert Path(path).is_file()
    assert hasattr(torch.ops.cuda_axpy, "axpy")
    if not torch.cuda.is_available():
        skip_for_hardware("no CUDA GPU visible: cuda_axpy was built, loaded and its op registered, but calling it needs a GPU")
    x = torch.arange(1024, dtype=torch.float32, device="cuda")
    y = torch.ones_like(x)
    torch.testing.assert_close(torch.ops.cuda_axpy.axpy(2.0, x, y), 2.0 * x + y)


def test_loading_twice_in_one_process_is_a_no_op(cache_dir: Path, cpu_loaded: str) -> None:
    before = abicache.stats(cache_dir)
    again = abicache.TorchOpsExtension(**example_spec("cpu"), cache_dir=cache_dir).load()
    assert again == cpu_loaded
    after = abicache.stats(cache_dir)
    assert (after["hits"], after["misses"], after["builds"]) == (before["hits"], before["misses"], before["builds"])


def test_second_process_compiles_nothing(cache_dir: Path, cpu_loaded: str) -> None:
    before = abicache.stats(cache_dir)
    got = run_python(
        """
        ext = abicache.TorchOpsExtension(**ARGS, cache_dir=CACHE)
        path = ext.load()
        a = torch.ones(4)
        emit({"path": path, "out": torch.ops.muladd_example.muladd(a, a, 1.0).tolist()})
        """,
        cache_dir,
        args=example_spec("cpu"),
    )
    after = abicache.stats(cache_dir)
    assert got == {"path": cpu_loaded, "out": [2.0] * 4}
    assert after["builds"] == before["builds"], "a second process compiled"
    assert after["hits"] == before["hits"] + 1
    assert after["misses"] == before["misses"]


def test_key_and_payload_describe_the_cpu_example(cache_dir: Path) -> None:
    ext = abicache.TorchOpsExtension(**example_spec("cpu"), cache_dir=cache_dir)
    payload = ext.payload
    assert payload[0].startswith("format=")
    assert "python_abi=agnostic" in payload
    assert f"torch={torch.__version__.split('+')[0]}" in payload
    # Paths are relative to the sources' common directory: the key survives a move.
    assert "source=ops.cpp" in payload and "source=kernel.cpp" in payload
    assert len(ext.key) == 32


def test_moved_checkout_keeps_the_key(cache_dir: Path, tmp_path: Path) -> None:
    moved = tmp_path / "elsewhere"
    shutil.copytree(Path(example_spec("cpu")["sources"][0]).parent, moved)
    spec = example_spec("cpu")
    here = abicache.TorchOpsExtension(**spec, cache_dir=cache_dir)
    spec["sources"] = [str(moved / Path(s).name) for s in spec["sources"]]
    there = abicache.TorchOpsExtension(**spec, cache_dir=cache_dir)
    assert here.key == there.key


def test_the_demo_loads_warm_without_compiling_and_measures_its_floor(cache_dir: Path, cpu_loaded: str) -> None:
    # examples/demo.py as scripts/demo.sh runs it, in fresh processes: a warm
    # load of the library this session built, then the floor, the same file
    # loaded by torch.ops.load_library; each checks the op's result itself.
    env = dict(os.environ, ABICACHE_DIR=str(cache_dir))
    demo = [sys.executable, str(EXAMPLES / "demo.py"), "--porcelain"]
    before = abicache.stats(cache_dir)
    warm = subprocess.run(demo, env=env, capture_output=True, text=True, timeout=600)
    assert warm.returncode == 0, warm.stderr
    ms, how, path = warm.stdout.strip().split("\t")
    assert (path, how) in {(cpu_loaded, "native path"), (cpu_loaded, "warm-load record")}, warm.stdout
    assert float(ms) > 0
    assert abicache.stats(cache_dir)["builds"] == before["builds"], "the demo's warm load compiled"
    floor = subprocess.run(demo + ["--floor", path], env=env, capture_output=True, text=True, timeout=600)
    assert floor.returncode == 0, floor.stderr
    ms, how, floor_path = floor.stdout.strip().split("\t")
    assert (how, floor_path) == ("torch.ops.load_library", path) and float(ms) > 0
