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
    torch fails or succeeds as it would have; except a refusal
    (:class:`abicache.AbiError`: a library this machine must not load), which
    reaches the program, and except under offline mode
    (``ABICACHE_OFFLINE=1``), where nothing goes to torch's function (it
    would compile): a miss raises :class:`abicache.CacheMiss`, and abicache's
    other errors are raised as they are. A fallback for a name abicache
    already loaded in this process is built by torch under a fresh name
    (``<name>_v1``, …), so it runs the new code. ``verbose``: one line on
    stderr for every intercepted call.
    Calling it again does nothing more (``verbose`` only ever turns on).

    FlashInfer's JIT is intercepted too (``flashinfer.jit.core``'s
    ``JitSpecNvcc.build_and_load``, patched now or when imported): a module
    FlashInfer would compile is built and loaded through abicache as a
    TVM-FFI module; its ahead-of-time modules stay FlashInfer's, and a spec
    abicache cannot take is built by FlashInfer (docs/flashinfer.md)."""
    import _abicache_intercept

    _abicache_intercept.install(verbose=verbose)
