"""``abicache.intercept()``: interception turned on from code (the same hook
``ABICACHE_INTERCEPT=1`` and ``abicache run`` turn on at interpreter start)."""

from __future__ import annotations


def intercept(verbose: bool = False) -> None:
    """Makes ``torch.utils.cpp_extension.load`` and ``load_inline`` abicache's
    in this process: now when ``torch.utils.cpp_extension`` is already
    imported (its module attributes are replaced), else the moment it is.

    Names bound before the call keep torch's functions: after
    ``from torch.utils.cpp_extension import load``, that ``load`` is torch's
    (call ``intercept()`` before such imports, or use ``ABICACHE_INTERCEPT=1``
    / ``abicache run``, which turn it on at interpreter start).

    A call abicache does not support (``is_standalone=True``, SYCL, a keyword
    abicache's function does not take) goes to torch's own function, as does
    a call abicache fails with any exception (after one line on stderr), so
    torch fails or succeeds as it would have; except under offline mode
    (``ABICACHE_OFFLINE=1``), where nothing goes to torch's function (it
    would compile): a miss raises :class:`abicache.CacheMiss`, and abicache's
    other errors are raised as they are. ``verbose``: one line on stderr for every intercepted call.
    Calling it again does nothing more (``verbose`` only ever turns on)."""
    import _abicache_intercept

    _abicache_intercept.install(verbose=verbose)
