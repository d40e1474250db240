"""What several benchmarks share: a fresh work directory, the builders'
environment, and the child-process snippets that time a load.

Imported by the benchmarks as `bench_common` (they run as scripts from
`benches/`, which is then first on `sys.path`).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Dict

# A timed child starts with PRELUDE (torch imported, the clock started), runs
# its loader, and ends with EPILOGUE: it checks the op is there and prints the
# seconds from after `import torch` to a loaded op.
PRELUDE = """
import sys, time, warnings
warnings.filterwarnings("ignore")
import torch
t0 = time.perf_counter()
"""
EPILOGUE = """
assert hasattr(torch.ops.muladd_example, "muladd")
print(time.perf_counter() - t0)
"""


def fresh_work_dir(work: Path, name: str) -> Path:
    """`work/name`, absolute, emptied and created."""
    path = (work / name).resolve()
    shutil.rmtree(path, ignore_errors=True)
    path.mkdir(parents=True)
    return path


def builder_env() -> Dict[str, str]:
    """The environment both builders run in: this venv's `bin` first on
    `PATH` (torch's load() runs its `ninja`, as an activated venv would),
    `MAX_JOBS` defaulting to the core count, and no compiler launcher."""
    env = dict(os.environ)
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    env.setdefault("MAX_JOBS", str(os.cpu_count()))
    env.pop("ABICACHE_COMPILER_LAUNCHER", None)
    return env


def abicache_build(abicache: Path, spec: Path, cache: Path, env: Dict[str, str]) -> dict:
    """`abicache build SPEC --json --quiet` for this interpreter, in its own
    process: the outcome, plus the whole process's seconds as `process_s`."""
    t = time.perf_counter()
    out = subprocess.run([str(abicache), "--cache-dir", str(cache), "build", str(spec), "--python", sys.executable,
                          "--json", "--quiet"], check=True, capture_output=True, text=True, env=env)
    result = json.loads(out.stdout)
    result["process_s"] = time.perf_counter() - t
    return result
