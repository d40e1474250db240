"""``abicache.tvm_ffi.load`` / ``load_inline`` against TVM-FFI's own
``tvm_ffi.cpp.load`` / ``load_inline``: real builds with the real compiler,
TVM-FFI's own example function (its ``load_inline`` docstring's
``add_one_cpu``), results compared with TVM-FFI's build, the key's fields
(TVM-FFI ABI, no torch, Python-agnostic; torch when a torch header is
included), and a warm hit in a fresh process with 0 compiles."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any, Dict

import pytest

tvm_ffi = pytest.importorskip("tvm_ffi", reason="apache-tvm-ffi is not installed: pip install -r scripts/requirements-dev.txt")
torch = pytest.importorskip("torch")

import abicache  # noqa: E402
import abicache.tvm_ffi  # noqa: E402
import tvm_ffi.cpp  # noqa: E402
from _util import REPO, run_python  # noqa: E402

# TVM-FFI's example for `load_inline` (tvm_ffi/cpp/extension.py, the docstring).
ADD_ONE_CPU = textwrap.dedent(
    """
    void add_one_cpu(tvm::ffi::TensorView x, tvm::ffi::TensorView y) {
      // implementation of a library function
      TVM_FFI_ICHECK(x.ndim() == 1) << "x must be a 1D tensor";
      DLDataType f32_dtype{kDLFloat, 32, 1};
      TVM_FFI_ICHECK(x.dtype() == f32_dtype) << "x must be a float tensor";
      TVM_FFI_ICHECK(y.ndim() == 1) << "y must be a 1D tensor";
      TVM_FFI_ICHECK(y.dtype() == f32_dtype) << "y must be a float tensor";
      TVM_FFI_ICHECK(x.size(0) == y.size(0)) << "x and y must have the same shape";
      for (int i = 0; i < x.size(0); ++i) {
        static_cast<float*>(y.data_ptr())[i] = static_cast<float*>(x.data_ptr())[i] + 1;
      }
    }
    """
)

# The same as a file for `load` (its docstring's my_ops.cpp), which exports
# the function itself.
MY_OPS_CPP = (
    "#include <tvm/ffi/container/tensor.h>\n"
    "#include <tvm/ffi/dtype.h>\n"
    "#include <tvm/ffi/error.h>\n"
    "#include <tvm/ffi/extra/c_env_api.h>\n"
    "#include <tvm/ffi/function.h>\n" + ADD_ONE_CPU + "\nTVM_FFI_DLL_EXPORT_TYPED_FUNC(add_one_cpu, add_one_cpu);\n"
)


@pytest.fixture(autouse=True)
def ninja_on_path(monkeypatch: pytest.MonkeyPatch) -> None:
    """TVM-FFI's own builds run `ninja` from PATH: the venv's (the ninja pip
    package), which a venv's python does not put on PATH by itself."""
    if shutil.which("ninja") is None:
        import ninja

        monkeypatch.setenv("PATH", ninja.BIN_DIR + os.pathsep + os.environ.get("PATH", ""))


def _add_one(mod: Any) -> list:
    x = torch.tensor([1, 2, 3, 4, 5], dtype=torch.float32)
    y = torch.empty_like(x)
    mod.add_one_cpu(x, y)
    return y.tolist()


def _tvm_ffi_extension(name: str, sources: list, cache_dir: Path) -> Any:
    # The extension the drop-ins key, for its payload (same spec as theirs).
    ext = abicache.TorchOpsExtension(name, sources, namespace=name, cache_dir=cache_dir)
    ext._as_tvm_ffi(True)
    return ext


def _fields(payload: list) -> Dict[str, list]:
    out: Dict[str, list] = {}
    for line in payload:
        field, _, value = line.partition("=")
        out.setdefault(field, []).append(value)
    return out


def test_generated_sources_are_tvm_ffis_own() -> None:
    from tvm_ffi.cpp import extension

    functions = {"add_one_cpu": 'adds "one"\n\tto x', "other": ""}
    assert abicache.tvm_ffi.decorated_source(ADD_ONE_CPU, functions) == extension._decorate_with_tvm_ffi(
        ADD_ONE_CPU, functions
    )
    assert abicache.tvm_ffi.decorated_source("", {}) == extension._decorate_with_tvm_ffi("", {})


def test_load_inline_round_trips_like_tvm_ffi_and_hits_warm_in_a_fresh_process(cache_dir: Path, tmp_path: Path) -> None:
    own = tvm_ffi.cpp.load_inline(
        name="hello", cpp_sources=ADD_ONE_CPU, functions="add_one_cpu", build_directory=str(tmp_path / "own")
    )
    before = abicache.stats(cache_dir)
    mod = abicache.tvm_ffi.load_inline(name="hello", cpp_sources=ADD_ONE_CPU, functions="add_one_cpu", cache_dir=cache_dir)
    after = abicache.stats(cache_dir)
    assert isinstance(mod, tvm_ffi.Module)
    assert _add_one(mod) == _add_one(own) == [2.0, 3.0, 4.0, 5.0, 6.0]
    assert after["builds"] == before["builds"] + 1
    # Again in this process: the same module, nothing built.
    assert abicache.tvm_ffi.load_inline(name="hello", cpp_sources=ADD_ONE_CPU, functions="add_one_cpu", cache_dir=cache_dir) is mod
    got = run_python(
        """
        import abicache.tvm_ffi
        mod = abicache.tvm_ffi.load_inline(name="hello", cpp_sources=ARGS, functions="add_one_cpu", cache_dir=CACHE)
        x = torch.tensor([1.0, 2.0, 3.0]); y = torch.empty_like(x)
        mod.add_one_cpu(x, y)
        emit({"y": y.tolist(), "type": type(mod).__name__})
        """,
        cache_dir,
        args=ADD_ONE_CPU,
    )
    final = abicache.stats(cache_dir)
    assert got == {"y": [2.0, 3.0, 4.0], "type": "Module"}
    assert final["builds"] == after["builds"], "the fresh process compiled instead of hitting"
    assert final["hits"] == after["hits"] + 1


def test_load_round_trips_a_source_file_like_tvm_ffi(cache_dir: Path, tmp_path: Path) -> None:
    src = tmp_path / "my_ops.cpp"
    src.write_text(MY_OPS_CPP)
    own = tvm_ffi.cpp.load(name="my_ops", sources=str(src), build_directory=str(tmp_path / "own"))
    mod = abicache.tvm_ffi.load(name="my_ops", sources=str(src), cache_dir=cache_dir, build_directory=str(tmp_path / "b"))
    assert isinstance(mod, tvm_ffi.Module)
    assert _add_one(mod) == _add_one(own) == [2.0, 3.0, 4.0, 5.0, 6.0]
    # `build_directory` holds a copy of the entry under TVM-FFI's name.
    assert (tmp_path / "b" / "my_ops.so").is_file()


def test_a_tvm_ffi_module_is_keyed_by_the_tvm_ffi_abi_without_torch_or_python(cache_dir: Path, tmp_path: Path) -> None:
    src = tmp_path / "plain.cpp"
    src.write_text(MY_OPS_CPP)
    fields = _fields(_tvm_ffi_extension("plain", [str(src)], cache_dir).payload)
    from abicache import _env
    from tvm_ffi import libinfo

    header = Path(libinfo.find_include_path()) / "tvm" / "ffi" / "c_api.h"
    assert fields["tvm_ffi_abi"] == [_env.tvm_ffi_abi(str(header))]
    assert fields["tvm_ffi_abi"][0].startswith("0."), "TVM-FFI 0.X: the ABI is 0.X"
    assert fields["python_abi"] == ["agnostic"]
    for torch_field in ("torch", "torch_abi", "torch_cuda", "cxx11_abi"):
        assert torch_field not in fields, f"{torch_field} in a key without torch headers: {fields}"


def test_a_tvm_ffi_source_that_includes_torch_extension_h_is_keyed_with_torch(cache_dir: Path, tmp_path: Path) -> None:
    src = tmp_path / "with_torch.cpp"
    src.write_text("#include <torch/extension.h>\n" + MY_OPS_CPP)
    fields = _fields(_tvm_ffi_extension("with_torch", [str(src)], cache_dir).payload)
    torch_only = abicache.TorchOpsExtension("with_torch", [str(src)], cache_dir=cache_dir).payload
    torch_fields = _fields(torch_only)
    # torch's rules, as for a torch extension: the CPU cache version, the
    # C++ ABI, and (torch/extension.h pulls in Python and pybind11) the Python ABI.
    assert fields["torch"] == torch_fields["torch"]
    assert fields["cxx11_abi"] == torch_fields["cxx11_abi"]
    assert fields["python_abi"] == torch_fields["python_abi"] != ["agnostic"]
    assert "tvm_ffi_abi" in fields and "tvm_ffi_abi" not in torch_fields


def test_unsupported_arguments_are_refused_naming_what_to_use(cache_dir: Path) -> None:
    with pytest.raises(abicache.Error, match="tvm_ffi.cpp directly"):
        abicache.tvm_ffi.load_inline(name="h", cpp_sources=ADD_ONE_CPU, backend="hip", cache_dir=cache_dir)
    with pytest.raises(abicache.Error, match="embed_cubin"):
        abicache.tvm_ffi.load_inline(name="h", cpp_sources=ADD_ONE_CPU, embed_cubin={"k": b"x"}, cache_dir=cache_dir)
    with pytest.raises(ValueError, match="sources must be provided"):
        abicache.tvm_ffi.load(name="h", cache_dir=cache_dir)


# A second function any Python can call without tensors (the second venv has
# neither torch nor numpy).
ADD_INTS = "int64_t add_ints(int64_t a, int64_t b) { return a + b; }\n"


def second_python() -> Path:
    """Python 3.12 with apache-tvm-ffi and no torch (scripts/setup-tvm-ffi-venv.sh,
    made once per machine under a stamp)."""
    out = subprocess.run(
        [str(REPO / "scripts" / "setup-tvm-ffi-venv.sh")], capture_output=True, text=True, timeout=900
    )
    assert out.returncode == 0, out.stderr
    return Path(out.stdout.strip().splitlines()[-1])


def test_another_python_without_torch_hits_the_same_entry_with_zero_compiles(cache_dir: Path, tmp_path: Path) -> None:
    mod = abicache.tvm_ffi.load_inline(
        name="hello_ints", cpp_sources=ADD_ONE_CPU + ADD_INTS, functions=["add_one_cpu", "add_ints"], cache_dir=cache_dir
    )
    assert mod.add_ints(2, 3) == 5
    python = second_python()
    # This checkout's abicache (an abi3 package) and nothing else from this venv.
    shelf = tmp_path / "shelf"
    shelf.mkdir()
    (shelf / "abicache").symlink_to(Path(abicache.__file__).parent, target_is_directory=True)
    before = abicache.stats(cache_dir)
    code = textwrap.dedent(
        """
        import json, sys
        import abicache.tvm_ffi
        try:
            import torch
            has_torch = True
        except ImportError:
            has_torch = False
        mod = abicache.tvm_ffi.load_inline(name="hello_ints", cpp_sources=sys.argv[1], functions=["add_one_cpu", "add_ints"],
                                           cache_dir=sys.argv[2])
        print("RESULT " + json.dumps({"python": sys.version_info[:2], "torch": has_torch, "sum": mod.add_ints(20, 22)}))
        """
    )
    proc = subprocess.run(
        [str(python), "-c", code, ADD_ONE_CPU + ADD_INTS, str(cache_dir)],
        capture_output=True, text=True, timeout=600, env=dict(os.environ, PYTHONPATH=str(shelf)),
    )
    lines = [line for line in proc.stdout.splitlines() if line.startswith("RESULT ")]
    assert lines, proc.stdout + proc.stderr
    got = json.loads(lines[-1][len("RESULT "):])
    after = abicache.stats(cache_dir)
    assert got["python"] != list(sys.version_info[:2]), "the second venv must be another Python release"
    assert got == {"python": got["python"], "torch": False, "sum": 42}
    assert after["builds"] == before["builds"], f"Python {got['python']} compiled instead of reusing the entry:\n{proc.stderr}"
    assert after["hits"] == before["hits"] + 1
    assert after["entries"] == before["entries"]


def test_a_cuda_load_inline_compiles_with_the_pip_nvcc_and_loads_without_a_gpu(
    cache_dir: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # Build and load only: no CUDA function is called (no GPU here).
    cuda = textwrap.dedent(
        """
        __global__ void AddOneKernel(float* x, float* y, int n) {
          int idx = blockIdx.x * blockDim.x + threadIdx.x;
          if (idx < n) y[idx] = x[idx] + 1;
        }
        void add_one_cuda(tvm::ffi::TensorView x, tvm::ffi::TensorView y) {
          int64_t n = x.size(0);
          cudaStream_t stream =
              static_cast<cudaStream_t>(TVMFFIEnvGetStream(x.device().device_type, x.device().device_id));
          AddOneKernel<<<(n + 255) / 256, 256, 0, stream>>>(static_cast<float*>(x.data_ptr()),
                                                            static_cast<float*>(y.data_ptr()), n);
        }
        """
    )
    monkeypatch.setenv("TVM_FFI_CUDA_ARCH_LIST", "9.0")
    before = abicache.stats(cache_dir)
    mod = abicache.tvm_ffi.load_inline(name="add_one_cuda", cuda_sources=cuda, functions="add_one_cuda", cache_dir=cache_dir)
    assert isinstance(mod, tvm_ffi.Module)
    assert isinstance(mod["add_one_cuda"], tvm_ffi.Function)
    assert abicache.stats(cache_dir)["builds"] == before["builds"] + 1
    files = dict(abicache.tvm_ffi.inline_files(None, cuda, "add_one_cuda"))
    assert list(files) == ["cuda.cu"] and "TVM_FFI_DLL_EXPORT_TYPED_FUNC(add_one_cuda" in files["cuda.cu"]
    # Keyed as a torch CUDA extension is for its CUDA fields, without torch.
    (tmp_path / "cuda.cu").write_text(files["cuda.cu"])
    ext = abicache.TorchOpsExtension("add_one_cuda", [str(tmp_path / "cuda.cu")], cuda_archs="9.0", cache_dir=cache_dir)
    ext._as_tvm_ffi(True)
    fields = _fields(ext.payload)
    assert fields["cuda_archs"] == ["-gencode=arch=compute_90,code=sm_90"]
    assert len(fields["nvcc"]) == 1 and fields["python_abi"] == ["agnostic"]
    assert "torch" not in fields and "torch_cuda" not in fields


def test_a_module_keyed_without_torch_that_links_libtorch_is_refused_by_the_audit(cache_dir: Path) -> None:
    torch_lib = Path(torch.__file__).parent / "lib"
    with pytest.raises(abicache.Error, match="keyed without torch.*depends on libtorch") as refused:
        abicache.tvm_ffi.load_inline(
            name="links_torch",
            cpp_sources=ADD_INTS,
            functions="add_ints",
            extra_ldflags=[f"-L{torch_lib}", "-Wl,--no-as-needed", "-lc10"],
            cache_dir=cache_dir,
        )
    assert "libc10.so" in str(refused.value)
