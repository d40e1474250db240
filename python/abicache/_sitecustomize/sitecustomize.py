"""Put first on ``PYTHONPATH`` by ``abicache run``: turns interception on in
an interpreter that finds abicache on ``PYTHONPATH`` rather than in a site
directory (where the wheel's ``abicache-intercept.pth`` is read), then runs
the ``sitecustomize`` module this one hides, if there is one."""


def _start() -> None:
    import os
    import sys

    here = os.path.dirname(os.path.abspath(__file__))
    try:
        import _abicache_intercept
    except ImportError:
        # `verbose` by `_abicache_intercept.mode`'s rule (which is not importable here).
        word = os.environ.get("ABICACHE_INTERCEPT", "").strip(" \t\n\r\x0c")
        if word.isascii() and word.lower() == "verbose":
            print(
                f"abicache: interception is off in {sys.executable}: abicache is not installed for it",
                file=sys.stderr,
            )
    else:
        _abicache_intercept.install_from_env()

    import importlib.machinery
    import importlib.util

    rest = [p for p in sys.path if os.path.abspath(p or os.curdir) != here]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", rest)
    if spec is None or spec.loader is None:
        return
    module = importlib.util.module_from_spec(spec)
    sys.modules["sitecustomize"] = module
    spec.loader.exec_module(module)


_start()
del _start
