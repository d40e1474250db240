"""The CPU check of the warm path: this CPU's identity and instruction-set
features as ``/proc/cpuinfo`` describes them, and whether a library's
required features are among them. Imported by ``abicache._warm_record``
only for a record or a spec that needs it (usually none does)."""

from __future__ import annotations

import os
from typing import List, Optional, Set, Tuple

from ._warm_record import WARM_CPU_IDENTITY_FIELDS, WARM_CPUINFO_READ

# This CPU as `/proc/cpuinfo`'s first processor describes it, read once per
# process: `(identity, feature names)`, Rust's `CpuFeatures::from_cpuinfo`
# restated (the identity: each `WARM_CPU_IDENTITY_FIELDS` field of that
# block, as `field=value` lines in the file's order; the names: its `flags`
# or `Features` words). Read as Rust's `running_cpu` reads it:
# `WARM_CPUINFO_READ` bytes at a time, only as far as that block's end (the
# kernel writes a page of processors' text per read, ~15 us a processor:
# two or three, not every processor of a many-core machine). Raises
# `OSError` or `ValueError` when unreadable.
_cpuinfo: Optional[Tuple[str, Set[str]]] = None


def running_cpu() -> Tuple[str, Set[str]]:
    global _cpuinfo
    if _cpuinfo is None:
        fd = os.open("/proc/cpuinfo", os.O_RDONLY | os.O_CLOEXEC)
        try:
            data = b""
            while True:
                chunk = os.read(fd, WARM_CPUINFO_READ)
                data += chunk
                # Whole lines only until the end (a chunk may end mid-line);
                # as Rust's `lines()`, no line after a final newline.
                text = data.decode("utf-8") if not chunk else data[: data.rfind(b"\n") + 1].decode("utf-8")
                lines = text.split("\n")
                if lines[-1] == "":
                    lines.pop()
                identity: List[str] = []
                names: Set[str] = set()
                ended = False
                for line in lines:
                    if not line.strip():
                        if identity:
                            ended = True  # one processor is enough: they are alike
                            break
                        continue
                    field, sep, value = line.partition(":")
                    if not sep:
                        continue
                    field = field.strip()
                    if field in WARM_CPU_IDENTITY_FIELDS:
                        identity.append(f"{field}={value.strip()}\n")
                    if field in ("flags", "Features"):
                        names.update(value.split())
                if ended or not chunk:
                    break
        finally:
            os.close(fd)
        _cpuinfo = ("".join(identity), names)
    return _cpuinfo


def isa_guard_passes(isa: List[List[str]]) -> bool:
    # Whether a library requiring the instruction-set extensions ``isa``
    # (the record's ``[feature, flag]`` rows, not empty) may be loaded on
    # the warm path: each feature among this CPU's ``/proc/cpuinfo`` flags,
    # unless ``ABICACHE_ISA_CHECK=0`` waives the guard. Any other value of
    # the variable, and a missing feature, is ``False``: left to the native
    # path, which refuses a library this CPU cannot run with the full
    # message (and also asks ``cpuid``, so it may still load one). Raises
    # ``OSError`` or ``ValueError`` when ``/proc/cpuinfo`` is unreadable.
    guard = os.environ.get("ABICACHE_ISA_CHECK", "").strip()
    if guard == "0":
        return True
    if guard not in ("", "1"):
        return False
    cpu = running_cpu()[1]
    for feature, _flag in isa:
        if feature not in cpu:
            return False
    return True
