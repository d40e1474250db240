"""Says, in the test report, whether PyTorch's JIT-extension tests ran."""

from __future__ import annotations

from pathlib import Path

import pytest

UPSTREAM = Path(__file__).resolve().parent / "upstream"
NEEDED = [
    "test_cpp_extensions_jit.py",
    "cpp_extensions/jit_extension.cpp",
    "cpp_extensions/jit_extension2.cpp",
    "cpp_extensions/doubler.h",
    "cpp_extensions/cpp_frontend_extension.cpp",
    "cpp_extensions/identity.cpp",
]


def test_pytorch_jit_extension_tests_are_present() -> None:
    missing = [p for p in NEEDED if not (UPSTREAM / p).is_file()]
    if missing:
        pytest.skip(
            "PyTorch's test/test_cpp_extensions_jit.py and test/cpp_extensions/ are not in "
            f"`{UPSTREAM}` (missing: {', '.join(missing)}); copy them there from the PyTorch "
            "release matching the venv's torch (see tests/torch_jit/README.md)"
        )
