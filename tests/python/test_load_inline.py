"""``abicache.load_inline`` and the drop-in behaviour of ``abicache.load``,
side by side with ``torch.utils.cpp_extension``: same-name reloads, flag and
include-path handling, the ``build_directory`` layout, build-error text, and
a warm ``load_inline`` that writes and compiles nothing.

Each scenario runs the real compiler for both implementations. The sources
include only ``pybind11`` (not ``torch/extension.h``) where the scenario
allows, so a build takes seconds, not minutes.
"""

from __future__ import annotations

import glob
import os
import re
import sys
import warnings
from pathlib import Path
from typing import Any, Callable, Dict

import pytest
import torch.utils.cpp_extension as torch_ext

import abicache
from _util import run_python
from abicache._inline import generated_sources
from abicache._dropins import split_flags

PYBIND = "#include <pybind11/pybind11.h>\n"


@pytest.fixture
def torch_on_path(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """torch's builds need the venv's `ninja` on PATH and a private extensions dir."""
    monkeypatch.setenv("PATH", os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", ""))
    monkeypatch.setenv("TORCH_EXTENSIONS_DIR", str(tmp_path / "torch_extensions"))


def _implementations(cache_dir: Path) -> Dict[str, Dict[str, Callable[..., Any]]]:
    def quiet(fn: Callable[..., Any]) -> Callable[..., Any]:
        def call(*args: Any, **kwargs: Any) -> Any:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # torch 2.15 marks load_inline deprecated
                return fn(*args, **kwargs)

        return call

    return {
        "torch": {"load": quiet(torch_ext.load), "load_inline": quiet(torch_ext.load_inline)},
        "abicache": {
            "load": lambda *a, **k: abicache.load(*a, cache_dir=cache_dir, **k),
            "load_inline": lambda *a, **k: abicache.load_inline(*a, cache_dir=cache_dir, **k),
        },
    }


def _so_names(directory: Path) -> list:
    return sorted(os.path.basename(p) for p in glob.glob(str(directory / "*.so")))


def test_reload_under_one_name_returns_new_code_and_build_directory_holds_each_version(
    cache_dir: Path, tmp_path: Path, torch_on_path: None
) -> None:
    """torch 123 → 456 → 456; abicache used to give 123 → 123 (pybind11 3.x
    caches modules by name). Both now import a changed module as
    `<name>_v1` and leave `<name>.so`, `<name>_v1.so` in build_directory."""
    seen: Dict[str, Any] = {}
    for impl, fns in _implementations(cache_dir).items():
        name = f"reload_{impl}"
        build_dir = tmp_path / f"build_{impl}"
        build_dir.mkdir()  # torch's load_inline writes main.cpp there before creating it

        def compile(value: int) -> Any:
            return fns["load_inline"](
                name=name,
                cpp_sources=PYBIND + f"int f() {{ return {value}; }}",
                functions="f",
                with_pytorch_error_handling=False,
                no_implicit_headers=True,
                build_directory=str(build_dir),
            )

        first = compile(123)
        assert first.f() == 123
        assert _so_names(build_dir) == [f"{name}.so"]
        changed = compile(456)
        assert changed.f() == 456, impl
        assert changed.__name__ == f"{name}_v1"
        assert _so_names(build_dir) == [f"{name}.so", f"{name}_v1.so"]
        again = compile(456)
        assert again.f() == 456
        assert first.f() == 123  # the first module still works
        seen[impl] = (first, changed, again, build_dir)

    # abicache returns the module it loaded first for unchanged code, and its
    # build_directory entries are copies of the verified cache entries.
    first, changed, again, build_dir = seen["abicache"]
    assert again is changed
    assert (build_dir / "reload_abicache.so").read_bytes() == Path(first.__file__).read_bytes()
    assert (build_dir / "reload_abicache_v1.so").read_bytes() == Path(changed.__file__).read_bytes()
    assert Path(first.__file__).is_relative_to(cache_dir)
    # torch writes main.cpp into build_directory: abicache generates the same bytes.
    torch_main = (seen["torch"][3] / "main.cpp").read_text()
    ours = dict(generated_sources(PYBIND + "int f() { return 456; }", functions="f",
                                  with_pytorch_error_handling=False, no_implicit_headers=True))
    assert ours["main.cpp"] == torch_main


def test_multi_flag_entries_blank_flags_and_padded_include_paths_work_like_torch(
    cache_dir: Path, tmp_path: Path, torch_on_path: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`"-DFLAG_A=7 -DFLAG_B=8"` must reach the compiler as two flags (one argument
    would define FLAG_A as `7 -DFLAG_B=8`); `"  inc\\n"` must find `inc/`."""
    (tmp_path / "inc").mkdir()
    (tmp_path / "inc" / "answer.h").write_text("#define ANSWER (FLAG_A + FLAG_B)\n")
    monkeypatch.chdir(tmp_path)
    for impl, fns in _implementations(cache_dir).items():
        module = fns["load_inline"](
            name=f"flags_{impl}",
            cpp_sources=PYBIND + '#include "answer.h"\nint f() { return ANSWER; }',
            functions=["f"],
            with_pytorch_error_handling=False,
            no_implicit_headers=True,
            extra_cflags=["-g\n\n", "-DFLAG_A=7 -DFLAG_B=8", "", "   "],
            extra_include_paths=["   inc\n"],
        )
        assert module.f() == 15, impl


def test_flag_splitting_follows_the_shell() -> None:
    assert split_flags(["-O0 -Wall", "  -g\n", "", "-DNAME='a b'"], "extra_cflags") == [
        "-O0", "-Wall", "-g", "-DNAME=a b"
    ]
    assert split_flags(None, "extra_cflags") == []
    with pytest.raises(ValueError, match=r"extra_ldflags entry .*-Wl,'oops.*balance its quotes"):
        split_flags(["-Wl,'oops"], "extra_ldflags")
    with pytest.raises(TypeError, match="extra_cflags must be strings"):
        split_flags([3], "extra_cflags")


SHELL_CASES = [
    "-O3", " -O3 ", "", " ", "\t", "-DX=1", "-Wl,-rpath,$ORIGIN", "-DNAME=#x", "-I/a b", "-DA='b c'",
    '-DA="b"', "-DA=\\n", "a\x0bb", "\x0c-g\x0c", "-O2\r\n", "--param=max-inline-insns-single=2000",
    "-fno-strict-aliasing -fwrapv", "-D'Q'", "é-ü",
]


@pytest.mark.parametrize("flag", SHELL_CASES, ids=[repr(c) for c in SHELL_CASES])
def test_flag_splitting_agrees_with_shlex_value_for_value(flag: str) -> None:
    # The fast path for one plain word must give what `shlex.split` gives.
    import shlex

    assert split_flags([flag], "extra_cflags") == shlex.split(flag.strip())


def test_split_flags_and_one_flag_per_entry_give_one_key(cache_dir: Path, tmp_path: Path) -> None:
    src = tmp_path / "k.cpp"
    src.write_text("int k() { return 1; }\n")
    listed = abicache.TorchOpsExtension("flag_key", [str(src)], extra_cflags=["-O0", "-Wall"], cache_dir=cache_dir)
    joined = abicache.TorchOpsExtension(
        "flag_key", [str(src)], extra_cflags=split_flags(["  -O0 -Wall\n", ""], "extra_cflags"), cache_dir=cache_dir
    )
    assert listed.key == joined.key


def test_build_error_starts_with_torchs_text_then_compiler_output_and_command(
    cache_dir: Path, torch_on_path: None
) -> None:
    messages = {}
    for impl, fns in _implementations(cache_dir).items():
        with pytest.raises(RuntimeError) as info:
            fns["load_inline"](
                name=f"broken_{impl}", cpp_sources="int main() { return 0 }", no_implicit_headers=True
            )
        messages[impl] = str(info.value)
        assert messages[impl].startswith(f"Error building extension 'broken_{impl}'"), messages[impl]
    err = info.value
    assert isinstance(err, abicache.BuildError)
    assert "error:" in err.output and "return 0 }" in err.output and "main.cpp" in err.command
    # After torch's prefix: abicache's compiler output and the exact command.
    assert "error:" in messages["abicache"] and "return 0 }" in messages["abicache"]
    # The command line, headed `command:` or `command (run in `DIR`):` (relocatable compiles).
    assert re.search(r"command( \(run in `[^`]*`\))?:", messages["abicache"]), messages["abicache"]
    assert err.command in messages["abicache"]


def test_functions_must_be_a_name_list_or_dict(cache_dir: Path) -> None:
    with pytest.raises(ValueError, match="Expected 'functions' to be a list or dict"):
        abicache.load_inline(name="bad_functions", cpp_sources="", functions=5, cache_dir=cache_dir)
    with pytest.raises(abicache.Error, match="SYCL"):
        abicache.load_inline(name="sycl", cpp_sources="", sycl_sources="x", cache_dir=cache_dir)


def test_generated_sources_match_torchs_layout() -> None:
    files = dict(generated_sources(["int a();", "int b();"], cuda_sources="__global__ void k() {}",
                                   functions={"a": "doc of a", "b": "b"}))
    assert files["main.cpp"] == (
        "#include <torch/extension.h>\nint a();\nint b();\n"
        "PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {\n"
        'm.def("a", torch::wrap_pybind_function(a), "doc of a");\n'
        'm.def("b", torch::wrap_pybind_function(b), "b");\n}'
    )
    assert files["cuda.cu"] == (
        "#include <torch/types.h>\n#include <cuda.h>\n#include <cuda_runtime.h>\n__global__ void k() {}"
    )
    gil_free = dict(generated_sources("int a();", functions="a", gil_not_used=True))
    assert "PYBIND11_MODULE(TORCH_EXTENSION_NAME, m, pybind11::mod_gil_not_used()) {" in gil_free["main.cpp"]
    sources = ["int a();"]
    generated_sources(sources, functions=["a"])
    assert sources == ["int a();"]  # the caller's list is left alone (torch's is not)


def test_warm_load_inline_in_a_new_process_writes_and_compiles_nothing(cache_dir: Path) -> None:
    code = """
import glob
m = abicache.load_inline(name="warm_inline", cpp_sources=ARGS, functions="g",
                         with_pytorch_error_handling=False, no_implicit_headers=True, cache_dir=CACHE)
emit({"g": m.g(), "file": m.__file__})
"""
    source = PYBIND + "int g() { return 7; }"
    cold = run_python(code, cache_dir, args=source)
    assert cold["g"] == 7
    sources = sorted(glob.glob(str(cache_dir / "v1" / "sources" / "*" / "main.cpp")))
    stamps = {p: os.stat(p).st_mtime_ns for p in sources}
    before = abicache.stats(cache_dir)
    warm = run_python(code, cache_dir, args=source)
    after = abicache.stats(cache_dir)
    assert warm == cold
    assert after["builds"] == before["builds"] and after["hits"] == before["hits"] + 1
    assert {p: os.stat(p).st_mtime_ns for p in sources} == stamps
    assert sorted(glob.glob(str(cache_dir / "v1" / "sources" / "*" / "main.cpp"))) == sources


def test_writing_through_build_directory_never_changes_the_cache_entry(cache_dir: Path, tmp_path: Path) -> None:
    """`D/<name>.so` used to be a hard link to the entry: `chmod -R g+w D`
    changed the entry's mode (never checked on a hit), an in-place write
    through `D` changed the library under every process using it, and the
    link itself changed the entry's ctime (the warm record missed)."""
    build_dir = tmp_path / "build"
    source = PYBIND + "int f() { return 7; }"

    def compile() -> Any:
        return abicache.load_inline(name="copied_out", cpp_sources=source, functions="f",
                                    with_pytorch_error_handling=False, no_implicit_headers=True,
                                    build_directory=str(build_dir), cache_dir=cache_dir)

    module = compile()
    entry = Path(module.__file__)
    before = entry.stat()
    copy = build_dir / "copied_out.so"
    assert copy.read_bytes() == entry.read_bytes()
    assert not os.path.samefile(copy, entry), "a copy, not a link"
    assert before.st_nlink == 1
    copy.chmod(0o777)
    with open(copy, "r+b") as f:  # an in-place write, as patchelf or `cp x.so D/` make
        f.write(b"\0" * 16)
    after = entry.stat()
    assert (after.st_mode, after.st_ctime_ns, after.st_ino) == (before.st_mode, before.st_ctime_ns, before.st_ino)
    assert entry.read_bytes()[:4] == b"\x7fELF"
    # The next load (a fresh process: same code, a hit) serves the intact entry
    # and puts a fresh copy in place of the altered one.
    out = run_python(
        """
module = abicache.load_inline(name="copied_out", cpp_sources=ARGS["source"], functions="f",
                              with_pytorch_error_handling=False, no_implicit_headers=True,
                              build_directory=ARGS["dir"], cache_dir=CACHE)
emit({"f": module.f(), "file": module.__file__})
""",
        cache_dir, args={"source": source, "dir": str(build_dir)},
    )
    assert out == {"f": 7, "file": str(entry)}
    assert copy.read_bytes() == entry.read_bytes()
