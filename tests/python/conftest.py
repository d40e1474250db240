"""One cache for the whole test session, so each example compiles once."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

# Skips are listed and, under scripts/test.sh, fail (tests/skip_report.py).
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from skip_report import pytest_runtest_makereport  # noqa: E402,F401

# No background precompiled-header builds (~40 s of CPU, ~800 MB each) from the
# tests' caches; the PCH mechanism is tested in crates/abicache-build.
os.environ.setdefault("ABICACHE_PCH", "0")


@pytest.fixture(scope="session")
def cache_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The session's cache root (shared by every test and subprocess)."""
    return tmp_path_factory.mktemp("abicache") / "cache"


@pytest.fixture(scope="session")
def cpu_loaded(cache_dir: Path) -> str:
    """The CPU example, loaded in this process (built on first use)."""
    import abicache
    from _util import example_spec

    return abicache.TorchOpsExtension(**example_spec("cpu"), cache_dir=cache_dir).load()


@pytest.fixture(scope="session")
def stable_loaded(cache_dir: Path) -> str:
    """The stable-ABI example, loaded in this process (built on first use)."""
    import abicache
    from _util import example_spec

    return abicache.TorchOpsExtension(**example_spec("stable"), cache_dir=cache_dir).load()
