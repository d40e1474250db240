"""The drop-ins' warm path: a warm ``abicache.load`` / ``abicache.load_inline``
in a fresh process, for a ``torch.ops`` library and for a Python module, is
answered by the warm-load record without loading ``abicache._native`` (no
native call: ``load_inline`` stores nothing), and a repeated call in the same
process returns the first result, still without it.

Each load runs in its own interpreter. The libraries are small: the
stable-ABI example's source, and a pybind11 module without torch's headers."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any, Dict

import pytest
from _util import EXAMPLES, run_python

RACY_WINDOW_S = 2.1
PYBIND = """#include <pybind11/pybind11.h>
PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) { m.def("f", []() { return 7; }); }
"""

CALLS = {
    "load ops": 'abicache.load("stable_scale", [ARGS["scale"]], is_python_module=False, cache_dir=CACHE)',
    "load module": 'abicache.load("pyb_mod", [ARGS["pyb"]], cache_dir=CACHE)',
    "load_inline module": 'abicache.load_inline("pyb_mod", ARGS["text"], no_implicit_headers=True, cache_dir=CACHE)',
}
CODE = """
first = {call}
native = "abicache._native" in sys.modules
again = {call}
path = first if isinstance(first, str) else first.__file__
value = None if isinstance(first, str) else first.f()
emit({{"native": native, "native_after_repeat": "abicache._native" in sys.modules,
       "same": again is first or again == first, "path": path, "value": value}})
"""


@pytest.mark.parametrize("kind", sorted(CALLS))
def test_a_warm_dropin_takes_no_native_call_and_a_repeat_returns_the_first_result(kind: str, tmp_path: Path) -> None:
    (tmp_path / "scale.cpp").write_text((EXAMPLES / "stable_scale" / "scale.cpp").read_text())
    (tmp_path / "main.cpp").write_text(PYBIND)
    args: Dict[str, Any] = {"scale": str(tmp_path / "scale.cpp"), "pyb": str(tmp_path / "main.cpp"), "text": PYBIND}
    cache = tmp_path / "cache"
    code = CODE.format(call=CALLS[kind])
    built = run_python(code, cache, args=args)
    assert built["native"] and built["same"]
    time.sleep(RACY_WINDOW_S)
    assert run_python(code, cache, args=args)["native"], "the native hit writes the record"
    assert len(list((cache / "v1" / "warm").iterdir())) == 1
    warm = run_python(code, cache, args=args)
    assert not warm["native"] and not warm["native_after_repeat"], "answered by the record, the repeat too"
    assert warm["same"] and warm["path"] == built["path"]
    if kind.endswith("module"):
        assert warm["value"] == 7


REPEAT_AFTER_EDIT = """
first = abicache.load("pyb_mod", [ARGS["pyb"]], cache_dir=CACHE)
warm_dir = os.path.join(CACHE, "v1", "warm")
for name in os.listdir(warm_dir):
    with open(os.path.join(warm_dir, name), "w") as out:
        out.write("not a record")
again = abicache.load("pyb_mod", [ARGS["pyb"]], cache_dir=CACHE)
native_after_repeat = "abicache._native" in sys.modules
with open(ARGS["pyb"], "a") as src:
    src.write("// edited\\n")
edited = abicache.load("pyb_mod", [ARGS["pyb"]], cache_dir=CACHE)
emit({"same": again is first, "native_after_repeat": native_after_repeat,
      "edited": edited.__name__, "edited_value": edited.f(), "first": first.__name__})
"""


def test_a_same_process_repeat_reads_no_record_and_still_sees_an_edited_source(tmp_path: Path) -> None:
    # The repeat is answered by what this process already checked (the
    # record is garbage by then); an edited source is a new key all the same.
    (tmp_path / "main.cpp").write_text(PYBIND)
    args = {"pyb": str(tmp_path / "main.cpp")}
    cache = tmp_path / "cache"
    load = 'm = abicache.load("pyb_mod", [ARGS["pyb"]], cache_dir=CACHE)\nemit({"native": "abicache._native" in sys.modules})'
    run_python(load, cache, args=args)
    time.sleep(RACY_WINDOW_S)
    run_python(load, cache, args=args)  # the native hit writes the record
    assert not run_python(load, cache, args=args)["native"], "answered by the record"
    out = run_python(REPEAT_AFTER_EDIT, cache, args=args)
    assert out["same"] and not out["native_after_repeat"], "the repeat needs neither the record nor the native module"
    assert out["first"] == "pyb_mod" and out["edited"] == "pyb_mod_v1" and out["edited_value"] == 7
