"""Real clients from PyPI, unmodified, through `abicache run` (the
interception of `torch.utils.cpp_extension.load`), against the same clients
with torch's own `load`, in one run:

- DeepSpeed 0.19.8 (`DS_BUILD_OPS=0`, `DS_ACCELERATOR=cpu`): `cpu_adam`,
  `cpu_adagrad`, `cpu_lion` JIT-built by its op builders, each optimizer
  checked against a pure-torch reference;
- GPTQModel 7.7.0 through its own loader (`gptqmodel/utils/cpp.py`,
  `TorchOpsJitExtension`): `pack_block_cpu` built and used.

For each client and each `load` (torch's, abicache's): a cold build, a warm
process, and a second venv with the same Python and torch at another path
(hard-linked copies: other paths, same bytes). Compiles are counted by a
`CXX` wrapper that logs every compiler call with `-c` (both torch's ninja
and abicache use `CXX`). Everything lives under `--work` (default
`benches/.work/intercept`); the side venvs are overlays of the project
venv's site-packages (torch is not downloaded again) and nothing is
installed into the project venvs.

    python3 benches/bench_intercept_clients.py --venv .venv --wheel dist/abicache-*.whl [--only deepspeed]

DeepSpeed's warm `load` is also compared with its floor: after the warm
case, `--floor-rounds` warm processes alternate with as many floor processes,
the same client with `load` replaced by importing the built module from its
path (`intercept_clients_driver.py --floor-libraries`).

Prints Markdown tables and writes `results.json` under the work directory.
Slow: about 10-15 minutes on 2 cores (9 DeepSpeed and 3 GPTQModel compiles of
`torch/extension.h` units).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Dict, List, Optional

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
DRIVER = HERE / "intercept_clients_driver.py"
PACKAGES = ["deepspeed==0.19.8", "PyPcre==0.6.4", "LogBar==0.4.15"]


def log(message: str) -> None:
    print(f"[intercept-clients] {message}", file=sys.stderr, flush=True)


def site_packages(python: Path) -> Path:
    out = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                         capture_output=True, text=True, check=True).stdout.strip()
    return Path(out)


def base_python(venv_python: Path) -> str:
    return subprocess.run([str(venv_python), "-c", "import sys; print(sys._base_executable)"],
                          capture_output=True, text=True, check=True).stdout.strip()


def side_venv(where: Path, base: str, torch_site: Path, wheel: Path) -> Path:
    """An overlay venv: a `.pth` to `torch_site`, the clients and the wheel in its own site-packages."""
    python = where / "bin" / "python"
    stamp = where / ".abicache-bench-stamp"
    wanted = json.dumps([str(torch_site), PACKAGES, str(wheel), wheel.stat().st_mtime])
    if stamp.is_file() and stamp.read_text() == wanted:
        return python
    if where.exists():
        shutil.rmtree(where)
    log(f"creating side venv {where}")
    subprocess.run([base, "-m", "venv", str(where)], check=True)
    (site_packages(python) / "_abicache_bench_torch.pth").write_text(str(torch_site) + "\n")
    env = dict(os.environ, DS_BUILD_OPS="0", DS_ACCELERATOR="cpu")
    subprocess.run([str(python), "-m", "pip", "install", "--quiet", *PACKAGES], check=True, env=env)
    subprocess.run([str(python), "-m", "pip", "install", "--quiet", "--no-deps", "--no-index", "--ignore-installed",
                    str(wheel)], check=True)
    stamp.write_text(wanted)
    return python


def compiler_wrapper(work: Path) -> Path:
    wrapper = work / "bin" / "c++"
    wrapper.parent.mkdir(parents=True, exist_ok=True)
    real = shutil.which("c++") or "/usr/bin/c++"
    wrapper.write_text(f'#!/bin/sh\nprintf "%s\\n" "$*" >> "$ABICACHE_BENCH_COMPILE_LOG"\nexec {real} "$@"\n')
    wrapper.chmod(0o755)
    return wrapper


def compiles(log_path: Path) -> int:
    if not log_path.exists():
        return 0
    return sum(1 for line in log_path.read_text().splitlines() if " -c " in f" {line} " and "--version" not in line)


def library_from(libraries: List[str], cache: Path) -> str:
    """`abicache cache` when every library the client mapped is a file of
    abicache's cache (or a hard link to one, as in GPTQModel's build root),
    else `client/torch build dir`."""
    entries = [p for p in cache.rglob("*.so")] if cache.is_dir() else []
    inodes = {(e.stat().st_dev, e.stat().st_ino) for e in entries}
    if libraries and all((os.stat(p).st_dev, os.stat(p).st_ino) in inodes for p in libraries):
        return "abicache cache"
    return "client/torch build dir"


def run_case(python: Path, client: str, how: str, dirs: Dict[str, Path], sdist: Path, work: Path,
             cxx: Path, label: str, tools: Path, floor_libraries: Optional[List[List[str]]] = None) -> Dict[str, Any]:
    out = work / "results" / f"{client}-{how}-{label}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    compile_log = work / "results" / f"{client}-{how}-{label}.compiles"
    compile_log.unlink(missing_ok=True)
    env = {k: v for k, v in os.environ.items() if k not in ("ABICACHE_INTERCEPT", "PYTHONPATH", "ABICACHE_DIR")}
    env.update(
        CXX=str(cxx),
        ABICACHE_BENCH_COMPILE_LOG=str(compile_log),
        TORCH_EXTENSIONS_DIR=str(dirs["torch"]),
        GPTQMODEL_TORCH_EXTENSIONS_DIR=str(dirs["gptq"]),
        DS_BUILD_OPS="0",
        DS_ACCELERATOR="cpu",
        ABICACHE_PCH="0",  # no background PCH build competing with the next case
        # ninja (torch's builds) is the project venv's: the overlay did not install it again.
        PATH=os.pathsep.join([str(python.parent), str(tools), os.environ.get("PATH", "")]),
        ABICACHE_BENCH_STATE=str(dirs["torch"].parent),
        PYTHONWARNINGS="ignore",
    )
    argv = [str(python), str(DRIVER), client, "--out", str(out)]
    if client == "gptq":
        argv += ["--sdist", str(sdist)]
    if floor_libraries is not None:
        argv += ["--floor-libraries", json.dumps(floor_libraries)]
    if how == "abicache":
        argv = [str(python.parent / "abicache"), "run", "--cache-dir", str(dirs["abicache"]), "--", *argv]
    started = time.perf_counter()
    proc = subprocess.run(argv, capture_output=True, text=True, env=env)
    wall = time.perf_counter() - started
    if proc.returncode != 0 or not out.exists():
        raise SystemExit(f"{client} {how} {label} failed (exit {proc.returncode}):\n{proc.stdout[-4000:]}\n"
                         f"{proc.stderr[-8000:]}")
    result = json.loads(out.read_text())
    result.update(wall=wall, compiles=compiles(compile_log), stderr_tail=proc.stderr[-2000:],
                  library_from=library_from(result["libraries"], dirs["abicache"]))
    if result["load_owner"] != how:
        raise SystemExit(f"{client} {how} {label}: torch.utils.cpp_extension.load was {result['load_owner']}'s")
    if how == "abicache" and result["library_from"] != "abicache cache":
        raise SystemExit(f"{client} {how} {label}: the client's libraries are not abicache's: {result['libraries']}")
    if how == "abicache" and label != "cold" and result["compiles"]:
        raise SystemExit(f"{client} {how} {label}: {result['compiles']} compiles, expected none")
    log(f"{client} {how} {label}: {wall:.1f} s, {result['compiles']} compiles, load "
        f"{sum(c['seconds'] for c in result['calls']):.3f} s in {len(result['calls'])} calls, "
        f"owner {result['load_owner']}, ok {result['ok']}")
    return result


def warm_against_floor(python: Path, dirs: Dict[str, Path], work: Path, cxx: Path, tools: Path, sdist: Path,
                       libraries: List[List[str]], rounds: int) -> Dict[str, Any]:
    """DeepSpeed's warm `load` calls through abicache against their floor:
    the same client process with `load` replaced by an import of the built
    module from its path (so both are timed at the same points of the
    client's work), `rounds` processes of each, alternating; per module and
    in total, medians in milliseconds."""
    times: Dict[str, Dict[str, List[float]]] = {"abicache": {}, "floor": {}}
    native: List[bool] = []
    for i in range(rounds):
        for how in (("abicache", "floor") if i % 2 == 0 else ("floor", "abicache")):
            r = run_case(python, "deepspeed", how, dirs, sdist, work, cxx, f"warm-{i + 2}", tools,
                         floor_libraries=libraries if how == "floor" else None)
            if how == "abicache":
                native.append(r["abicache_native_loaded"])
            for call in r["calls"]:
                times[how].setdefault(call["name"], []).append(call["seconds"] * 1e3)
            times[how].setdefault("total", []).append(sum(c["seconds"] for c in r["calls"]) * 1e3)
    rows = {}
    for name in times["abicache"]:
        w, f = statistics.median(times["abicache"][name]), statistics.median(times["floor"][name])
        rows[name] = {"warm_ms": w, "floor_ms": f, "ratio": w / f}
    # Whether a warm process loaded abicache's native module (False: every load
    # was answered by the warm-load record).
    return {"rounds": rounds, "rows": rows, "native_module_loaded": native, "times_ms": times}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--venv", type=Path, default=REPO / ".venv", help="the project venv (torch), read only")
    parser.add_argument("--wheel", type=Path, required=True, help="the abicache wheel to install into the side venvs")
    parser.add_argument("--work", type=Path, default=HERE / ".work" / "intercept")
    parser.add_argument("--gptq-sdist", type=Path, default=HERE / ".work" / "gptqmodel-7.7.0")
    parser.add_argument("--only", choices=["deepspeed", "gptq"])
    parser.add_argument("--floor-rounds", type=int, default=7,
                        help="warm DeepSpeed processes (and as many floor processes) for its warm load vs floor")
    args = parser.parse_args()
    work = args.work.resolve()
    work.mkdir(parents=True, exist_ok=True)
    project_python = (args.venv / "bin" / "python").absolute()
    base = base_python(project_python)
    torch_site = site_packages(project_python)

    # Venv A uses the project venv's torch; venv B a hard-linked copy at another path.
    venv_a = side_venv(work / "venv-a", base, torch_site, args.wheel.resolve())
    site_b = work / "site-b"
    if not (site_b / "torch").is_dir():
        log(f"hard-linking {torch_site} to {site_b} (same bytes, another path)")
        shutil.rmtree(site_b, ignore_errors=True)
        subprocess.run(["cp", "-al", str(torch_site), str(site_b)], check=True)
    venv_b = side_venv(work / "venv-b", base, site_b, args.wheel.resolve())
    sdist_a = args.gptq_sdist.resolve()
    sdist_b = work / "gptqmodel-b"
    if not (sdist_b / "gptqmodel").is_dir():
        shutil.copytree(sdist_a, sdist_b, symlinks=True)
    cxx = compiler_wrapper(work)
    tools = project_python.parent

    clients = [args.only] if args.only else ["deepspeed", "gptq"]
    results: Dict[str, Dict[str, Dict[str, Any]]] = {}
    versus: Dict[str, Any] = {}
    for client in clients:
        for how in ("torch", "abicache"):
            state = work / "state" / f"{client}-{how}"
            shutil.rmtree(state, ignore_errors=True)
            dirs = {name: state / name for name in ("torch", "gptq", "abicache")}
            cases = results.setdefault(client, {}).setdefault(how, {})
            cases["cold"] = run_case(venv_a, client, how, dirs, sdist_a, work, cxx, "cold", tools)
            cases["warm"] = run_case(venv_a, client, how, dirs, sdist_a, work, cxx, "warm", tools)
            if client == "deepspeed" and how == "abicache":
                # The warm `load` calls (venv A, from the cache the warm case hit)
                # against their floor.
                libraries = [[c["name"], c["path"]] for c in cases["warm"]["calls"]]
                versus = warm_against_floor(
                    venv_a, dirs, work, cxx, tools, sdist_a, libraries, args.floor_rounds)
            cases["second venv"] = run_case(venv_b, client, how, dirs, sdist_b, work, cxx, "second-venv", tools)
            if client == "gptq":
                # GPTQModel finds its own library in its build root before it calls `load`
                # (warm and second venv above); a user or job whose root is empty calls it.
                fresh = dict(dirs, gptq=state / "gptq-fresh")
                cases["empty GPTQModel root"] = run_case(venv_b, client, how, fresh, sdist_b, work, cxx,
                                                         "empty-root", tools)
    (work / "results.json").write_text(json.dumps({"cases": results, "deepspeed_warm_vs_floor": versus}, indent=1))

    print("| client | case | `load` | wall (process) | time in `load` | `load` calls | compiles | library from | check |")
    print("|---|---|---|---|---|---|---|---|---|")
    for client, hows in results.items():
        for case in ("cold", "warm", "second venv", "empty GPTQModel root"):
            for how in ("torch", "abicache"):
                if case not in hows[how]:
                    continue
                r = hows[how][case]
                in_load = sum(c["seconds"] for c in r["calls"])
                check = ("max diff " + ", ".join(f"{k} {v:.1e}" for k, v in r["max_abs_diff"].items())
                         if "max_abs_diff" in r else ("pack_block_cpu exact" if r["ok"] else "FAILED"))
                shown = f"{in_load:.1f} s" if in_load >= 1 else f"{in_load * 1e3:.1f} ms"
                print(f"| {client} | {case} | {how}'s | {r['wall']:.1f} s | {shown} | "
                      f"{len(r['calls'])} | {r['compiles']} | {r['library_from']} | {check} |")
    if versus:
        print(f"\nDeepSpeed's warm `load` (through abicache) against its floor: the same client with `load` "
              f"replaced by importing the built module from its path (medians of {versus['rounds']} processes "
              f"each, alternating; abicache's native module loaded in {sum(versus['native_module_loaded'])} of them)")
        print("| module | warm `load` | floor | ratio | target |")
        print("|---|---|---|---|---|")
        for name, row in versus["rows"].items():
            ok = "ok" if row["ratio"] <= 2 else "MISSED"
            print(f"| {name} | {row['warm_ms']:.2f} ms | {row['floor_ms']:.2f} ms | {row['ratio']:.2f}x | <= 2x {ok} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
