"""README.md's headline figures are generated from the benchmark summary
(`benches/latest.json`, written by `benches/summary.py --write`) by
`benches/readme_figures.py`: the committed block is exactly its render, it
carries no commit hash or issue number, and a new summary run replaces only
the figures it measured. Needs neither torch nor the package."""

from __future__ import annotations

import importlib.util
import json
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _load(name: str):
    spec = importlib.util.spec_from_file_location(name, ROOT / "benches" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


figures = _load("readme_figures")


def test_readme_figures_block_is_the_render_of_the_committed_summary() -> None:
    readme = (ROOT / "README.md").read_text()
    block = figures.render(json.loads((ROOT / "benches" / "latest.json").read_text()))
    assert figures.replace_block(readme, block) == readme, (
        "README.md's figures block differs from the render of benches/latest.json: "
        f"run `{figures.REGENERATE}` (never edit the block by hand)")
    rows = [line for line in block.splitlines() if line.startswith("| ") and not line.startswith("| what")]
    assert 4 <= len(rows) <= 6, f"{len(rows)} headline figures; the README shows 4 to 6"
    assert all(line.count(" | ") == 3 and re.search(r"\d", line) for line in rows), rows


def test_the_rendered_block_has_no_commit_hash_or_issue_number() -> None:
    block = figures.render(json.loads((ROOT / "benches" / "latest.json").read_text()))
    assert not re.search(r"\b[0-9a-f]{7,40}\b", block), block
    assert not re.search(r"#\d|\bissue\b", block, re.IGNORECASE), block


def test_only_the_block_between_the_markers_is_replaced() -> None:
    readme = f"# title\n\nbefore\n{figures.START}\nold figures\n{figures.END}\nafter\n"
    assert figures.replace_block(readme, "new\n") == (
        f"# title\n\nbefore\n{figures.START}\nnew\n{figures.END}\nafter\n")
    for broken in ("no markers\n", f"{figures.END}\n{figures.START}\n", f"{figures.START}\n{figures.START}\n{figures.END}\n"):
        try:
            figures.replace_block(broken, "new\n")
        except SystemExit as refused:
            assert "figures:start" in str(refused) and figures.REGENERATE in str(refused)
        else:
            raise AssertionError(f"a README without one start and one end marker was accepted: {broken!r}")


def test_a_summary_run_replaces_the_figures_it_measured_and_keeps_the_others(tmp_path: Path) -> None:
    latest = tmp_path / "latest.json"
    committed = json.loads((ROOT / "benches" / "latest.json").read_text())
    latest.write_text(json.dumps(committed))
    work = tmp_path / "work"
    work.mkdir()
    # What bench_tree.py writes, one run's figures.
    (work / "tree.json").write_text(json.dumps({"generated": {
        "abicache_ms": 30.0, "floor_1t_ms": 20.0, "floor_2t_ms": 15.0, "ratio": 2.0,
        "warm_ms": 6.0, "uncached_ms": 90.0}}))
    out = subprocess.run([sys.executable, str(ROOT / "benches" / "summary.py"), str(work), "--write", str(latest)],
                         capture_output=True, text=True, check=True).stdout
    assert "key generated tree" in out and f"wrote {latest}" in out
    written = json.loads(latest.read_text())
    tree = written["figures"]["tree_cold_key_vs_floor"]
    assert (tree["abicache_ms"], tree["floor_ms"], tree["ratio"]) == (30.0, 15.0, 2.0)
    assert tree["round"] != committed["figures"]["tree_cold_key_vs_floor"]["round"]
    assert written["figures"]["warm_paths"] == committed["figures"]["warm_paths"]
    assert set(written["rounds"]) == {tree["round"], committed["figures"]["warm_paths"]["round"]}
    assert "2.00× the floor" in figures.render(written)
