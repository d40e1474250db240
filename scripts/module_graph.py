#!/usr/bin/env python3
"""Lists each crate's module graph and the cycles in it.

    scripts/module_graph.py [--fine] [--crates-dir DIR] [--check CRATE...] [CRATE...]
                                  (default: every crate in crates/)

A module depends on another when its code outside `#[cfg(test)]` names it:
`use crate::a::X`, `crate::a::f()`, `use super::b`, or an item the crate
root re-exports from it (`crate::Error` when `lib.rs` has
`pub use error::Error`). By default the graph is of the crate's top-level
modules (a submodule counts as its top-level module, and uses inside one
top-level module are not edges); `--fine` keeps every module path.

Prints, per crate, each module's dependencies and then every cycle (a
strongly connected set of two or more modules, with one edge of each pair
named by its file and line). With `--check CRATE...`, exits 1 when one of
those crates has a cycle. Reads the sources as text (stdlib only): a path
written through a macro or an alias is not seen.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
IDENT = r"[A-Za-z_][A-Za-z0-9_]*"


def module_files(src: Path) -> dict[tuple[str, ...], Path]:
    """Every module of the crate whose root is `src/lib.rs` (or `main.rs`), by path."""
    modules: dict[tuple[str, ...], Path] = {}
    for path in sorted(src.rglob("*.rs")):
        rel = path.relative_to(src).with_suffix("").parts
        if rel in (("lib",), ("main",)):
            modules[()] = path
        elif rel[-1] == "mod":
            modules[rel[:-1]] = path
        else:
            modules[rel] = path
    return modules


def code_outside_tests(text: str) -> list[tuple[int, str]]:
    """The file's lines (numbered from 1) without comments and without the
    items that follow a `#[cfg(test)]` attribute (a test module's braces
    counted through)."""
    lines = text.splitlines()
    out: list[tuple[int, str]] = []
    skip_depth = None  # brace depth to return to, inside a #[cfg(test)] item
    pending_test = False
    depth = 0
    for number, raw in enumerate(lines, 1):
        line = re.sub(r"//.*", "", raw)
        stripped = line.strip()
        if skip_depth is None and stripped.startswith("#[cfg(test)]"):
            pending_test = True
            continue
        opens, closes = line.count("{"), line.count("}")
        if pending_test and skip_depth is None and stripped and not stripped.startswith("#["):
            pending_test = False
            if opens > closes:
                skip_depth = depth
                depth += opens - closes
                continue
            if stripped.endswith(";"):
                continue  # `#[cfg(test)] mod tests;` or a test-only `use`
        depth += opens - closes
        if skip_depth is not None:
            if depth <= skip_depth:
                skip_depth = None
            continue
        out.append((number, line))
    return out


def root_reexports(text: str) -> dict[str, str]:
    """Names the crate root re-exports from one of its modules: name -> module."""
    names: dict[str, str] = {}
    for match in re.finditer(r"pub\s+use\s+(" + IDENT + r")::(\{[^;]*\}|[^;]*);", text):
        module, rest = match.group(1), match.group(2)
        if module in ("crate", "self", "super") or not rest:
            continue
        items = rest.strip("{}") if rest.startswith("{") else rest
        for item in items.split(","):
            item = item.strip()
            if not item:
                continue
            alias = re.search(r"\bas\s+(" + IDENT + r")$", item)
            names[alias.group(1) if alias else item.split("::")[-1]] = module
    return names


def referenced_paths(code: list[tuple[int, str]]) -> list[tuple[int, str, list[str]]]:
    """(line, anchor, segments) for every `crate::`/`super::` path, groups expanded."""
    text = "\n".join(line for _, line in code)
    starts = [0]
    for _, line in code:
        starts.append(starts[-1] + len(line) + 1)
    numbers = [n for n, _ in code]

    def line_of(offset: int) -> int:
        lo, hi = 0, len(code) - 1
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if starts[mid] <= offset:
                lo = mid
            else:
                hi = mid - 1
        return numbers[lo] if numbers else 0

    found = []
    for match in re.finditer(r"\b(crate|super)((?:::super)*)::", text):
        anchor = match.group(1) + match.group(2).replace("::", " ")
        rest = text[match.end():]
        if rest.startswith("{"):
            depth, end = 0, 0
            for i, ch in enumerate(rest):
                depth += ch == "{"
                depth -= ch == "}"
                if depth == 0:
                    end = i
                    break
            for item in split_top_level(rest[1:end]):
                segs = re.findall(IDENT, re.split(r"\s+as\s+", item)[0])
                if segs:
                    found.append((line_of(match.start()), anchor, segs))
        else:
            path = re.match(r"(" + IDENT + r"(?:::" + IDENT + r")*)", rest)
            if path:
                found.append((line_of(match.start()), anchor, path.group(1).split("::")))
    return found


def split_top_level(group: str) -> list[str]:
    items, depth, current = [], 0, ""
    for ch in group:
        if ch == "," and depth == 0:
            items.append(current)
            current = ""
            continue
        depth += ch == "{"
        depth -= ch == "}"
        current += ch
    items.append(current)
    # `a::{X, Y}` counts as `a`; `X as Y` keeps its spaces for the caller's split.
    return [re.sub(r"\s+", " ", i.split("::{")[0]).strip() for i in items if i.strip()]


def graph(crate: Path, fine: bool) -> tuple[dict[str, set[str]], dict[tuple[str, str], str]]:
    src = crate / "src"
    modules = module_files(src)
    root = modules.get(())
    reexports = root_reexports(root.read_text()) if root else {}
    edges: dict[str, set[str]] = {}
    where: dict[tuple[str, str], str] = {}

    def name(path: tuple[str, ...]) -> str:
        return "::".join(path if fine else path[:1]) or "crate"

    for path, file in modules.items():
        if not path:
            continue
        source = name(path)
        edges.setdefault(source, set())
        for number, anchor, segs in referenced_paths(code_outside_tests(file.read_text())):
            base = () if anchor == "crate" else path[: len(path) - anchor.count("super")]
            full = base + tuple(segs)
            # The longest module path the reference names, else a root re-export.
            target = max((m for m in modules if m and full[: len(m)] == m), key=len, default=None)
            if target is None and len(full) >= 1 and full[:1] == (segs[0],) and not base:
                module = reexports.get(segs[0])
                target = (module,) if module and (module,) in modules else None
            if target is None:
                continue
            dest = name(target)
            if dest != source and dest != "crate":
                edges[source].add(dest)
                where.setdefault((source, dest), f"{file.relative_to(crate.parent.parent)}:{number}")
    return edges, where


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected sets of two or more modules (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = [0]

    def visit(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        for w in sorted(edges.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    sys.setrecursionlimit(10000)
    for v in sorted(edges):
        if v not in index:
            visit(v)
    return found


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("crates", nargs="*", help="crate directory names under crates/ (default: all)")
    parser.add_argument("--fine", action="store_true", help="every module path, not only top-level modules")
    parser.add_argument("--crates-dir", type=Path, default=REPO / "crates",
                        help="the folder holding the crates (default: this checkout's crates/)")
    parser.add_argument("--check", nargs="+", metavar="CRATE", default=[],
                        help="exit 1 when one of these crates has a module cycle")
    args = parser.parse_args()
    crates_dir = args.crates_dir.resolve()
    names = list(args.crates) or list(args.check) or sorted(
        p.name for p in crates_dir.iterdir() if (p / "src").is_dir())
    names += [c for c in args.check if c not in names]
    failed = []
    for crate_name in names:
        crate = crates_dir / crate_name
        if not (crate / "src").is_dir():
            print(f"module_graph: no crate `{crate_name}` (no `{crate / 'src'}`)", file=sys.stderr)
            return 2
        edges, where = graph(crate, args.fine)
        print(f"{crate_name}:")
        for module in sorted(edges):
            print(f"  {module} -> {', '.join(sorted(edges[module])) or '(nothing)'}")
        found = cycles(edges)
        for component in found:
            members = set(component)
            print(f"  CYCLE: {' <-> '.join(component)}")
            for a in component:
                for b in sorted(edges[a] & members):
                    print(f"    {a} -> {b}  ({where[(a, b)]})")
        if found and crate_name in args.check:
            failed.append(crate_name)
    if failed:
        print(f"module_graph: module cycles in {', '.join(failed)} (above: each edge with the line that makes it)",
              file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
