"""FlashInfer's JIT under interception (``abicache._flashinfer`` and the
``flashinfer.jit.core`` patch in ``_abicache_intercept``), against a real
flashinfer-python 0.7.4 and apache-tvm-ffi installed with ``--no-deps``
(scripts/requirements-bench-flashinfer.txt) into overlay venvs of this
interpreter's torch, with the pip ``nvcc`` and no GPU: FlashInfer is given
its architectures (``FLASHINFER_CUDA_ARCH_LIST=9.0``), and no kernel is ever
called (the test modules export a host function).

In CI: the seam is patched only under interception; a real JitSpec's
translation is FlashInfer's own command line; a spec abicache cannot take
goes to FlashInfer's ninja build with one line; an ahead-of-time module is
FlashInfer's to load (abicache is not asked); a small FlashInfer module is
built once by abicache and loaded warm by a second process with no compile.

Slow (scripts/bench.sh): FlashInfer's ``silu_and_mul`` module built once
under ``abicache run``, its library audited, then loaded warm from a second
venv with another torch release (.venv-compat) with 0 compiles; the cold
time, the warm time and FlashInfer's own warm time on its own cache printed.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any, Dict, List, Optional

import pytest

from _util import COMPAT_PYTHON, REPO, abicache_wheel

REQUIREMENTS = REPO / "scripts" / "requirements-bench-flashinfer.txt"

# A FlashInfer module as small as one can be: FlashInfer's flags, include
# paths and TVM-FFI export, one host function, no kernel.
TINY_CU = """\
#include <tvm/ffi/function.h>
#include <flashinfer/layout.cuh>

int64_t add_one(int64_t x) { return x + 1; }
TVM_FFI_DLL_EXPORT_TYPED_FUNC(add_one, add_one);
"""

_PRELUDE = """\
import json, os, sys, time
def emit(value):
    print("RESULT " + json.dumps(value), flush=True)
"""


def _torch_site(python: Path) -> str:
    out = subprocess.run([str(python), "-c", "import torch, os; print(os.path.dirname(os.path.dirname(torch.__file__)))"],
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    return out.stdout.strip()


def overlay_venv(where: Path, base_python: Path) -> Path:
    """A venv at ``where`` that sees ``base_python``'s torch (a ``.pth``),
    with FlashInfer's requirements and this checkout's abicache wheel
    installed without their dependencies. Skips when pip cannot install them
    (no network and nothing in pip's cache)."""
    subprocess.run([str(base_python), "-m", "venv", str(where)], check=True, timeout=300)
    python = where / "bin" / "python"
    site = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          capture_output=True, text=True, check=True).stdout.strip()
    (Path(site) / "_flashinfer_test_torch.pth").write_text(_torch_site(base_python) + "\n")
    pip = [str(python), "-m", "pip", "install", "--quiet", "--no-deps", "--disable-pip-version-check"]
    proc = subprocess.run([*pip, "-r", str(REQUIREMENTS)], capture_output=True, text=True, timeout=900)
    if proc.returncode != 0:
        pytest.skip(f"cannot install {REQUIREMENTS.name} (no network or pip cache?):\n{proc.stderr[-2000:]}")
    # `--ignore-installed`: the torch venv seen through the `.pth` may have its own abicache.
    subprocess.run([*pip, "--ignore-installed", str(abicache_wheel())], check=True, timeout=300)
    return python


def pip_cuda_home() -> Path:
    """The pip CUDA toolkit (``nvidia/cu13``) of this interpreter's torch venv, with ``bin/nvcc``."""
    for entry in [_torch_site(Path(sys.executable)), *sys.path]:
        for home in sorted(Path(entry).glob("nvidia/cu*")):
            if (home / "bin" / "nvcc").exists():
                return home
    pytest.skip("no pip nvcc (nvidia/cu*/bin/nvcc) next to torch: run scripts/setup-venv.sh")
    raise AssertionError  # unreachable


def link_stubs(where: Path, cuda_home: Path) -> Path:
    """What FlashInfer's own link (``-L$CUDA_HOME/lib64 -lcudart -lcuda``)
    needs and the pip toolkit lacks: ``libcudart.so`` (a link to
    ``libcudart.so.N``) and a ``libcuda.so`` stub (no driver here). Given to
    FlashInfer with ``FLASHINFER_EXTRA_LDFLAGS``; ``CXX`` adds
    ``--as-needed`` so the unused stub is not recorded as needed."""
    where.mkdir(parents=True, exist_ok=True)
    (cudart,) = sorted((cuda_home / "lib").glob("libcudart.so.*"))[:1]
    link = where / "libcudart.so"
    if not link.exists():
        link.symlink_to(cudart)
    stub_c = where / "stub.c"
    stub_c.write_text("void abicache_test_cuda_stub(void) {}\n")
    subprocess.run(["cc", "-shared", "-fPIC", "-Wl,-soname,libcuda.so.1", "-o", str(where / "libcuda.so"), str(stub_c)],
                   check=True, timeout=120)
    return where


def flashinfer_env(python: Path, tmp: Path, cache: Path, own_link: bool = False, **extra: str) -> Dict[str, str]:
    """The environment of a FlashInfer process: no GPU (its architectures
    given), the pip nvcc, FlashInfer's workspace and abicache's cache under
    ``tmp``; ``own_link``: what FlashInfer's own link needs here (``link_stubs``)."""
    cuda_home = pip_cuda_home()
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("ABICACHE_", "FLASHINFER_")) and k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env.update(
        CUDA_VISIBLE_DEVICES="",
        CUDA_HOME=str(cuda_home),
        FLASHINFER_CUDA_ARCH_LIST="9.0",
        FLASHINFER_WORKSPACE_BASE=str(tmp / "flashinfer-home"),
        ABICACHE_DIR=str(cache),
        ABICACHE_PCH="0",
        PYTHONWARNINGS="ignore",
        VIRTUAL_ENV=str(python.parents[1]),
        # The venv's own commands first; ninja (FlashInfer runs it) from the project venv.
        PATH=os.pathsep.join([str(python.parent), str(Path(sys.executable).parent), os.environ.get("PATH", "")]),
    )
    if own_link:
        env.update(FLASHINFER_EXTRA_LDFLAGS=f"-L{link_stubs(tmp / 'link-stubs', cuda_home)}", CXX="c++ -Wl,--as-needed")
    env.update(extra)
    return env


def run_snippet(python: Path, code: str, env: Dict[str, str], intercept: Optional[str] = "1") -> subprocess.CompletedProcess:
    """``code`` (after a prelude defining ``emit``) in ``python``, under
    ``abicache run`` (``--verbose`` when ``intercept == "verbose"``) unless
    ``intercept`` is ``None``."""
    argv = [str(python), "-c", _PRELUDE + textwrap.dedent(code)]
    if intercept is not None:
        argv = [str(python), "-m", "abicache", "run", *(["--verbose"] if intercept == "verbose" else []), "--", *argv]
    return subprocess.run(argv, capture_output=True, text=True, env=env, timeout=1800)


def result(proc: subprocess.CompletedProcess) -> Dict[str, Any]:
    for line in proc.stdout.splitlines():
        if line.startswith("RESULT "):
            return json.loads(line[len("RESULT "):])
    raise AssertionError(f"exited {proc.returncode} without a result\n--- stdout\n{proc.stdout}\n--- stderr\n{proc.stderr}")


def stats(python: Path, cache: Path) -> Dict[str, Any]:
    out = subprocess.run([str(python), "-c", "import abicache, json, sys; print(json.dumps(abicache.stats(sys.argv[1])))",
                          str(cache)], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


@pytest.fixture(scope="module")
def fi_python(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return overlay_venv(tmp_path_factory.mktemp("flashinfer") / "venv", Path(sys.executable))


def _tiny_spec_code(name: str, source: Path, **spec_args: str) -> str:
    # Defines `spec`: a FlashInfer JitSpec of TINY_CU, made by FlashInfer's own `gen_jit_spec`.
    extra = "".join(f", {k}={v}" for k, v in spec_args.items())
    return f"""
    from pathlib import Path
    from flashinfer.jit import core
    source = Path({str(source)!r})
    source.parent.mkdir(parents=True, exist_ok=True)
    source.write_text({TINY_CU!r})
    spec = core.gen_jit_spec({name!r}, [source]{extra})
    """


def test_interception_patches_flashinfers_build_and_load_and_nothing_else(fi_python: Path, tmp_path: Path) -> None:
    code = """
    import flashinfer.jit.core as core
    method = core.JitSpecNvcc.build_and_load
    emit({
        "patched": getattr(method, "_abicache_original", None) is core.JitSpec.build_and_load,
        "base_untouched": getattr(core.JitSpec.build_and_load, "_abicache_original", None) is None,
        "name": method.__name__,
    })
    """
    env = flashinfer_env(fi_python, tmp_path, tmp_path / "cache")
    on = result(run_snippet(fi_python, code, env))
    off = result(run_snippet(fi_python, code, env, intercept=None))
    assert on == {"patched": True, "base_untouched": True, "name": "build_and_load"}, on
    assert off["patched"] is False, off


def test_a_real_jitspec_becomes_flashinfers_own_command_line(fi_python: Path, tmp_path: Path) -> None:
    # The translation of FlashInfer's silu_and_mul spec against the command
    # FlashInfer itself reports for it (`get_compile_commands`): the same
    # words, less what abicache adds itself (and says so).
    code = """
    import shlex, sysconfig
    import tvm_ffi.libinfo
    from flashinfer.jit.activation import gen_act_and_mul_module
    from flashinfer.jit.cpp_ext import get_cuda_path
    from abicache._flashinfer import load_arguments
    spec = gen_act_and_mul_module("silu")
    (command,) = spec.get_compile_commands()
    emit({
        "args": load_arguments(spec),
        "flashinfer": shlex.split(command["command"]),
        "source": command["file"],
        "own_includes": [sysconfig.get_path("include"), get_cuda_path() + "/include",
                         tvm_ffi.libinfo.find_include_path(), tvm_ffi.libinfo.find_dlpack_include_path()],
    })
    """
    got = result(run_snippet(fi_python, code, flashinfer_env(fi_python, tmp_path, tmp_path / "cache"), intercept=None))
    args, words = got["args"], got["flashinfer"]
    assert args["name"] == "silu_and_mul"
    assert args["sources"] == [got["source"]]
    assert Path(args["fingerprint_root"], "flashinfer").is_dir()
    # FlashInfer's include directories, in its order, less Python's, CUDA's and TVM-FFI's.
    includes: List[str] = []
    rest: List[str] = []
    it = iter(words[1:])
    for word in it:
        if word in ("-I", "-isystem"):
            includes.append(next(it))
        elif word.startswith("-I"):
            includes.append(word[2:])
        elif word in ("-c", "-o"):
            next(it)
        else:
            rest.append(word)
    own = {os.path.realpath(d) for d in got["own_includes"]}
    assert args["extra_include_paths"] == [d for d in includes if os.path.realpath(d) not in own]
    assert any(d.endswith("flashinfer/data/include") for d in args["extra_include_paths"])
    # Every other nvcc word is passed, in order, except the PIC option abicache adds.
    assert args["extra_cuda_cflags"] == [w for w in rest if w != "--compiler-options=-fPIC"]
    assert "-gencode=arch=compute_90a,code=sm_90a" in args["extra_cuda_cflags"]
    assert "-fPIC" not in args["extra_cflags"] and "-O3" in args["extra_cflags"]
    assert args["extra_ldflags"] == ["-Wl,-z,defs"], "only the check that the driver is not called directly"


def test_a_spec_abicache_cannot_take_is_flashinfers_and_an_aot_module_stays_flashinfers(
    fi_python: Path, tmp_path: Path
) -> None:
    # 1. Per-source nvcc flags (which abicache does not express): FlashInfer
    #    builds it with ninja, after one line under --verbose.
    # 2. That library installed as FlashInfer's ahead-of-time module for
    #    another name: FlashInfer loads it; abicache is not asked.
    source = tmp_path / "src" / "fi_tiny_fallback.cu"
    code = _tiny_spec_code("fi_tiny_fallback", source, extra_cuda_cflags_by_source="{source: ['-O1']}") + """
    import shutil
    from flashinfer.jit import env as jit_env
    module = spec.build_and_load()
    built = spec.jit_library_path
    aot = jit_env.FLASHINFER_AOT_DIR / "fi_tiny_aot" / "fi_tiny_aot.so"
    aot.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy(built, aot)
    print("abicache-test: AOT", file=sys.stderr, flush=True)
    aot_spec = core.gen_jit_spec("fi_tiny_aot", [source])
    aot_module = aot_spec.build_and_load()
    emit({"fallback": module.add_one(41), "fallback_built_by_flashinfer": built.exists(),
          "aot": aot_module.add_one(1), "aot_jit_dir": aot_spec.build_dir.exists()})
    """
    cache = tmp_path / "cache"
    proc = run_snippet(fi_python, code, flashinfer_env(fi_python, tmp_path, cache, own_link=True), intercept="verbose")
    got = result(proc)
    assert got == {"fallback": 42, "fallback_built_by_flashinfer": True, "aot": 2, "aot_jit_dir": False}, got
    before_aot, after_aot = proc.stderr.split("abicache-test: AOT")
    lines = [line for line in before_aot.splitlines() if line.startswith("abicache:")]
    assert lines == [
        "abicache: flashinfer JIT module 'fi_tiny_fallback': per-source nvcc flags (`extra_cuda_cflags_by_source`) "
        "is not supported; FlashInfer builds it"
    ], proc.stderr
    assert "abicache:" not in after_aot, "abicache was asked for an ahead-of-time module"
    counts = stats(fi_python, cache)
    assert (counts["builds"], counts["misses"], counts["hits"]) == (0, 0, 0), counts


def test_a_flashinfer_module_is_built_once_by_abicache_then_loaded_warm_without_ninja(
    fi_python: Path, tmp_path: Path
) -> None:
    source = tmp_path / "src" / "fi_tiny.cu"
    code = _tiny_spec_code("fi_tiny", source) + """
    started = time.perf_counter()
    module = spec.build_and_load()
    seconds = time.perf_counter() - started
    emit({"out": module.add_one(41), "ninja_file": spec.ninja_path.exists(), "type": type(module).__name__,
          "seconds": seconds})
    """
    cache = tmp_path / "cache"
    env = flashinfer_env(fi_python, tmp_path, cache)
    cold = result(run_snippet(fi_python, code, env))
    after_cold = stats(fi_python, cache)
    warm = result(run_snippet(fi_python, code, env))
    after_warm = stats(fi_python, cache)
    assert cold["out"] == warm["out"] == 42 and cold["type"] == "Module", (cold, warm)
    assert not cold["ninja_file"] and not warm["ninja_file"], "FlashInfer wrote its ninja file: abicache was bypassed"
    assert after_cold["builds"] == 1, after_cold
    assert after_warm["builds"] == 1 and after_warm["hits"] == after_cold["hits"] + 1, after_warm
    print(f"flashinfer fi_tiny through abicache: cold {cold['seconds']:.2f} s, warm {warm['seconds']:.3f} s")


@pytest.mark.slow
def test_flashinfer_silu_and_mul_builds_once_then_loads_warm_in_another_torchs_venv(tmp_path: Path) -> None:
    if not COMPAT_PYTHON.exists():
        pytest.skip(f"no compat venv at `{COMPAT_PYTHON}`: run `scripts/setup-venv.sh compat`")
    cache = tmp_path / "cache"
    first = overlay_venv(tmp_path / "venv-a", Path(sys.executable))
    second = overlay_venv(tmp_path / "venv-b", COMPAT_PYTHON)
    code = """
    import torch
    started = time.perf_counter()
    from flashinfer.jit.activation import gen_act_and_mul_module
    spec = gen_act_and_mul_module("silu")
    imported = time.perf_counter()
    module = spec.build_and_load()
    done = time.perf_counter()
    emit({"torch": torch.__version__, "seconds": done - imported, "import_seconds": imported - started,
          "has_kernel": hasattr(module, "silu_and_mul"), "ninja_file": spec.ninja_path.exists(),
          "flashinfer_library": str(spec.jit_library_path) if spec.jit_library_path.exists() else None})
    """
    env_a = flashinfer_env(first, tmp_path, cache)
    cold = result(run_snippet(first, code, env_a))
    after_cold = stats(first, cache)
    libraries = [p for p in cache.rglob("*.so") if "silu_and_mul" in p.name]
    assert len(libraries) == 1, f"not one silu_and_mul library under {cache}: {libraries}"
    library = libraries[0]
    audit = subprocess.run([str(first), "-m", "abicache", "audit", str(library), "--json"],
                           capture_output=True, text=True, env=env_a, timeout=300)
    assert audit.returncode == 0, audit.stderr
    audited = json.loads(audit.stdout)

    env_b = flashinfer_env(second, tmp_path, cache)
    warm = result(run_snippet(second, code, env_b))
    after_warm = stats(second, cache)
    # Again in that venv: now from its warm-load record (no scan of FlashInfer's headers).
    warm_again = result(run_snippet(second, code, env_b))

    # FlashInfer's own: its cold build into its own cache, then its warm load from it.
    own_home = tmp_path / "flashinfer-own"
    env_own = flashinfer_env(first, tmp_path, cache, own_link=True, FLASHINFER_WORKSPACE_BASE=str(own_home))
    own_cold = result(run_snippet(first, code, env_own, intercept=None))
    own_warm = result(run_snippet(first, code, env_own, intercept=None))

    assert cold["torch"].split(".")[:2] != warm["torch"].split(".")[:2], "the second venv must hold another torch"
    assert cold["has_kernel"] and warm["has_kernel"]
    assert not cold["ninja_file"] and not warm["ninja_file"], "FlashInfer ran ninja under interception"
    assert after_cold["builds"] == 1, after_cold
    assert after_warm["builds"] == 1 and after_warm["hits"] == after_cold["hits"] + 1, after_warm
    assert stats(second, cache)["builds"] == 1 and warm_again["has_kernel"]
    assert own_cold["flashinfer_library"] and own_warm["flashinfer_library"]
    # Audited: a TVM-FFI module, with nothing of CPython or libtorch in it.
    imports = audited["imports"]
    assert "libtvm_ffi.so" in audited["needed"] and any(n.startswith("libcudart.so") for n in audited["needed"]), audited
    assert not any(imports[k] for k in ("cpython", "libtorch_python", "libtorch_cxx", "torch_stable_c")), imports
    report = {
        "abicache_cold_s": round(cold["seconds"], 2),
        "abicache_warm_other_torch_s": round(warm["seconds"], 3),
        "abicache_warm_again_s": round(warm_again["seconds"], 3),
        "flashinfer_own_cold_s": round(own_cold["seconds"], 2),
        "flashinfer_own_warm_s": round(own_warm["seconds"], 3),
        "import_flashinfer_s": round(warm["import_seconds"], 2),
        "torch": [cold["torch"], warm["torch"]],
        "audit_needed": audited["needed"],
    }
    print("flashinfer silu_and_mul: " + json.dumps(report, indent=1))
    out = os.environ.get("ABICACHE_BENCH_OUT")
    if out:
        Path(out, "flashinfer.json").write_text(json.dumps(report, indent=1))
