"""Real cross-version behaviour against a second venv with an older torch:
stable-ABI reuse with zero compiles, refusals before any lookup, and a CPU
extension rebuilt because (and only because) torch changed."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

import abicache
from _util import COMPAT_PYTHON, compat_skip_reason, example_spec, run_python

_reason = compat_skip_reason()
needs_compat = pytest.mark.skipif(_reason is not None, reason=_reason or "")


def _counts(stats: dict) -> tuple:
    return (stats["hits"], stats["misses"], stats["builds"], stats["errors"], stats["entries"])


@needs_compat
def test_compat_venv_reuses_the_stable_binary_with_zero_compiles(cache_dir: Path, stable_loaded: str) -> None:
    before = abicache.stats(cache_dir)
    got = run_python(
        """
        ext = abicache.TorchOpsExtension(**ARGS, cache_dir=CACHE)
        path = ext.load()
        a = torch.tensor([1.0, 2.0, -3.0])
        emit({"torch": torch.__version__, "path": path, "out": torch.ops.stable_scale.scale_shift(a, 2.0, 1.0).tolist()})
        """,
        cache_dir,
        args=example_spec("stable"),
        python=COMPAT_PYTHON,
    )
    after = abicache.stats(cache_dir)
    assert got["torch"].split(".")[:2] != torch.__version__.split(".")[:2], "the compat venv must hold another torch release"
    assert got["path"] == stable_loaded
    assert got["out"] == [3.0, 5.0, -5.0]
    assert after["builds"] == before["builds"], "the compat venv compiled instead of reusing the stable binary"
    assert after["hits"] == before["hits"] + 1


_REFUSE_216 = """
spec = dict(ARGS, torch_stable_abi_target=[2, 16])
results = {}
for cache in (CACHE, CACHE + "-never-created"):
    ext = abicache.TorchOpsExtension(**spec, cache_dir=cache)
    for what in ("load", "key"):
        try:
            getattr(ext, what)() if what == "load" else ext.key
            results[what] = None
        except abicache.AbiError as e:
            results[what] = str(e)
emit({"torch": torch.__version__, "errors": results})
"""


@pytest.mark.parametrize("venv", ["dev", "compat"])
def test_stable_target_above_torch_is_refused_before_any_lookup(cache_dir: Path, stable_loaded: str, venv: str) -> None:
    if venv == "compat" and _reason:
        pytest.skip(_reason)
    before = abicache.stats(cache_dir)
    entries_before = sorted(p.name for p in (cache_dir / "v1").iterdir())
    got = run_python(_REFUSE_216, cache_dir, args=example_spec("stable"), python=COMPAT_PYTHON if venv == "compat" else None)
    for what, message in got["errors"].items():
        assert message is not None, f"{what} was not refused"
        assert "2.16" in message and got["torch"] in message, message
    assert _counts(abicache.stats(cache_dir)) == _counts(before), "a refused request touched the cache counters"
    assert sorted(p.name for p in (cache_dir / "v1").iterdir()) == entries_before
    assert not Path(str(cache_dir) + "-never-created").exists(), "a refused request created a cache"


@needs_compat
def test_cpu_example_is_rebuilt_in_compat_because_torch_changed(cache_dir: Path, cpu_loaded: str) -> None:
    main_key = abicache.TorchOpsExtension(**example_spec("cpu"), cache_dir=cache_dir).key
    before = abicache.stats(cache_dir)
    got = run_python(
        """
        ext = abicache.TorchOpsExtension(**ARGS, cache_dir=CACHE)
        text, data = ext.explain(), ext.explanation()
        ext.load()
        a = torch.ones(2)
        emit({"text": text, "data": data, "key": ext.key, "torch": torch.__version__,
              "out": torch.ops.muladd_example.muladd(a, a, 1.0).tolist()})
        """,
        cache_dir,
        args=example_spec("cpu"),
        python=COMPAT_PYTHON,
    )
    after = abicache.stats(cache_dir)
    assert got["key"] != main_key
    assert after["builds"] == before["builds"] + 1
    assert got["out"] == [2.0, 2.0]
    closest = got["data"]["closest"]
    assert closest["key"] == main_key
    assert closest["changes"] == [
        {"kind": "changed", "field": "torch", "old": torch.__version__.split("+")[0], "new": got["torch"].split("+")[0]}
    ]
    assert "differs in" in got["text"] and "torch" in got["text"]
