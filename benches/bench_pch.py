"""Issue 13 benchmark: cold builds with shared precompiled headers and relocatable objects.

Run with the project venv's interpreter (it needs torch):

    .venv/bin/python benches/bench_pch.py --abicache target/release/abicache --work benches/.work

Measured side by side in one run, against `torch.utils.cpp_extension.load`
(ninja, `is_python_module=False`, a fresh build directory each time, the same
sources and `MAX_JOBS`), the order of the two builders alternating from one
extension to the next:

1. three different 3-unit extensions whose units all start with
   `#include <torch/extension.h>`, built one after another on one abicache
   cache: the first on an empty cache (no PCH; a first need, which starts
   none), then an untimed second build of the first extension with one unit
   touched (the second need: abicache starts the PCH in the background after
   it), then, once that background PCH is ready (the wait is reported, not
   counted), the second and third ("a machine that has built one before");
2. the first extension copied into a second directory with one unit edited
   (a second checkout): abicache must compile exactly that unit; torch
   compiles all three (its build directory is per checkout);
3. disk: the size of the PCH directory;
4. the 4-unit `benches/ext4` extension (its units do not start with an
   umbrella header, so PCHs do not apply) and `examples/cuda_axpy` (one `.cu`
   unit through nvcc from NVIDIA's wheels, plus one `.cpp`), each on the same
   cache, the order of the builders alternating. torch needs a `CUDA_HOME`
   with `lib64/libcudart.so`, which the wheels lack: the benchmark makes one
   of symlinks in the work dir.

Prints a table and writes `pch.json` in the work dir.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

from bench_build import copy_ext4
from bench_common import abicache_build, builder_env, fresh_work_dir

TORCH_LOAD = r"""
import json, sys, time
t0 = time.perf_counter()
import torch
from torch.utils.cpp_extension import load
t1 = time.perf_counter()
name, build_dir, sources = sys.argv[1], sys.argv[2], sys.argv[3:]
path = load(name=name, sources=sources, build_directory=build_dir, is_python_module=False, verbose=False)
print(json.dumps({"import_s": t1 - t0, "load_s": time.perf_counter() - t1, "path": str(path)}))
"""

UNITS = 3


def log(msg: str) -> None:
    print(f"[pch] {msg}", file=sys.stderr, flush=True)


def write_extension(dir: Path, name: str, variant: int) -> list[str]:
    """A 3-unit extension: `ops.cpp` registers two ops defined in `op1.cpp`, `op2.cpp`."""
    dir.mkdir(parents=True)
    sources = ["ops.cpp"] + [f"op{i}.cpp" for i in range(1, UNITS)]
    (dir / "ops.cpp").write_text(
        "#include <torch/extension.h>\n\n"
        + "".join(f"at::Tensor op{i}(const at::Tensor& x, double s);\n" for i in range(1, UNITS))
        + f"\nTORCH_LIBRARY({name}, m) {{\n"
        + "".join(f'  m.def("op{i}(Tensor x, float s) -> Tensor", &op{i});\n' for i in range(1, UNITS))
        + "}\n"
    )
    for i in range(1, UNITS):
        (dir / f"op{i}.cpp").write_text(
            "#include <torch/extension.h>\n\n"
            f"at::Tensor op{i}(const at::Tensor& x, double s) {{\n"
            f'  TORCH_CHECK(x.dim() > 0, "op{i}: scalar input");\n'
            f"  return x * (s + {variant * 10 + i}) + x.abs().clamp_max({variant + i});\n"
            "}\n"
        )
    (dir / "abicache.toml").write_text(
        f'[[extension]]\nname = "{name}"\nsources = {json.dumps(sources)}\n'
        f'required_ops = {json.dumps([f"op{i}" for i in range(1, UNITS)])}\n'
    )
    return sources


def torch_load(name: str, src: Path, sources: list[str], build_dir: Path, env: dict) -> dict:
    build_dir.mkdir(parents=True)
    out = subprocess.run([sys.executable, "-W", "ignore", "-c", TORCH_LOAD, name, str(build_dir),
                          *[str(src / s) for s in sources]], capture_output=True, text=True, env=env)
    if out.returncode != 0:
        raise RuntimeError(f"torch's load() of {name} failed:\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def wait_for_pch(cache: Path, timeout: float) -> tuple[float, Path | None]:
    """Seconds until a finished PCH directory appears under `v1/pch/` (or a failed one)."""
    t = time.perf_counter()
    root = cache / "v1" / "pch"
    while time.perf_counter() - t < timeout:
        for d in root.glob("*") if root.is_dir() else []:
            if d.suffix == ".failed":
                log(f"PCH build failed: {(d / 'abicache-pch.log').read_text()[-2000:]}")
                return time.perf_counter() - t, None
            if (d / "abicache-pch.h.gch").is_file():
                return time.perf_counter() - t, d
        time.sleep(0.5)
    return time.perf_counter() - t, None


REPO = Path(__file__).resolve().parent.parent


def cuda_home(work: Path) -> Path | None:
    """A CUDA_HOME for torch made of symlinks into the venv's NVIDIA wheel (`None` without one)."""
    import site
    for sp in site.getsitepackages():
        wheel = Path(sp) / "nvidia" / "cu13"
        if (wheel / "bin" / "nvcc").is_file():
            break
    else:
        return None
    home = work / "cuda_home"
    (home / "lib64").mkdir(parents=True)
    for part in ("bin", "include", "nvvm"):
        (home / part).symlink_to(wheel / part)
    for lib in (wheel / "lib").iterdir():
        (home / "lib64" / lib.name).symlink_to(lib)
    (home / "lib64" / "libcudart.so").symlink_to(wheel / "lib" / "libcudart.so.13")
    return home


def side_by_side(label: str, copy, sources: list[str], first: str, args, cache: Path,
                 work: Path, env: dict) -> dict:
    """One extension built by both, in the order given, each on a fresh copy
    of its sources (`copy(dest)` makes one)."""
    row = {"name": label, "order": (first, "torch" if first == "abicache" else "abicache")}
    for who in row["order"]:
        src = work / f"src-{who}-{label}"
        copy(src)
        log(f"{label}: {who}")
        if who == "abicache":
            row["abicache"] = abicache_build(args.abicache, src / "abicache.toml", cache, env)
            log(f"  {row['abicache']['process_s']:.1f} s")
        else:
            row["torch"] = torch_load(label, src, sources, work / f"torch-{label}", env)
            log(f"  {row['torch']['load_s']:.1f} s")
    return row


def dir_bytes(d: Path) -> int:
    return sum(f.stat().st_size for f in d.rglob("*") if f.is_file())


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--abicache", type=Path, required=True)
    ap.add_argument("--work", type=Path, required=True)
    args = ap.parse_args()
    work = fresh_work_dir(args.work, "pch")
    env = builder_env()
    env.pop("ABICACHE_PCH", None)
    cache = work / "abicache-cache"
    load_start = os.getloadavg()

    rows = []
    pch_wait = None
    pch_dir = None
    for n in range(3):
        name = f"pch_bench_{n + 1}"
        src = work / name
        sources = write_extension(src, name, n + 1)
        order = ("abicache", "torch") if n % 2 == 0 else ("torch", "abicache")
        row = {"name": name, "order": order}
        for who in order:
            log(f"{name}: {who}")
            if who == "abicache":
                row["abicache"] = abicache_build(args.abicache, src / "abicache.toml", cache, env)
                log(f"  {row['abicache']['process_s']:.1f} s, pch units {row['abicache'].get('pch_units', [])}")
            else:
                row["torch"] = torch_load(name, src, sources, work / f"torch-{name}", env)
                log(f"  {row['torch']['load_s']:.1f} s")
        rows.append(row)
        if n == 0:
            # A PCH starts on the second build that needs it: an untimed rebuild of the
            # first extension with one unit touched (one unit compiled) is that need.
            touched = work / "second-need" / name
            shutil.copytree(src, touched)
            (touched / "op1.cpp").write_text((touched / "op1.cpp").read_text() + "\n// second need\n")
            log("second need (untimed): the first extension with one unit touched")
            abicache_build(args.abicache, touched / "abicache.toml", cache, env)
            log("waiting for the background PCH (not counted)")
            pch_wait, pch_dir = wait_for_pch(cache, 1800)
            log(f"  {pch_wait:.1f} s")

    # A second checkout of the first extension with one unit edited.
    first = work / rows[0]["name"]
    second = work / "second-checkout" / rows[0]["name"]
    shutil.copytree(first, second)
    (second / "op2.cpp").write_text((second / "op2.cpp").read_text().replace("clamp_max", "clamp_min"))
    log("second checkout, one unit edited: abicache, then torch")
    moved = {"abicache": abicache_build(args.abicache, second / "abicache.toml", cache, env)}
    moved["torch"] = torch_load(rows[0]["name"], second, ["ops.cpp", "op1.cpp", "op2.cpp"],
                                work / "torch-second-checkout", env)
    log(f"  abicache {moved['abicache']['process_s']:.1f} s (compiled {moved['abicache']['compiled']}), "
        f"torch {moved['torch']['load_s']:.1f} s")

    others = [side_by_side("ext4_bench", copy_ext4,
                           ["ops.cpp", "muladd.cpp", "scale_shift.cpp", "clamp_abs.cpp"], "torch", args,
                           cache, work, env)]
    home = cuda_home(work)
    if home is None:
        log("no nvcc in the venv's NVIDIA wheels: the CUDA row is skipped")
    else:
        cuda_env = dict(env, CUDA_HOME=str(home), TORCH_CUDA_ARCH_LIST="9.0")
        example = REPO / "examples" / "cuda_axpy"
        others.append(side_by_side("cuda_axpy", lambda dest: shutil.copytree(example, dest),
                                   ["ops.cpp", "axpy_kernel.cu"], "abicache", args, cache, work, cuda_env))

    result = {
        "max_jobs": env["MAX_JOBS"],
        "load_average_start": load_start,
        "load_average_end": os.getloadavg(),
        "rows": rows,
        "pch_wait_s": pch_wait,
        "pch_bytes": dir_bytes(pch_dir) if pch_dir else None,
        "second_checkout": moved,
        "others": others,
    }
    (args.work / "pch.json").write_text(json.dumps(result, indent=1))

    print(f"\nIssue 13: 3-unit torch/extension.h extensions (MAX_JOBS={env['MAX_JOBS']}; abicache = whole "
          "process, torch = the load() call; builder order alternates)")
    for i, row in enumerate(rows):
        a, t = row["abicache"]["process_s"], row["torch"]["load_s"]
        what = "first build, empty cache" if i == 0 else "new extension, PCH ready"
        target = 1.2 if i == 0 else 0.5
        print(f"  {row['name']}  {what:26s} abicache {a:6.2f} s  torch {t:6.2f} s  ratio {a / t:.2f}  "
              f"target <= {target}  {'ok' if a / t <= target else 'MISSED'}  "
              f"(pch units {len(row['abicache'].get('pch_units', []))}/{UNITS})")
    if pch_wait is not None:
        size = f"{result['pch_bytes'] / 2**20:.0f} MiB" if result["pch_bytes"] else "none (failed)"
        print(f"  background PCH ready {pch_wait:.1f} s after the second build needing it returned; size {size}")
    m = moved
    print(f"  second checkout, one unit edited: abicache {m['abicache']['process_s']:.2f} s, compiled "
          f"{m['abicache']['compiled']} ({'ok' if len(m['abicache']['compiled']) == 1 else 'MISSED'}: target "
          f"exactly 1); torch {m['torch']['load_s']:.2f} s (all {UNITS})")
    for row in others:
        a, t = row["abicache"]["process_s"], row["torch"]["load_s"]
        print(f"  {row['name']:12s} first build, same cache  abicache {a:6.2f} s  torch {t:6.2f} s  "
              f"ratio {a / t:.2f}  target <= 1.2  {'ok' if a / t <= 1.2 else 'MISSED'}  "
              f"(order {'/'.join(row['order'])})")
    print(f"  load average {result['load_average_start'][0]:.1f} at the start, "
          f"{result['load_average_end'][0]:.1f} at the end")


if __name__ == "__main__":
    main()
