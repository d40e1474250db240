"""The ``abicache`` command: the wheel's console script and ``python -m
abicache`` both run the command line compiled into ``abicache._native``
(the same code as the cargo binary), so one native build serves both."""

from __future__ import annotations

import os
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
    # Python ignores SIGXFSZ; the native binary does not, and a command that
    # `abicache run` execs must not inherit it (exec keeps ignored signals;
    # Rust's exec resets SIGPIPE itself).
    if hasattr(signal, "SIGXFSZ"):
        signal.signal(signal.SIGXFSZ, signal.SIG_DFL)
    # The package directory: `abicache run` puts its `_sitecustomize` first on PYTHONPATH.
    return _native.cli_main(["abicache", *args], os.path.dirname(os.path.abspath(__file__)))


def run() -> None:
    """Console-script entry point: exits with :func:`main`'s code."""
    sys.exit(main())
