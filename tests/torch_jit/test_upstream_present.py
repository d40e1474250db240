"""Says, in the test report, whether PyTorch's JIT-extension tests ran."""

from __future__ import annotations

import os
from pathlib import Path
from typing import List

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


def candidates() -> List[Path]:
    """Where ``scripts/link-torch-jit-upstream.sh`` looks for PyTorch's files,
    in order: ``$ABICACHE_TORCH_JIT_UPSTREAM``, ``../shared/torch-jit-upstream``
    beside the checkout, this machine's copy (``$ABICACHE_DEV_HOME/torch-jit-upstream``)."""
    dev_home = os.environ.get("ABICACHE_DEV_HOME") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "abicache-dev"
    )
    repo = Path(__file__).resolve().parents[2]
    given = os.environ.get("ABICACHE_TORCH_JIT_UPSTREAM")
    return ([Path(given)] if given else []) + [
        repo.parent / "shared" / "torch-jit-upstream",
        Path(dev_home) / "torch-jit-upstream",
    ]


def test_pytorch_jit_extension_tests_are_present() -> None:
    missing = [p for p in NEEDED if not (UPSTREAM / p).is_file()]
    if missing:
        places = ", ".join(f"`{c}`" for c in candidates())
        pytest.skip(
            "PyTorch's test/test_cpp_extensions_jit.py and test/cpp_extensions/ are not on this machine "
            f"(missing in `{UPSTREAM}`: {', '.join(missing)}). Third-party code is not vendored into this "
            f"repository: the files are used in place from the first of {places} that has them (laid out "
            "as PyTorch's test/, with its LICENSE); run scripts/link-torch-jit-upstream.sh (scripts/test.sh "
            "does); see tests/torch_jit/README.md"
        )
