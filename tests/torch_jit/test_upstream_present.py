"""Says, in the test report, whether PyTorch's JIT-extension tests ran."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

UPSTREAM = Path(__file__).resolve().parent / "upstream"
NEEDED = [
    "LICENSE",
    "test_cpp_extensions_jit.py",
    "cpp_extensions/jit_extension.cpp",
    "cpp_extensions/jit_extension2.cpp",
    "cpp_extensions/doubler.h",
    "cpp_extensions/cpp_frontend_extension.cpp",
    "cpp_extensions/identity.cpp",
]


def machine_copy() -> Path:
    """Where ``scripts/link-torch-jit-upstream.sh`` looks for this machine's
    copy of PyTorch's files (``$ABICACHE_DEV_HOME/torch-jit-upstream``)."""
    dev_home = os.environ.get("ABICACHE_DEV_HOME") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "abicache-dev"
    )
    return Path(dev_home) / "torch-jit-upstream"


def test_pytorch_jit_extension_tests_are_present() -> None:
    missing = [p for p in NEEDED if not (UPSTREAM / p).is_file()]
    if missing:
        pytest.skip(
            "PyTorch's test/test_cpp_extensions_jit.py and test/cpp_extensions/ are not on this machine "
            f"(missing in `{UPSTREAM}`: {', '.join(missing)}). They are kept per machine, never in git: "
            f"put them in `{machine_copy()}` (laid out as PyTorch's test/, with its LICENSE), from the "
            "PyTorch release matching the venv's torch, then run scripts/link-torch-jit-upstream.sh "
            "(scripts/test.sh does); see tests/torch_jit/README.md"
        )
