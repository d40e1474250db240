"""Prints the one table of all benchmark figures against their targets.

    python3 benches/summary.py benches/.work

Reads what the benchmark scripts of this run wrote (see scripts/bench.sh,
which clears the folder's JSON first): `gptq.json`, `tree.json`,
`build.json`, `warm.json`, `warm_paths.json`, `cold-key-{machete,tree}.json`;
a row whose file is missing (a benchmark `bench.sh --floors` skips) is left out.
"""

from __future__ import annotations

import json
import os
import platform
import sys
from pathlib import Path


def main() -> None:
    work = Path(sys.argv[1])
    def read(name: str) -> object:
        # A figure of this run, or None when its benchmark did not run (`bench.sh --floors`).
        path = work / name
        return json.loads(path.read_text()) if path.is_file() else None

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
        return print_rows(rows)
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
    print_rows(rows)


def print_rows(rows: list) -> None:
    print(f"\nSummary ({platform.machine()}, {os.cpu_count()} cores, load average "
          f"{' '.join(f'{x:.1f}' for x in os.getloadavg())})")
    w = [max(len(x[i]) for x in rows) for i in range(4)]
    for what, figure, target, ok in rows:
        print(f"  {what:<{w[0]}}  {figure:<{w[1]}}  {target:<{w[2]}}  {ok}")
    judged = [x for x in rows if x[3] != "-"]
    missed = sum(1 for x in judged if x[3] == "MISSED")
    print(f"  {len(judged) - missed} of {len(judged)} targets met"
          + ("; * = measured on a variant abicache accepts, see bench_gptq's note" if any("*" in x[3] for x in rows) else ""))


if __name__ == "__main__":
    main()
