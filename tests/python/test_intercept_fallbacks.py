"""Issue 46, findings 5 and 7: interception's fallback to torch never runs
old code and never hides a refusal.

Unmodified programs run under ``ABICACHE_INTERCEPT=1`` (the wheel's
``abicache-intercept.pth``, as in ``test_intercept.py``) and call
``torch.utils.cpp_extension.load``; torch builds with its own ninja in a
private ``TORCH_EXTENSIONS_DIR``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any, Dict

import pytest
from _util import REPO

sys.path.insert(0, str(REPO / "tests" / "fixtures" / "isa"))
import pick  # noqa: E402

sys.path.pop(0)

LACKING, _ = pick.pick()


def _env(tmp_path: Path) -> Dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("ABICACHE_INTERCEPT", "ABICACHE_DIR")}
    env.update(
        PATH=str(Path(sys.executable).parent) + os.pathsep + env.get("PATH", ""),  # torch's ninja
        PYTHONWARNINGS="ignore",
        ABICACHE_INTERCEPT="1",
        ABICACHE_DIR=str(tmp_path / "cache"),
        ABICACHE_PCH="0",
        TORCH_EXTENSIONS_DIR=str(tmp_path / "torch_extensions"),
    )
    return env


def _result(proc: subprocess.CompletedProcess) -> Dict[str, Any]:
    for line in proc.stdout.splitlines():
        if line.startswith("RESULT "):
            return json.loads(line[len("RESULT "):])
    raise AssertionError(f"exited {proc.returncode} without a result\n--- stdout\n{proc.stdout}\n--- stderr\n{proc.stderr}")


# An unmodified program: loads `fall_reload`, edits its source, loads it
# again. Between the two loads abicache's cache becomes unusable (its root
# replaced by a file) so that abicache fails the call it takes and torch's
# fallback builds it: `abicache-first` fails the changed reload,
# `torch-first` the first load.
RELOAD = """
import json, os, sys
from torch.utils.cpp_extension import load
directory, order = sys.argv[1], sys.argv[2]
source = os.path.join(directory, "reload.cpp")
def write(answer):
    with open(source, "w") as f:
        f.write('#include <pybind11/pybind11.h>\\nint answer() { return %d; }\\n'
                'PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) { m.def("answer", &answer); }\\n' % answer)
usable, broken = os.environ["ABICACHE_DIR"], os.path.join(directory, "not-a-directory", "cache")
write(1)
os.environ["ABICACHE_DIR"] = broken if order == "torch-first" else usable
first = load("fall_reload", [source])
write(2)
os.environ["ABICACHE_DIR"] = broken if order == "abicache-first" else usable
second = load("fall_reload", [source])
print("RESULT " + json.dumps({"first": first.answer(), "second": second.answer(),
      "names": [first.__name__, second.__name__]}))
"""


@pytest.mark.parametrize("order", ["abicache-first", "torch-first"])
def test_a_changed_reload_runs_the_new_code_whichever_of_abicache_and_torch_loads_it(tmp_path: Path, order: str) -> None:
    (tmp_path / "not-a-directory").write_text("")
    proc = subprocess.run([sys.executable, "-c", RELOAD, str(tmp_path), order], capture_output=True, text=True,
                          env=_env(tmp_path), timeout=900)
    result = _result(proc)
    assert "falling back to torch.utils.cpp_extension.load" in proc.stderr, proc.stderr
    assert result["first"] == 1, result
    assert result["second"] == 2, f"the reload ran the old code ({order}): {result}\n{proc.stderr}"
    assert result["names"] == ["fall_reload", "fall_reload_v1"], result
    if order == "abicache-first":
        assert "`fall_reload` is already loaded in this process, so torch builds it as `fall_reload_v1`" in proc.stderr


# An unmodified program loading a library built with an instruction-set
# flag this CPU lacks, then calling it (for AMX, `tilerelease`: SIGILL here).
REFUSED = """
import json, os, sys
from torch.utils.cpp_extension import load
flag = sys.argv[2]
source = os.path.join(sys.argv[1], "isa.cpp")
body = "_tile_release(); " if flag == "-mamx-tile" else ""
with open(source, "w") as f:
    f.write('#include <immintrin.h>\\n#include <pybind11/pybind11.h>\\n'
            'int run() { %sreturn 7; }\\n'
            'PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) { m.def("run", &run); }\\n' % body)
try:
    module = load("fall_isa", [source], extra_cflags=[flag])
except Exception as e:
    print("RESULT " + json.dumps({"error": type(e).__name__, "message": str(e)}), flush=True)
    sys.exit(3)
print("LOADED " + module.__file__, flush=True)
print("RESULT " + json.dumps({"ran": module.run()}), flush=True)
"""


@pytest.mark.skipif(LACKING is None or not LACKING[0].startswith("-m"),
                    reason="needs an x86 flag this CPU lacks (tests/fixtures/isa/pick.py)")
def test_the_cpu_guards_refusal_reaches_the_program_and_torch_builds_nothing(tmp_path: Path) -> None:
    assert LACKING is not None
    proc = subprocess.run([sys.executable, "-c", REFUSED, str(tmp_path), LACKING[0]], capture_output=True, text=True,
                          env=_env(tmp_path), timeout=900)
    assert proc.returncode != -4, f"torch's build ran and crashed with SIGILL\n{proc.stdout}\n{proc.stderr}"
    result = _result(proc)
    assert result.get("error") == "AbiError", f"{result}\n{proc.stderr}"
    assert f"built with {LACKING[0]}; this CPU lacks {LACKING[1]}" in result["message"]
    assert "falling back" not in proc.stderr, proc.stderr
    torch_dir = tmp_path / "torch_extensions"
    assert not list(torch_dir.rglob("*.so")), "torch built the refused extension"


def test_every_abi_refusal_is_kept_from_torch_and_nothing_else_is() -> None:
    # Generic over the kind, not the guard: the CPU guard, a GPU guard and
    # the stable-ABI checks all raise `abicache.AbiError`.
    import _abicache_intercept

    import abicache

    assert _abicache_intercept._is_refusal(abicache.AbiError("this GPU cannot run it"))
    for other in (abicache.Error("cache unusable"), abicache.BuildError("failed"), abicache.LockTimeout("busy"),
                  OSError(28, "No space left on device"), RuntimeError("any")):
        assert not _abicache_intercept._is_refusal(other), other
