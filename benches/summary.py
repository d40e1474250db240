"""Prints the one table of all benchmark figures against their targets.

    python3 benches/summary.py benches/.work [--write benches/latest.json]

Reads what the benchmark scripts of this run wrote (see scripts/bench.sh,
which clears the folder's JSON first): `gptq.json`, `tree.json`,
`build.json`, `warm.json`, `warm_paths.json`, `cold-key-{machete,tree}.json`;
a row whose file is missing (a benchmark `bench.sh --floors` skips) is left out.

`--write FILE` also records the headline figures in FILE (JSON, committed as
`benches/latest.json`): each figure this run measured replaces the file's,
with this run (date, commit, machine) as its round; a figure this run did
not measure keeps its earlier value and round. `benches/readme_figures.py`
renders the README's figures table from it.
"""

from __future__ import annotations

import datetime
import json
import os
import platform
import subprocess
import sys
from pathlib import Path


def main() -> None:
    args = sys.argv[1:]
    latest = None
    if "--write" in args:
        i = args.index("--write")
        latest = Path(args[i + 1])
        del args[i:i + 2]
    work = Path(args[0])
    rows = table(work)
    print_rows(rows)
    if latest is not None:
        write_latest(latest, headline(work), rows)


def read_figures(work: Path, name: str):
    """What one benchmark of this run wrote (`work/name`, JSON), or None when
    it did not run (a benchmark `bench.sh --floors` skips)."""
    path = work / name
    return json.loads(path.read_text()) if path.is_file() else None


def table(work: Path) -> list:
    """The summary's rows (what, figure, target, status) from this run's JSON files."""
    def read(name: str):
        return read_figures(work, name)

    gptq = read("gptq.json") or []
    tree = read("tree.json")
    build = read("build.json")
    rows = []

    def row(what: str, figure: str, target: str, ok: bool | None, note: bool = False) -> None:
        status = "-" if ok is None else ("ok" if ok else "MISSED") + ("*" if note else "")
        rows.append((what, figure, target, status))

    for r in gptq:
        machete = r["extension"] == "machete"
        ok = r["speedup"] >= 30 and (not machete or r["abicache_ms"] < 100)
        figure = f"{r['abicache_ms']:.2f} ms vs {r['reference_ms']:.1f} ms = {r['speedup']:.0f}x"
        if r["note"]:
            figure += " (no stable target)"
        row(f"key {r['extension']}", figure, ">= 30x" + (", < 100 ms" if machete else ""), ok, bool(r["note"]))
    g = tree["generated"] if tree else {}
    if g:
        floor = min(g["floor_1t_ms"], g["floor_2t_ms"])
        row("key generated tree", f"{g['abicache_ms']:.1f} ms vs floor {floor:.1f} ms: {g['ratio']:.2f}x (per-run median)",
            "<= 2x floor", g["ratio"] <= 2)
    for r in gptq:
        if r["extension"] == "machete" and "warm_ms" in r:
            row("warm key machete (stat cache)", f"{r['warm_ms']:.2f} ms (cold {r['abicache_ms']:.1f} ms, "
                f"no cache {r['uncached_ms']:.1f} ms)", "< 3 ms", r["warm_ms"] < 3)
    if "warm_ms" in g:
        row("warm key generated tree (stat cache)", f"{g['warm_ms']:.2f} ms (cold {g['abicache_ms']:.1f} ms, "
            f"no cache {g['uncached_ms']:.1f} ms)", "< 10 ms", g["warm_ms"] < 10)
    for name in ("machete", "tree"):
        cold_file = work / f"cold-key-{name}.json"
        if cold_file.is_file():
            c = json.loads(cold_file.read_text())
            row(f"cold key {name} vs {c.get('reference', '91db52b')}", f"{c['cold_ms']:.1f} ms vs {c['reference_ms']:.1f} ms = "
                f"{c['cold_vs_reference']:.2f}x (floor {c['floor_ms']:.1f} ms: {c['cold_vs_floor']:.2f}x)", "<= 1x",
                c["cold_vs_reference"] <= 1)
    paths_file = work / "warm_paths.json"
    if paths_file.is_file():
        p = json.loads(paths_file.read_text())
        for name, w in p["rows"].items():
            m = w["median_ms"]
            paired = w.get("paired_ratio", w["ratio"])
            after = w.get("after_import")
            beyond = (f"; {max(after['ratio'], after['paired_ratio']):.2f}x after its "
                      f"{w['import_ms']:.2f} ms `import abicache`") if after else ""
            row(f"warm {name} ({w['answered_by']})",
                f"{m['abicache']:.2f} ms vs floor {m['floor']:.2f} ms = {w['ratio']:.2f}x (paired {paired:.2f}x{beyond})",
                "<= 2x", max(w["ratio"], paired) <= 2)
        for name, w in p["same_process_us"].items():
            row(f"same-process repeat {name}", f"{w['abicache']:.1f} us (load_library again {w['floor']:.1f} us)",
                "microseconds", w["abicache"] < 1000)
        c = p["cli_ms"]
        row("`abicache key` warm vs `build` warm", f"{c['key']:.1f} ms vs {c['build']:.1f} ms "
            f"(process start {c['--version']:.1f} ms)", "key <= build", c["key"] <= c["build"])
    warm_file = work / "warm.json"
    if warm_file.is_file():
        for name, w in json.loads(warm_file.read_text())["libraries"].items():
            m = w["median_ms"]
            row(f"warm .load() {name} ({w['library_mib']:.0f} MiB)",
                f"{m['abicache']:.2f} ms vs load_library {m['load_library']:.2f} ms = {w['ratio']:.2f}x", "<= 2x",
                w["ratio"] <= 2)
    if build is None:
        return rows
    c, r, h, a = build["cold"], build["rebuild"], build["warm_hit"], build["audit"]
    row("cold build ext4", f"{c['abicache_s']:.1f} s vs torch load {c['torch_load_s']:.1f} s = {c['ratio']:.2f}",
        "<= 1.0", c["ratio"] <= 1.0)
    row("rebuild after 1 edit", f"{r['abicache_s']:.1f} s vs ninja {r['torch_load_s']:.1f} s = {r['ratio']:.2f}",
        "(report)", None)
    row("warm hit (process)", f"{h['median_ms']:.1f} ms", "<= 20 ms", h["median_ms"] <= 20)
    e, t = a["extension"], a["libtorch_cpu"]
    row("audit ext4_bench.so", f"{e['cli_ms']:.1f} ms = {a['extension_share_of_build'] * 100:.3f} % of build",
        "<= 5 %", a["extension_share_of_build"] <= 0.05)
    t_s = max(t["median_s"], t["cli_ms"] / 1e3)
    row("audit libtorch_cpu.so", f"{t_s * 1e3:.0f} ms ({t['mib']:.0f} MiB)", "<= 1 s", t_s <= 1)
    return rows


def headline(work: Path) -> dict:
    """The figures `benches/latest.json` keeps, by name, from what this run measured
    (names and fields as `benches/readme_figures.py` reads them; times in ms)."""
    def read(name: str):
        return read_figures(work, name)

    out: dict = {}
    for r in read("gptq.json") or []:
        if r["extension"] == "machete":
            out["key_machete_vs_gptqmodel"] = {"abicache_ms": r["abicache_ms"], "reference_ms": r["reference_ms"],
                                               "speedup": r["speedup"], "files": r.get("files")}
    g = (read("tree.json") or {}).get("generated")
    if g:
        out["tree_cold_key_vs_floor"] = {"abicache_ms": g["abicache_ms"],
                                         "floor_ms": min(g["floor_1t_ms"], g["floor_2t_ms"]), "ratio": g["ratio"]}
        if "warm_ms" in g:
            out["tree_warm_key"] = {"abicache_ms": g["warm_ms"], "cold_ms": g["abicache_ms"]}
    for name in ("machete", "tree"):
        c = read(f"cold-key-{name}.json")
        if c:
            out[f"{name}_cold_key_vs_reference"] = {
                "abicache_ms": c["cold_ms"], "reference_ms": c["reference_ms"], "ratio": c["cold_vs_reference"],
                "floor_ms": c["floor_ms"], "floor_ratio": c["cold_vs_floor"], "reference": c.get("reference", "91db52b")}
    p = read("warm_paths.json")
    if p:
        out["warm_paths"] = {
            name: {"abicache_ms": w["median_ms"]["abicache"], "floor_ms": w["median_ms"]["floor"],
                   "ratio": w["ratio"], "paired_ratio": w.get("paired_ratio", w["ratio"]),
                   "after_import_ms": (w.get("after_import") or {}).get("median_ms"),
                   "after_import_ratio": (w.get("after_import") or {}).get("ratio"), "import_ms": w.get("import_ms")}
            for name, w in p["rows"].items()}
        out["same_process_us"] = {name: {"abicache_us": w["abicache"], "floor_us": w["floor"]}
                                  for name, w in p["same_process_us"].items()}
        if p.get("cli_ms"):
            c = p["cli_ms"]
            out["cli_warm"] = {"key_ms": c["key"], "build_ms": c["build"], "process_start_ms": c["--version"]}
    b = read("build.json")
    if b:
        out["cold_build_vs_torch"] = {"abicache_s": b["cold"]["abicache_s"], "reference_s": b["cold"]["torch_load_s"],
                                      "ratio": b["cold"]["ratio"]}
        out["warm_hit_process"] = {"abicache_ms": b["warm_hit"]["median_ms"]}
    return out


def write_latest(path: Path, figures: dict, rows: list) -> None:
    """Merges this run's `figures` into `path` (see the module's doc) and writes it."""
    def git(*argv: str) -> str:
        return subprocess.run(["git", *argv], capture_output=True, text=True,
                              cwd=Path(__file__).resolve().parent).stdout.strip()

    old = json.loads(path.read_text()) if path.is_file() else {}
    now = datetime.datetime.now(datetime.timezone.utc)
    round_id = now.strftime("%Y-%m-%d %H:%M UTC")
    rounds = dict(old.get("rounds", {}))
    rounds[round_id] = {
        "date": now.strftime("%Y-%m-%d"), "commit": git("rev-parse", "--short", "HEAD"),
        "uncommitted_changes": bool(git("status", "--porcelain", "--untracked-files=no")),
        "machine": f"{platform.machine()}, {os.cpu_count()} cores",
        "load_average": [round(x, 1) for x in os.getloadavg()],
        "summary": [list(r) for r in rows]}
    merged = dict(old.get("figures", {}))
    for name, value in figures.items():
        merged[name] = {**value, "round": round_id}
    used = {f["round"] for f in merged.values()}
    latest = {
        "about": "Headline benchmark figures (times in ms unless named _s/_us), written by "
                 "`benches/summary.py --write` (scripts/bench.sh); each figure names the round "
                 "that measured it. benches/readme_figures.py renders README.md's figures from it.",
        "figures": dict(sorted(merged.items())),
        "rounds": {k: v for k, v in sorted(rounds.items()) if k in used}}
    path.write_text(json.dumps(latest, indent=1, ensure_ascii=False) + "\n")
    print(f"summary: wrote {path}")


def print_rows(rows: list) -> None:
    print(f"\nSummary ({platform.machine()}, {os.cpu_count()} cores, load average "
          f"{' '.join(f'{x:.1f}' for x in os.getloadavg())})")
    if not rows:
        print("  no figures: none of the benchmarks' JSON files is in the work folder "
              "(run scripts/bench.sh, which writes them)")
        return
    w = [max(len(x[i]) for x in rows) for i in range(4)]
    for what, figure, target, ok in rows:
        print(f"  {what:<{w[0]}}  {figure:<{w[1]}}  {target:<{w[2]}}  {ok}")
    judged = [x for x in rows if x[3] != "-"]
    missed = sum(1 for x in judged if x[3] == "MISSED")
    print(f"  {len(judged) - missed} of {len(judged)} targets met"
          + ("; * = measured on a variant abicache accepts, see bench_gptq's note" if any("*" in x[3] for x in rows) else ""))


if __name__ == "__main__":
    main()
