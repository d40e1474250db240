"""Issue 27: a library whose flags require instruction-set extensions this
CPU lacks is refused with `abicache.AbiError` before it is loaded (never a
SIGILL), on the native path and on the warm-load record's path; one built
with a flag the CPU has loads and runs.

The flags are chosen at run time from this CPU's `/proc/cpuinfo` flags
(`tests/fixtures/isa/pick.py`). Each load runs in its own interpreter, on
the stable-ABI example copied into a private directory (a ~2 s build)."""

from __future__ import annotations

import json
import shutil
import sys
import time
from pathlib import Path
from typing import Any, Dict, Optional, Tuple

import pytest
from _util import EXAMPLES, REPO, run_python

sys.path.insert(0, str(REPO / "tests" / "fixtures" / "isa"))
import pick  # noqa: E402

sys.path.pop(0)

LACKING, HAVING = pick.pick()
RACY_WINDOW_S = 2.1

LOAD = """
ext = abicache.TorchOpsExtension("stable_scale", [ARGS["source"]], required_ops=["scale_shift"],
                                 torch_stable_abi_target=[2, 10], extra_cflags=ARGS["flags"], cache_dir=CACHE)
result = {}
try:
    result["path"] = ext.load()
    if ARGS.get("run", True):
        result["out"] = torch.ops.stable_scale.scale_shift(torch.ones(3), 2.0, 1.0).tolist()
except abicache.Error as e:
    result["refused"] = str(e)
    result["kind"] = type(e).__name__
    result["registered"] = hasattr(torch.ops.stable_scale, "scale_shift")
# The process lives on.
result["alive"] = torch.ones(2).sum().item()
result["native"] = "abicache._native" in sys.modules
emit(result)
"""


def _load(source: Path, cache: Path, flags: list, env: Optional[Dict[str, str]] = None, run: bool = True) -> Dict[str, Any]:
    return run_python(LOAD, cache, args={"source": str(source), "flags": flags, "run": run}, env=env)


def _entries(cache: Path) -> list:
    return sorted(p.name for p in (cache / "v1" / "entries").iterdir())


def _source(tmp_path: Path) -> Path:
    src = tmp_path / "src"
    shutil.copytree(EXAMPLES / "stable_scale", src)
    return src / "scale.cpp"


def _message(flag_feature: Tuple[str, str]) -> str:
    flag, feature = flag_feature
    return f"built with {flag}; this CPU lacks {feature}"


@pytest.mark.skipif(LACKING is None, reason="this CPU has every candidate extension; nothing to refuse")
def test_a_library_this_cpu_cannot_run_is_refused_and_nothing_is_deleted(tmp_path: Path) -> None:
    assert LACKING is not None
    source, cache = _source(tmp_path), tmp_path / "cache"
    refused = _load(source, cache, [LACKING[0]])
    assert "path" not in refused, refused
    assert _message(LACKING) in refused["refused"], refused["refused"]
    assert refused["kind"] == "AbiError" and "ABICACHE_ISA_CHECK=0" in refused["refused"]
    assert not refused["registered"], "the refused library was loaded"
    assert refused["alive"] == 2.0
    # The entry stays, with the requirement in its manifest, and is a hit next time.
    (key,) = _entries(cache)
    manifest = json.loads((cache / "v1" / "entries" / key / "manifest.json").read_text())
    assert {"feature": LACKING[1], "flag": LACKING[0]} in manifest["isa"], manifest.get("isa")
    library = cache / "v1" / "entries" / key / manifest["library"]
    assert library.is_file()
    again = _load(source, cache, [LACKING[0]])
    assert _message(LACKING) in again["refused"]
    assert _entries(cache) == [key] and library.is_file(), "a refusal deleted something"
    # No warm-load record for a refused load.
    assert not (cache / "v1" / "warm").exists() or not list((cache / "v1" / "warm").iterdir())


@pytest.mark.skipif(HAVING is None, reason="this CPU has none of the candidate extensions")
def test_a_library_built_with_a_flag_this_cpu_has_loads_and_runs(tmp_path: Path) -> None:
    assert HAVING is not None
    source, cache = _source(tmp_path), tmp_path / "cache"
    loaded = _load(source, cache, [HAVING[0]])
    assert loaded.get("out") == [3.0, 3.0, 3.0], loaded
    (key,) = _entries(cache)
    manifest = json.loads((cache / "v1" / "entries" / key / "manifest.json").read_text())
    assert {"feature": HAVING[1], "flag": HAVING[0]} in manifest["isa"]


def _warm_record(source: Path, cache: Path, flags: list, env: Dict[str, str]) -> Dict[str, Any]:
    """Builds, ages past the racy window and loads again (the native path
    writes the record); returns the record."""
    first = _load(source, cache, flags, env=env, run=False)
    assert "path" in first, first
    time.sleep(RACY_WINDOW_S)
    second = _load(source, cache, flags, env=env, run=False)
    assert second["native"] and "path" in second, second
    (record,) = list((cache / "v1" / "warm").iterdir())
    return json.loads(record.read_text())


@pytest.mark.skipif(
    LACKING is None or not LACKING[0].startswith("-mamx"),
    reason="needs an AMX flag this CPU lacks (a library built with it runs anywhere with the guard off)",
)
def test_the_warm_load_record_carries_the_requirements_and_its_reader_checks_them(tmp_path: Path) -> None:
    assert LACKING is not None
    source, cache = _source(tmp_path), tmp_path / "cache"
    off = {"ABICACHE_ISA_CHECK": "0"}
    record = _warm_record(source, cache, [LACKING[0]], off)
    assert [LACKING[1], LACKING[0]] in record["isa"], record["isa"]
    # Guard off: the record answers, no native module.
    warm = _load(source, cache, [LACKING[0]], env=off, run=False)
    assert "path" in warm and not warm["native"], warm
    # Guard on: the reader sends it to the native path, which refuses it.
    refused = _load(source, cache, [LACKING[0]], run=False)
    assert refused["native"], "the warm path loaded a library this CPU lacks an extension for"
    assert _message(LACKING) in refused["refused"], refused
    assert refused["alive"] == 2.0
    # A value other than 0 or 1 is left to the native path, which names it.
    bad = _load(source, cache, [LACKING[0]], env={"ABICACHE_ISA_CHECK": "maybe"}, run=False)
    assert bad["native"] and "path" not in bad, bad
    assert "`ABICACHE_ISA_CHECK=maybe` is not `1` or `0`" in bad["refused"]


def test_a_warm_load_record_whose_requirements_this_cpu_meets_answers_without_native(tmp_path: Path) -> None:
    if HAVING is None:
        pytest.skip("this CPU has none of the candidate extensions")
    source, cache = _source(tmp_path), tmp_path / "cache"
    record = _warm_record(source, cache, [HAVING[0]], {})
    assert [HAVING[1], HAVING[0]] in record["isa"], record["isa"]
    warm = _load(source, cache, [HAVING[0]])
    assert not warm["native"] and warm["out"] == [3.0, 3.0, 3.0], warm


@pytest.mark.skipif(LACKING is None, reason="this CPU has every candidate extension; nothing to refuse")
def test_the_load_drop_in_refuses_it_too(tmp_path: Path) -> None:
    assert LACKING is not None
    source, cache = _source(tmp_path), tmp_path / "cache"
    code = """
try:
    abicache.load("stable_scale", [ARGS["source"]], extra_cflags=[ARGS["flag"]], is_python_module=False,
                  build_directory=ARGS["build"], cache_dir=CACHE)
    emit({"loaded": True})
except abicache.AbiError as e:
    emit({"refused": str(e), "alive": torch.ones(2).sum().item()})
"""
    out = run_python(code, cache, args={"source": str(source), "flag": LACKING[0], "build": str(tmp_path / "build")})
    assert _message(LACKING) in out.get("refused", ""), out
    assert out["alive"] == 2.0
    assert not (tmp_path / "build" / "stable_scale.so").exists(), "a refused library was linked for loading"


@pytest.mark.skipif(LACKING is None, reason="this CPU has every candidate extension; nothing to refuse")
def test_a_layer_whose_manifest_records_no_requirements_is_never_loaded(tmp_path: Path) -> None:
    # Issue 46 finding 3, as an attacker does it: a shared read-only layer
    # (`ABICACHE_READONLY_DIRS`) holding a library built with a flag this CPU
    # lacks, its manifest as an older abicache wrote it (format 1, no
    # `isa`). The old code read that as "requires nothing" and loaded the
    # library from the layer, to die with SIGILL once its code ran. Now the
    # entry is unknown: skipped, built locally, and the local library's
    # recorded requirement is refused before anything is loaded.
    assert LACKING is not None
    source, layer = _source(tmp_path), tmp_path / "layer"
    built = _load(source, layer, [LACKING[0]], run=False)
    assert "refused" in built, built
    (key,) = _entries(layer)
    manifest_path = layer / "v1" / "entries" / key / "manifest.json"
    manifest = json.loads(manifest_path.read_text())
    del manifest["isa"]
    manifest["format"] = 1
    manifest_path.write_text(json.dumps(manifest))
    library = str(layer / "v1" / "entries" / key / manifest["library"])

    local = tmp_path / "local"
    out = _load(source, local, [LACKING[0]], env={"ABICACHE_READONLY_DIRS": str(layer)}, run=False)
    assert "path" not in out, f"a library requiring {LACKING[1]} was loaded (layer: {library}): {out}"
    assert not out["registered"], out
    assert _message(LACKING) in out.get("refused", ""), out
    assert out["kind"] == "AbiError" and out["alive"] == 2.0
    assert _entries(local) == [key], "built locally, under the same key"
