"""``abicache.prebuild``: the Python entry point mirrors ``abicache prebuild --json``."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

import abicache
from _util import EXAMPLES


def test_prebuild_builds_once_then_reports_cached_and_keys_an_env_without_torch(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    spec = EXAMPLES / "stable_scale" / "abicache.toml"
    no_torch = tmp_path / "no-torch.toml"
    no_torch.write_text('python_version = "3.13.1"\ntorch_version = "2.15.0+cpu"\ncxx11_abi = true\n')

    first = abicache.prebuild(spec, pythons=[sys.executable], envs=[no_torch], cache_dir=cache)
    assert first["distinct_keys"] == 1 and first["built"] == 1, first
    by_env = {c["environment"]: c for c in first["cells"]}
    assert by_env[sys.executable]["status"] == "built"
    # The stable-ABI key is shared with the environment that has no torch: built there, once.
    assert by_env[str(no_torch)]["status"] == "built"
    assert by_env[str(no_torch)]["built_by"] == sys.executable
    assert abicache.stats(str(cache))["builds"] == 1

    again = abicache.prebuild([spec], cache_dir=cache)
    assert [c["status"] for c in again["cells"]] == ["cached"], again
    assert again["cells"][0]["key"] == by_env[sys.executable]["key"]
    assert abicache.stats(str(cache))["builds"] == 1

    keyed_only = abicache.prebuild(spec, envs=[no_torch], cache_dir=tmp_path / "other")
    assert keyed_only["cells"][0]["status"] == "key-only"
    assert keyed_only["environments"][0]["can_build"] is False


def test_prebuild_matrix_cells_covered_by_the_given_interpreter_need_no_uv(tmp_path: Path) -> None:
    import torch

    cache = tmp_path / "cache"
    spec = EXAMPLES / "stable_scale" / "abicache.toml"
    python = "%d.%d" % sys.version_info[:2]
    release = ".".join(torch.__version__.split("+")[0].split(".")[:2])
    # The only cell is this interpreter: nothing is created, so no `uv` is needed.
    covered = abicache.prebuild(
        spec, pythons=[sys.executable], matrix=f"python={python} torch={release}", uv="/nonexistent/uv", cache_dir=cache
    )
    assert [e["label"] for e in covered["environments"]] == [sys.executable], covered
    assert covered["built"] == 1, covered

    with pytest.raises(abicache.Error, match=r"`latest` in `torch=` is not a release like `2\.15`"):
        abicache.prebuild(spec, matrix="python=3.12 torch=latest", cache_dir=cache)
    # A missing cell needs uv: the `uv` given does not exist.
    with pytest.raises(abicache.Error, match=r"the `uv` program `/nonexistent/uv` does not exist"):
        abicache.prebuild(spec, pythons=[sys.executable], matrix="python=3.99 torch=2.15", uv="/nonexistent/uv", cache_dir=cache)


def test_prebuild_errors_name_what_is_wrong_not_a_command_line_flag(tmp_path: Path) -> None:
    spec = EXAMPLES / "stable_scale" / "abicache.toml"
    no_torch = tmp_path / "no-torch.toml"
    no_torch.write_text('python_version = "3.13.1"\ntorch_version = "2.15.0+cpu"\ncxx11_abi = true\n')
    with pytest.raises(abicache.Error, match=r"no extension named `nope` in the given spec files") as raised:
        abicache.prebuild(spec, envs=[no_torch], extensions=["nope"], cache_dir=tmp_path / "cache")
    assert "--extension" not in str(raised.value)
    with pytest.raises(abicache.Error, match=r"invalid matrix `python=3.12 torch=latest`") as raised:
        abicache.prebuild(spec, matrix="python=3.12 torch=latest", cache_dir=tmp_path / "cache")
    assert "--matrix" not in str(raised.value)
