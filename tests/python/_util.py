"""Shared helpers of the Python end-to-end tests: example specs, and running
a snippet in another interpreter (a fresh process, or the compat venv)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any, Dict, Optional

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "examples"
COMPAT_PYTHON = REPO / ".venv-compat" / "bin" / "python"


def abicache_wheel() -> Path:
    """The abicache wheel of this source state (``ABICACHE_TEST_WHEEL``, else
    built or found by scripts/install-python-package.sh --print-wheel)."""
    given = os.environ.get("ABICACHE_TEST_WHEEL")
    if given:
        return Path(given)
    out = subprocess.run(
        [str(REPO / "scripts" / "install-python-package.sh"), "--print-wheel"],
        capture_output=True, text=True, timeout=3600, cwd=REPO,
    )
    assert out.returncode == 0, out.stderr
    return Path(out.stdout.strip().splitlines()[-1])


def example_spec(which: str) -> Dict[str, Any]:
    """Keyword arguments of ``TorchOpsExtension`` for one of ``examples/``."""
    if which == "cpu":
        d = EXAMPLES / "cpu_muladd"
        return dict(name="muladd_example", sources=[str(d / "ops.cpp"), str(d / "kernel.cpp")], required_ops=["muladd"])
    if which == "stable":
        d = EXAMPLES / "stable_scale"
        return dict(
            name="stable_scale", sources=[str(d / "scale.cpp")], required_ops=["scale_shift"], torch_stable_abi_target=[2, 10]
        )
    if which == "cuda":
        d = EXAMPLES / "cuda_axpy"
        return dict(
            name="cuda_axpy", sources=[str(d / "ops.cpp"), str(d / "axpy_kernel.cu")], required_ops=["axpy"], cuda_archs="9.0"
        )
    raise ValueError(which)


_PRELUDE = """
import json, os, sys, warnings
warnings.simplefilter("ignore")
import torch, abicache
CACHE = os.environ["ABICACHE_TEST_CACHE"]
ARGS = json.loads(os.environ.get("ABICACHE_TEST_ARGS", "null"))
def emit(obj):
    print("RESULT " + json.dumps(obj), flush=True)
"""


def run_python(code: str, cache_dir: Path, args: Any = None, python: Optional[Path] = None,
               env: Optional[Dict[str, str]] = None) -> Dict[str, Any]:
    """Runs ``code`` (after a prelude importing torch and abicache) in a new
    process and returns what it passed to ``emit``; fails with its output otherwise."""
    python = python or Path(sys.executable)
    full_env = dict(os.environ, ABICACHE_TEST_CACHE=str(cache_dir), ABICACHE_TEST_ARGS=json.dumps(args))
    full_env.update(env or {})
    proc = subprocess.run(
        [str(python), "-c", _PRELUDE + textwrap.dedent(code)],
        capture_output=True, text=True, env=full_env, cwd=str(cache_dir.parent), timeout=900,
    )
    for line in proc.stdout.splitlines():
        if line.startswith("RESULT "):
            return json.loads(line[len("RESULT "):])
    raise AssertionError(
        f"`{python}` exited {proc.returncode} without a result\n--- stdout\n{proc.stdout}\n--- stderr\n{proc.stderr}"
    )


def compat_skip_reason() -> Optional[str]:
    """Why the compat venv cannot be used, or None when it can."""
    if not COMPAT_PYTHON.exists():
        return f"no compat venv at `{COMPAT_PYTHON}`: run `scripts/setup-venv.sh compat && scripts/install-python-package.sh`"
    proc = subprocess.run([str(COMPAT_PYTHON), "-c", "import abicache, torch"], capture_output=True, text=True)
    if proc.returncode != 0:
        return f"`abicache` or torch is not importable in `{COMPAT_PYTHON}`: run `scripts/install-python-package.sh`\n{proc.stderr}"
    return None
