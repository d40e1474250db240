"""The GPU check of the warm path: this machine's GPUs (read once per
process, with no CUDA context and no native module) and whether a CUDA
library's device code can run on every visible one. Imported by
``abicache._warm_record`` only for a record whose library carries device
code."""

from __future__ import annotations

import os
from typing import Dict, List, Optional, Tuple

# Restates `crates/abicache/src/gpu.rs` (the native guard, which words the
# refusal): the GPUs come from NVML (`libnvidia-ml.so.1`), else from
# `nvidia-smi --query-gpu=index,name,compute_cap,uuid`, once per process;
# `CUDA_VISIBLE_DEVICES` selects among them as CUDA reads it (indices in
# that order, `GPU-` UUID prefixes, up to the first entry naming no GPU;
# empty: none; a `MIG-` entry: all). Each visible GPU must be served by an
# image under CUDA's rules (`abicache_fatbin::runs_on`): SASS `sm_XY` runs
# on `X.y` with `y >= Y`; `sm_XYa` only on `X.Y`; `sm_XYf` on its family
# (`X.y`, `y >= Y`); PTX `compute_XY` on any capability `>= X.Y` (`a`: only
# `X.Y`; `f`: its family). Anything this module cannot decide is `False`:
# left to the native path, which answers with the full message.

# A GPU: (index, name, (major, minor), uuid).
Gpu = Tuple[int, str, Tuple[int, int], str]

_machine: Optional[List[Gpu]] = None
# (CUDA_VISIBLE_DEVICES, images) -> verdict, for this process.
_verdicts: Dict[Tuple[Optional[str], Tuple[str, ...]], bool] = {}


def parse_nvidia_smi(text: str) -> List[Gpu]:
    # `index, name, compute_cap[, uuid]` lines; lines that do not parse are skipped.
    gpus: List[Gpu] = []
    for line in text.splitlines():
        fields = [f.strip() for f in line.split(",")]
        uuid = fields.pop() if fields and fields[-1].startswith("GPU-") else ""
        if len(fields) < 3:
            continue
        try:
            major, minor = fields[-1].split(".")
            gpus.append((int(fields[0]), ", ".join(fields[1:-1]), (int(major), int(minor)), uuid))
        except ValueError:
            continue
    return gpus


def _nvml() -> Optional[List[Gpu]]:
    import ctypes

    try:
        lib = ctypes.CDLL("libnvidia-ml.so.1")
    except OSError:
        return None
    try:
        if lib.nvmlInit_v2() != 0:
            return None
        count = ctypes.c_uint(0)
        gpus: List[Gpu] = []
        if lib.nvmlDeviceGetCount_v2(ctypes.byref(count)) != 0:
            lib.nvmlShutdown()
            return None
        for index in range(count.value):
            device = ctypes.c_void_p()
            major, minor = ctypes.c_int(0), ctypes.c_int(0)
            if lib.nvmlDeviceGetHandleByIndex_v2(index, ctypes.byref(device)) != 0:
                continue
            if lib.nvmlDeviceGetCudaComputeCapability(device, ctypes.byref(major), ctypes.byref(minor)) != 0:
                continue
            name = ctypes.create_string_buffer(128)
            uuid = ctypes.create_string_buffer(128)
            lib.nvmlDeviceGetName(device, name, 128)
            lib.nvmlDeviceGetUUID(device, uuid, 128)
            gpus.append((index, name.value.decode(errors="replace"), (major.value, minor.value), uuid.value.decode(errors="replace")))
        lib.nvmlShutdown()
        return gpus
    except AttributeError:
        return None


def machine_gpus() -> List[Gpu]:
    global _machine
    if _machine is None:
        found = None if os.environ.get("ABICACHE_TEST_ONLY_NO_NVML") == "1" else _nvml()
        if found is None:
            import subprocess

            try:
                out = subprocess.run(
                    ["nvidia-smi", "--query-gpu=index,name,compute_cap,uuid", "--format=csv,noheader"],
                    stdin=subprocess.DEVNULL,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.DEVNULL,
                    check=False,
                )
                found = parse_nvidia_smi(out.stdout.decode(errors="replace")) if out.returncode == 0 else []
            except OSError:
                found = []
        _machine = found
    return _machine


def visible_among(gpus: List[Gpu], visible: Optional[str]) -> List[Gpu]:
    if visible is None:
        return list(gpus)
    chosen: List[Gpu] = []
    for entry in (e.strip() for e in visible.split(",")):
        if entry.startswith("MIG-"):
            return list(gpus)
        found = None
        if entry.startswith("GPU-"):
            found = next((g for g in gpus if g[3] and g[3].startswith(entry)), None)
        elif entry.isdigit():
            found = next((g for g in gpus if g[0] == int(entry)), None)
        if found is None:
            break
        if found not in chosen:
            chosen.append(found)
    return chosen


def _image(text: str) -> Optional[Tuple[bool, int, int, str]]:
    # `sm_90a` -> (ptx, major, minor, variant); None when unreadable.
    ptx = text.startswith("compute_")
    number = text[len("compute_") :] if ptx else text[3:] if text.startswith("sm_") else ""
    variant = number[-1] if number[-1:] in ("a", "f") else ""
    digits = number[: len(number) - len(variant)]
    if not (2 <= len(digits) <= 4 and digits.isdigit()):
        return None
    return (ptx, int(digits) // 10, int(digits) % 10, variant)


def serves(images: List[str], cap: Tuple[int, int]) -> bool:
    for text in images:
        image = _image(text)
        if image is None:
            continue
        ptx, major, minor, variant = image
        if variant == "a":
            ok = cap == (major, minor)
        elif variant == "f" or not ptx:
            ok = cap[0] == major and cap[1] >= minor
        else:
            ok = cap >= (major, minor)
        if ok:
            return True
    return False


def guard_passes(images: List[str]) -> bool:
    # Whether a library carrying `images` (the record's, not empty) may be
    # loaded on the warm path: `ABICACHE_GPU_CHECK=0`, or no visible GPU,
    # or an image serves each visible GPU. Any other value of the variable
    # is `False` (the native path words its error).
    guard = os.environ.get("ABICACHE_GPU_CHECK", "").strip()
    if guard == "0":
        return True
    if guard not in ("", "1"):
        return False
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    memo = (visible, tuple(images))
    verdict = _verdicts.get(memo)
    if verdict is None:
        verdict = all(serves(images, gpu[2]) for gpu in visible_among(machine_gpus(), visible))
        _verdicts[memo] = verdict
    return verdict
