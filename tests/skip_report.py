"""Skips that are seen: the pytest side of ``abicache_test_support::skip``.

Imported into each test directory's ``conftest.py``. Every skipped test is
appended, with its reason, to the file ``$ABICACHE_TEST_SKIP_LOG`` when that
is set (``scripts/test.sh`` lists the file at the end of the run). Under
``ABICACHE_TEST_NO_SKIPS=1`` (which ``scripts/test.sh`` sets, since it
installs everything the tests need first) a skip is a failure, unless the test
needs hardware this machine cannot have: a GPU, a CPU feature. Such a skip
says so with :func:`skip_for_hardware`. PyTorch's own test file keeps its own
skips (its device tests, and the tests it disabled upstream).
"""

from __future__ import annotations

import os
from typing import Any, Generator

import pytest

HARDWARE = "needs hardware this machine lacks: "


def skip_for_hardware(reason: str) -> None:
    """Skips the running test because this machine lacks hardware it needs
    (allowed under ``ABICACHE_TEST_NO_SKIPS=1``)."""
    pytest.skip(HARDWARE + reason)


def _reason(report: pytest.TestReport) -> str:
    longrepr: Any = report.longrepr
    if isinstance(longrepr, tuple) and len(longrepr) == 3:
        text = str(longrepr[2])
        return text[len("Skipped: "):] if text.startswith("Skipped: ") else text
    return str(longrepr)


def _allowed(nodeid: str, reason: str) -> bool:
    # PyTorch's own file decides its own skips: its device tests and the ones
    # it has disabled upstream ("Temporarily disabled") are not prerequisites
    # this project sets up.
    return reason.startswith(HARDWARE) or "upstream/test_cpp_extensions_jit.py" in nodeid


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: Any) -> Generator[None, Any, None]:
    outcome = yield
    report: pytest.TestReport = outcome.get_result()
    if not report.skipped or hasattr(report, "wasxfail"):
        return
    reason = _reason(report)
    if os.environ.get("ABICACHE_TEST_NO_SKIPS") == "1" and not _allowed(report.nodeid, reason):
        report.outcome = "failed"
        report.longrepr = (
            f"{report.nodeid} would be skipped ({reason}), but ABICACHE_TEST_NO_SKIPS=1 "
            "(scripts/test.sh sets up everything the tests need, so a skip there means the set-up is broken)"
        )
        return
    log = os.environ.get("ABICACHE_TEST_SKIP_LOG")
    if log:
        line = f"python {report.nodeid}: {reason}".replace("\n", " ") + "\n"
        fd = os.open(log, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, line.encode())
        finally:
            os.close(fd)
