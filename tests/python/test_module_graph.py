"""The module graph of each crate (scripts/module_graph.py) and its cycles.

The script reads the crates' real sources. One crate still has module
cycles today: the store (`store`, `gc`, `publish`, `stats` and the PCH budget
use each other; `sources` and `sources_gc`). Every other crate must stay free
of them (the load pipeline `abicache` and the fleet tools `abicache-fleet`
above all: the façade split removed theirs), and a crate listed here that
loses its cycles must leave the list, so the list only shrinks.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from _util import REPO

SCRIPT = REPO / "scripts" / "module_graph.py"

# Crates with a module cycle today.
CRATES_WITH_CYCLES = {"abicache-store"}

# Crates that must never be listed above (issue 45: no module cycle in either).
CRATES_WITHOUT_CYCLES = ("abicache", "abicache-fleet")


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True)


def _crates() -> list[str]:
    return sorted(p.name for p in (REPO / "crates").iterdir() if (p / "src").is_dir())


def test_no_crate_gains_a_module_cycle() -> None:
    clean = [c for c in _crates() if c not in CRATES_WITH_CYCLES]
    result = _run("--check", *clean)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "CYCLE" not in result.stdout


def test_the_load_pipeline_and_the_fleet_tools_have_no_module_cycle() -> None:
    assert CRATES_WITH_CYCLES.isdisjoint(CRATES_WITHOUT_CYCLES)
    result = _run("--check", *CRATES_WITHOUT_CYCLES)
    assert result.returncode == 0, result.stdout + result.stderr
    for crate in CRATES_WITHOUT_CYCLES:
        assert f"{crate}:\n" in result.stdout, result.stdout
    assert "CYCLE" not in result.stdout, result.stdout


def test_the_crates_listed_with_cycles_still_have_them() -> None:
    for crate in sorted(CRATES_WITH_CYCLES):
        result = _run("--check", crate)
        assert result.returncode == 1, (
            f"`{crate}` has no module cycle any more: remove it from CRATES_WITH_CYCLES in {__file__}\n"
            + result.stdout
        )
        assert "CYCLE:" in result.stdout and f"module cycles in {crate}" in result.stderr


def _write(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = root / "demo" / "src" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


def test_a_cycle_through_a_root_reexport_a_group_and_super_is_found_with_its_lines(tmp_path: Path) -> None:
    crates = _write(tmp_path, {
        "lib.rs": "mod a;\nmod b;\nmod error;\npub use error::Error;\n",
        # a group import reaching into b
        "a/mod.rs": "mod inner;\nuse crate::{b::Thing, Error as E};\n",
        # super:: from a submodule is a use of a itself (the same top-level module)
        "a/inner.rs": "use super::Thing;\n",
        # crate::Error is error's, through the root's re-export
        "b.rs": "pub struct Thing;\npub fn f() -> crate::Error { todo!() }\n",
        "error.rs": (
            "pub struct Error;\n"
            "// use crate::b::Thing;  (a comment is not a use)\n"
            "#[cfg(test)]\nmod tests {\n    use crate::a::inner;\n}\n"
        ),
    })
    result = _run("--crates-dir", str(crates), "--check", "demo")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "  a -> b, error\n" in result.stdout
    assert "  b -> error\n" in result.stdout
    assert "  error -> (nothing)\n" in result.stdout

    # error uses a outside its tests: a -> b -> error -> a
    (crates / "demo" / "src" / "error.rs").write_text("pub struct Error;\n\nuse crate::a::inner;\n")
    result = _run("--crates-dir", str(crates), "--check", "demo")
    assert result.returncode == 1, result.stdout
    assert "CYCLE: a <-> b <-> error" in result.stdout
    # (paths from the folder above the crates' folder, as `crates/abicache/src/...` in the checkout)
    assert f"error -> a  ({tmp_path.name}/demo/src/error.rs:3)" in result.stdout
    assert "module cycles in demo" in result.stderr

    fine = _run("--crates-dir", str(crates), "--fine", "demo")
    assert "  a::inner -> a\n" in fine.stdout


def test_an_unknown_crate_is_named() -> None:
    result = _run("no-such-crate")
    assert result.returncode == 2
    assert "no crate `no-such-crate`" in result.stderr
