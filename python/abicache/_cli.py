"""The ``abicache`` command: the wheel's console script and ``python -m
abicache`` both run the command line compiled into ``abicache._native``
(the same code as the cargo binary), so one native build serves both."""

from __future__ import annotations

import signal
import sys
from typing import List, Optional


def main(argv: Optional[List[str]] = None) -> int:
    """Runs ``abicache ARGS`` and returns its exit code (0, 1 a failed build,
    2 bad input or an ABI refusal). Without ``argv``, ``sys.argv[1:]``."""
    from . import _native

    args = sys.argv[1:] if argv is None else argv
    # Ctrl-C ends the command as it ends the native binary: Python's own
    # handler would only set a flag that nothing checks while the command runs.
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    return _native.cli_main(["abicache", *args])


def run() -> None:
    """Console-script entry point: exits with :func:`main`'s code."""
    sys.exit(main())
