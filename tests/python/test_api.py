"""The rest of the Python API: threads, pybind11 modules through
``abicache.load``, errors, progress, ``ABICACHE_REBUILD`` and the stubs."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Optional

import pytest
import torch

import abicache
from abicache import _env
from _util import example_spec, run_python

TINY = 'extern "C" int abicache_{tag}_probe() {{ return {value}; }}\n'


def _tiny(tmp_path: Path, tag: str, value: int = 42) -> str:
    src = tmp_path / f"{tag}.cpp"
    src.write_text(TINY.format(tag=tag, value=value))
    return str(src)


def test_four_threads_loading_one_uncached_extension_build_once(cache_dir: Path, tmp_path: Path) -> None:
    src = _tiny(tmp_path, "threads")
    before = abicache.stats(cache_dir)
    results: list = []
    ticks = [0]
    stop = threading.Event()

    def tick() -> None:  # runs only while the builders do not hold the GIL
        while not stop.is_set():
            ticks[0] += 1
            time.sleep(0.001)

    def load() -> None:
        results.append(abicache.TorchOpsExtension("threads_probe", [src], cache_dir=cache_dir).load())

    ticker = threading.Thread(target=tick)
    ticker.start()
    threads = [threading.Thread(target=load) for _ in range(4)]
    started = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    elapsed = time.perf_counter() - started
    stop.set()
    ticker.join()
    after = abicache.stats(cache_dir)
    assert len(results) == 4 and len(set(results)) == 1
    assert after["builds"] == before["builds"] + 1
    # With the GIL held for the whole build the ticker would barely run.
    assert ticks[0] > elapsed * 100, (ticks[0], elapsed)


def test_pybind11_module_through_load_is_keyed_python_dependent(cache_dir: Path, tmp_path: Path) -> None:
    src = tmp_path / "pyb.cpp"
    src.write_text(
        "#include <pybind11/pybind11.h>\n"
        "PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) { m.def(\"add\", [](int a, int b) { return a + b; }); }\n"
    )
    module = abicache.load("pybind_probe", [str(src)], cache_dir=str(cache_dir))
    assert module.add(2, 3) == 5
    assert abicache.load("pybind_probe", [str(src)], cache_dir=str(cache_dir)) is module
    ext = abicache.TorchOpsExtension("pybind_probe", [str(src)], is_python_module=True, cache_dir=cache_dir)
    soabi = abicache.environment(False)["python_soabi"]
    assert f"python_abi={soabi}" in ext.payload
    data = ext.explanation()
    assert data["cached"] is True and data["python_abi"] == soabi


def test_load_without_python_module_returns_the_library_path(cache_dir: Path, tmp_path: Path) -> None:
    path = abicache.load("plain_probe", [_tiny(tmp_path, "plain")], cache_dir=cache_dir, is_python_module=False)
    assert isinstance(path, str) and Path(path).is_file()


def test_compiler_failure_raises_build_error_with_output_and_command(cache_dir: Path, tmp_path: Path) -> None:
    src = tmp_path / "broken.cpp"
    src.write_text("int main( { return 0; }\n")
    with pytest.raises(abicache.BuildError) as info:
        abicache.TorchOpsExtension("broken_probe", [str(src)], cache_dir=cache_dir).load()
    err = info.value
    assert isinstance(err, abicache.Error) and isinstance(err, RuntimeError)
    assert "broken.cpp" in err.command
    assert "error" in err.output
    assert "failed to compile" in str(err)


def test_missing_source_is_file_not_found(cache_dir: Path, tmp_path: Path) -> None:
    missing = tmp_path / "nowhere.cpp"
    with pytest.raises(FileNotFoundError, match="nowhere.cpp"):
        abicache.TorchOpsExtension("missing_probe", [str(missing)], cache_dir=cache_dir).load()


def test_non_stable_header_under_stable_target_is_an_abi_error(cache_dir: Path) -> None:
    spec = dict(example_spec("cpu"), torch_stable_abi_target="2.10")
    with pytest.raises(abicache.AbiError, match="`torch/library.h`.*not part of the libtorch stable ABI"):
        abicache.TorchOpsExtension(**spec, cache_dir=cache_dir).key


def test_missing_required_op_names_what_is_missing(cache_dir: Path, tmp_path: Path) -> None:
    ext = abicache.TorchOpsExtension(
        "ops_probe", [_tiny(tmp_path, "ops")], namespace="ops_probe_ns", required_ops=["first", "second"], cache_dir=cache_dir
    )
    with pytest.raises(abicache.Error, match=r"torch\.ops\.ops_probe_ns.*`first`, `second`"):
        ext.load()


OVERLOADS = """#include <torch/csrc/stable/library.h>
STABLE_TORCH_LIBRARY({ns}, m) {{
  m.def("plain(Tensor a) -> Tensor");
  m.def("named.only(Tensor a) -> Tensor");
}}
"""


def test_required_ops_are_found_with_or_without_a_default_overload(cache_dir: Path, tmp_path: Path) -> None:
    # `named` exists only as `named.only`: `hasattr(torch.ops.ns, "named")`
    # is true, so it is not missing; `absent` is. One library per namespace
    # (a namespace registered twice is torch's error, here a crash).
    def ext(ns: str, required_ops: list) -> abicache.TorchOpsExtension:
        src = tmp_path / f"{ns}.cpp"
        src.write_text(OVERLOADS.format(ns=ns))
        return abicache.TorchOpsExtension(
            ns, [str(src)], required_ops=required_ops, cache_dir=cache_dir, torch_stable_abi_target="2.10"
        )

    ext("overload_probe_ok", ["plain", "named"]).load()
    with pytest.raises(abicache.Error, match=r"overload_probe_missing` lacks `absent`; "):
        ext("overload_probe_missing", ["named", "absent", "plain"]).load()


def test_progress_callback_gets_every_build_event(cache_dir: Path, tmp_path: Path) -> None:
    events: list = []
    ext = abicache.TorchOpsExtension("progress_probe", [_tiny(tmp_path, "progress")], cache_dir=cache_dir, progress=events.append)
    ext.load()
    assert [e["kind"] for e in events] == ["started", "unit_done", "linking", "finished"]
    assert events[1]["line"].startswith("[1/1] compiled progress.cpp")
    assert set(events[0]) == {"kind", "line", "name", "total", "cached", "estimate", "memory_bound"}
    assert set(events[1]) == {"kind", "line", "done", "total", "source", "seconds"}
    assert set(events[2]) == {"kind", "line"} and set(events[3]) == {"kind", "line", "seconds"}


def test_abicache_rebuild_forces_a_build(cache_dir: Path, tmp_path: Path) -> None:
    src = _tiny(tmp_path, "rebuild")
    code = "emit(abicache.TorchOpsExtension('rebuild_probe', [ARGS], cache_dir=CACHE).load())"
    first = run_python(code, cache_dir, args=src)
    before = abicache.stats(cache_dir)
    assert run_python(code, cache_dir, args=src) == first
    assert abicache.stats(cache_dir)["builds"] == before["builds"]
    assert run_python(code, cache_dir, args=src, env={"ABICACHE_REBUILD": "1"}) == first
    assert abicache.stats(cache_dir)["builds"] == before["builds"] + 1


def test_stable_abi_target_define() -> None:
    assert abicache.torch_stable_abi_target_define(2, 10) == "-DTORCH_TARGET_VERSION=0x020A000000000000"
    assert abicache.torch_stable_abi_target_define(2, 16) == "-DTORCH_TARGET_VERSION=0x0210000000000000"
    with pytest.raises(abicache.Error):
        abicache.torch_stable_abi_target_define(2, 300)


def test_a_stable_target_is_kept_as_given_or_refused_by_type(tmp_path: Path) -> None:
    source = _tiny(tmp_path, "target")
    ext = abicache.TorchOpsExtension("target", [source], torch_stable_abi_target=(2, 10))
    assert ext._spec["torch_stable_abi_target"] == [2, 10]
    ext = abicache.TorchOpsExtension("target", [source], torch_stable_abi_target="2.10")
    assert ext._spec["torch_stable_abi_target"] == "2.10"
    for bad in [(2,), (2, 10, 0), ("2", "10"), 2.10, 2, (True, 1)]:
        with pytest.raises(TypeError, match="torch_stable_abi_target"):
            abicache.TorchOpsExtension("target", [source], torch_stable_abi_target=bad)  # type: ignore[arg-type]


def test_environment_matches_the_running_interpreter() -> None:
    import sysconfig

    env = abicache.environment(False)
    assert env["torch_version"] == torch.__version__
    assert env["python_soabi"] == sysconfig.get_config_var("SOABI")
    assert env["cxx11_abi"] is bool(torch._C._GLIBCXX_USE_CXX11_ABI)
    assert "cuda_archs" not in env  # a CPU extension never queries GPUs


def test_python_and_the_command_line_probe_this_interpreter_alike() -> None:
    """One probe file (``abicache/_probe.py``) serves the package in process and
    ``abicache key --python`` in a subprocess: the Python fields agree."""
    from abicache import _probe

    env = abicache.environment(False)
    for field in ("python_version", "python_soabi", "python_abiflags", "python_include"):
        assert env[field] == _probe.python_fields()[field], field
    probe = subprocess.run([sys.executable, "-I", "-B", _probe.__file__], capture_output=True, text=True)
    line = next(l for l in probe.stdout.splitlines() if l.startswith("ABICACHE-PROBE "))
    answer = json.loads(line[len("ABICACHE-PROBE "):])
    for field in ("python_version", "python_soabi", "python_abiflags", "python_include"):
        assert answer[field] == env[field], field
    assert answer["site_packages"] == _env.site_packages()
    assert answer["torch"]["version"] == torch.__version__


def test_cuda_rules_come_from_rust(tmp_path: Path) -> None:
    """``requires_cuda`` and the arch list are the Rust rules (`_native`), not restated in Python."""
    assert abicache.TorchOpsExtension("k", ["k.cu"]).requires_cuda is True
    assert abicache.TorchOpsExtension("k", ["k.cpp"]).requires_cuda is False
    assert abicache.TorchOpsExtension("k", ["k.cpp"], requires_cuda=True).requires_cuda is True
    code = "emit([abicache.visible_cuda_archs(), abicache.environment(True)['cuda_archs']])"
    for value, expected in (("8.0 9.0+PTX", "8.0 9.0+PTX"), ("  ", _no_list_archs())):
        got = run_python(code, tmp_path / "cache", env={"TORCH_CUDA_ARCH_LIST": value})
        assert got == [expected, expected], value


def _no_list_archs() -> Optional[str]:
    """What ``nvidia-smi`` reports here without ``TORCH_CUDA_ARCH_LIST`` (``None`` without a GPU)."""
    env = {k: v for k, v in os.environ.items() if k != "TORCH_CUDA_ARCH_LIST"}
    code = "import abicache; print(abicache.visible_cuda_archs())"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True)
    value = out.stdout.strip()
    return None if value == "None" else value


def test_stubs_match_the_native_module() -> None:
    pytest.importorskip("mypy")
    proc = subprocess.run([sys.executable, "-m", "mypy.stubtest", "abicache._native"], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr
