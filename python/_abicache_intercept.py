"""abicache's interception of ``torch.utils.cpp_extension.load`` and ``load_inline``.

It also patches FlashInfer's JIT (``flashinfer.jit.core``): once that
module has executed, ``JitSpecNvcc.build_and_load`` is replaced by a wrapper
that leaves FlashInfer's ahead-of-time modules to FlashInfer and sends what
FlashInfer would compile to ``abicache._flashinfer`` (which falls back to
FlashInfer's build for what abicache cannot take).

Imported at interpreter start only when ``ABICACHE_INTERCEPT`` is set (by
``abicache-intercept.pth``, shipped at the root of site-packages, or by the
``sitecustomize`` that ``abicache run`` puts first on ``PYTHONPATH``), and by
``abicache.intercept()``. It imports neither torch nor abicache: it puts a
finder first on ``sys.meta_path`` that, the moment
``torch.utils.cpp_extension`` has been executed, replaces the module's
``load`` and ``load_inline`` with wrappers. A wrapper sends a call that
abicache supports to ``abicache.load``/``abicache.load_inline`` and any other
call to torch's own function, so a program that works without interception
works with it. Under offline mode (``ABICACHE_OFFLINE=1``) nothing goes to
torch's function: abicache's error (``abicache.CacheMiss`` on a miss)
reaches the program.

A top-level module, not part of the ``abicache`` package, so that turning
interception on costs an interpreter start this file, not the package's
imports.
"""

import os
import sys

TARGET = "torch.utils.cpp_extension"
# FlashInfer's JIT core (`JitSpecNvcc.build_and_load`; `abicache._flashinfer`).
FLASHINFER_TARGET = "flashinfer.jit.core"
VARIABLE = "ABICACHE_INTERCEPT"

# The blanks a value may have around it (Rust's `char::is_ascii_whitespace`).
_BLANKS = " \t\n\r\x0c"

# Whether this process has printed why the variable's value was refused.
_refused = False

# "verbose": one line on stderr for every intercepted call (hit, build or
# fallback). Set by `install`.
_verbose = False


def mode(value=None):
    """``None`` (off), ``"on"`` or ``"verbose"`` for a value of
    ``ABICACHE_INTERCEPT`` (default: this process's; ``None`` when unset).
    Blanks around it are ignored; unset, blank or ``0`` is off, ``1`` on,
    ``verbose`` (any case) verbose. Any other value raises ``ValueError``
    with the warning to print (interception then stays off).

    The rule of ``abicache_env_vars::parse_intercept`` and the message of
    ``intercept_refusal``, restated here because this hook imports neither
    abicache's native module nor torch; tied value for value by
    ``tests/python/test_intercept_and_owner_rules.py``."""
    if value is None:
        value = os.environ.get(VARIABLE)
    if value is None:
        return None
    word = value.strip(_BLANKS)
    if word in ("", "0"):
        return None
    if word == "1":
        return "on"
    if word.lower() == "verbose" and word.isascii():
        return "verbose"
    raise ValueError(
        "`%s=%s` is not `1`, `verbose` or `0`; interception is off. "
        "Set it to `1` (or `verbose`) to turn interception on, or unset it" % (VARIABLE, value)
    )


def install(verbose=False):
    """Turns interception on in this process: patches
    ``torch.utils.cpp_extension`` if it is imported, and patches it when it
    is imported later. Idempotent. ``verbose``: one line on stderr for every
    intercepted call. Returns nothing."""
    global _verbose
    _verbose = _verbose or bool(verbose)
    for target, patcher in _patchers().items():
        module = sys.modules.get(target)
        if module is not None:
            patcher(module)
    if not any(getattr(f, "_abicache_intercept", False) for f in sys.meta_path):
        sys.meta_path.insert(0, _Finder())


def install_from_env():
    """:func:`install` when ``ABICACHE_INTERCEPT`` asks for it (what the
    start-up hooks call); for a value :func:`mode` refuses, one line on
    stderr and nothing installed."""
    global _refused
    try:
        asked = mode()
    except ValueError as e:
        # Once per process: `site` runs a `.pth` once per site directory it
        # is given, which may name one directory twice (a venv reached
        # through a symlink).
        if not _refused:
            _refused = True
            _say(str(e))
        return
    if asked is not None:
        install(verbose=asked == "verbose")


def _patchers():
    """The modules interception patches, each with its patch function."""
    return {TARGET: patch, FLASHINFER_TARGET: patch_flashinfer}


class _Finder:
    """Finds ``torch.utils.cpp_extension`` and ``flashinfer.jit.core`` with
    the finders after it and wraps the loader so the module is patched once
    it has executed; finds nothing else."""

    _abicache_intercept = True

    def find_spec(self, fullname, path=None, target=None):
        if fullname != TARGET and fullname != FLASHINFER_TARGET:
            return None
        for finder in sys.meta_path:
            if getattr(finder, "_abicache_intercept", False):
                continue
            find_spec = getattr(finder, "find_spec", None)
            if find_spec is None:
                continue
            spec = find_spec(fullname, path, target)
            if spec is not None:
                break
        else:
            return None
        if spec.loader is not None and hasattr(spec.loader, "exec_module"):
            spec.loader = _Loader(spec.loader)
        return spec

    def invalidate_caches(self):
        pass


class _Loader:
    """The module's own loader, patching the module after ``exec_module``;
    everything else (``get_source``, resources, …) is the wrapped loader's."""

    def __init__(self, loader):
        self._abicache_loader = loader

    def create_module(self, spec):
        create = getattr(self._abicache_loader, "create_module", None)
        return create(spec) if create is not None else None

    def exec_module(self, module):
        self._abicache_loader.exec_module(module)
        _patchers()[module.__name__](module)

    def __getattr__(self, name):
        return getattr(self._abicache_loader, name)


def patch(module):
    """Replaces ``module.load`` and ``module.load_inline`` (torch's) with
    abicache's wrappers, once."""
    for name in ("load", "load_inline"):
        original = getattr(module, name, None)
        if original is None or getattr(original, "_abicache_original", None) is not None:
            continue
        setattr(module, name, _wrapper(original, name))


def patch_flashinfer(module):
    """Replaces FlashInfer's ``JitSpecNvcc.build_and_load`` (the one method
    every FlashInfer ``get_*_module`` function builds and loads through)
    with abicache's wrapper, once. A FlashInfer without ``JitSpecNvcc``
    (before 0.6) is left as it is."""
    spec_class = getattr(module, "JitSpecNvcc", None)
    original = getattr(spec_class, "build_and_load", None)
    if original is None or getattr(original, "_abicache_original", None) is not None:
        return
    import functools

    def build_and_load(self):
        return _flashinfer_call(original, self)

    functools.update_wrapper(build_and_load, original)
    build_and_load._abicache_original = original
    spec_class.build_and_load = build_and_load


def _flashinfer_call(original, spec):
    """One FlashInfer build-and-load: FlashInfer's own while it would not
    compile (an ahead-of-time module it has, from its wheel's ``data/aot``
    or the ``flashinfer-jit-cache`` wheel, is loaded by FlashInfer; with
    ``FLASHINFER_DISABLE_JIT`` set FlashInfer raises as it does), else
    abicache's (``abicache._flashinfer.build_and_load``), which falls back
    to FlashInfer's for what it cannot take."""
    if os.environ.get("FLASHINFER_DISABLE_JIT"):
        return original(spec)
    cached = spec.try_load()
    if cached is not None:
        return cached
    from abicache import _flashinfer

    return _flashinfer.build_and_load(spec, original, _verbose)


def _wrapper(original, name):
    import functools

    def wrapper(*args, **kwargs):
        return _call(original, name, args, kwargs)

    # torch's name, docstring and signature (`inspect.signature` follows
    # `__wrapped__`), so code that introspects the function sees torch's.
    functools.update_wrapper(wrapper, original)
    wrapper._abicache_original = original
    return wrapper


def _say(line):
    print("abicache: " + line, file=sys.stderr, flush=True)


def _unsupported(name, arguments, accepted):
    """Why abicache cannot take this call (``None``: it can). ``accepted``:
    the parameters abicache's function takes (``None``: not checked yet, so
    that the refusals that need no abicache import it not)."""
    if arguments.get("is_standalone"):
        return "`is_standalone=True` (an executable)"
    for sycl in ("with_sycl", "sycl_sources", "extra_sycl_cflags"):
        if arguments.get(sycl):
            return "SYCL (`%s`)" % sycl
    for argument in arguments if accepted is not None else ():
        if argument not in accepted:
            return "`%s`, which abicache.%s does not take" % (argument, name)
    return None


# function -> its ``inspect.Signature``, worked out once per process (each
# costs 40-200 us; a warm intercepted call is about a millisecond).
_signatures = {}


def _signature(function):
    signature = _signatures.get(function)
    if signature is None:
        import inspect

        signature = _signatures[function] = inspect.signature(function)
    return signature


# function -> its parameters as ``(positional, names, required)`` (tuples of
# names: those a positional argument binds to, in order; every name a keyword
# may give; those without a default), read from its code object (~1 us,
# where ``inspect.signature`` costs 40-200 us and each ``bind`` ~8 us); or
# ``None`` where only ``inspect.signature`` can say: anything but a plain
# function, ``*args``, ``**kwargs``, positional-only parameters, or a
# ``__wrapped__``/``__signature__`` that ``inspect`` would follow instead.
_shapes = {}

_VARARGS = 0x04  # inspect.CO_VARARGS
_VARKEYWORDS = 0x08  # inspect.CO_VARKEYWORDS


def _shape(function):
    if function not in _shapes:
        _shapes[function] = _read_shape(function)
    return _shapes[function]


def _read_shape(function):
    code = getattr(function, "__code__", None)
    if (
        type(function) is not _PLAIN_FUNCTION
        or code is None
        or code.co_flags & (_VARARGS | _VARKEYWORDS)
        or getattr(code, "co_posonlyargcount", 0)
        or hasattr(function, "__wrapped__")
        or hasattr(function, "__signature__")
    ):
        return None
    count = code.co_argcount
    positional = code.co_varnames[:count]
    keyword_only = code.co_varnames[count : count + code.co_kwonlyargcount]
    defaults = function.__defaults__ or ()
    kwdefaults = function.__kwdefaults__ or {}
    required = positional[: count - len(defaults)] + tuple(n for n in keyword_only if n not in kwdefaults)
    return (positional, positional + keyword_only, required)


# `types.FunctionType`, without importing `types` at interpreter start.
_PLAIN_FUNCTION = type(_shape)


def _arguments(function, args, kwargs):
    """The arguments of a call of ``function`` by parameter name, in parameter
    order, as ``inspect.signature(function).bind(*args, **kwargs).arguments``
    (only those given; a ``TypeError`` where the call does not bind)."""
    shape = _shape(function)
    if shape is None:
        return _signature(function).bind(*args, **kwargs).arguments
    positional, names, required = shape
    if len(args) > len(positional):
        raise TypeError("too many positional arguments")
    given = dict(zip(positional, args))
    for key in kwargs:
        if key in given or key not in names:
            raise TypeError("argument %r given twice or not taken" % (key,))
    given.update(kwargs)
    for key in required:
        if key not in given:
            raise TypeError("missing a required argument: %r" % (key,))
    return {n: given[n] for n in names if n in given}


def _accepted(function):
    """Every parameter name a keyword may give ``function``."""
    shape = _shape(function)
    return shape[1] if shape is not None else _signature(function).parameters


def _is_refusal(error):
    """Whether ``error`` is a refusal: ``abicache.AbiError`` (exit 2), which
    abicache raises when a library must not be loaded here (an instruction
    set this CPU lacks, a GPU it cannot run on, a stable-ABI target above the
    running torch). torch's build of the same call would load anyway and
    crash (SIGILL), so a refusal is never handed to torch. An ``AbiError``
    comes only from abicache's native module: without it imported, nothing
    is a refusal (and nothing is imported to find out)."""
    native = sys.modules.get("abicache._native")
    refusal = getattr(native, "AbiError", None)
    return refusal is not None and isinstance(error, refusal)


def _fallback_name(arguments):
    """The name torch's function is given for a fallback: the call's, unless
    abicache already loaded that name in this process; then a fresh one
    (``<name>_v<N>``, as torch's versioner names a changed reload), so that
    torch builds and imports the new code rather than returning the module
    already imported under the name (``abicache._dropins.fresh_name``)."""
    name = arguments.get("name")
    dropins = sys.modules.get("abicache._dropins")
    if dropins is None or not isinstance(name, str):
        return name
    return dropins.fallback_name(name)


def _call(original, name, args, kwargs):
    """One intercepted call: abicache's function when it supports the call,
    else torch's. torch's also gets every call abicache fails (a cache it
    cannot use, a failed build: torch then fails or succeeds as it would
    have, with one line on stderr first), so interception never breaks a
    program that works without it; except a refusal (``abicache.AbiError``:
    a library this machine must not load), which reaches the program as the
    error. A fallback for a name abicache already loaded in this process is
    given a fresh name (``_fallback_name``): it never returns the module
    imported before. ``KeyboardInterrupt`` is not caught.

    Offline (``ABICACHE_OFFLINE=1``): torch's function, which compiles, is
    never called for a call that binds: abicache's ``CacheMiss`` (or any
    other error of abicache's) is raised to the program."""
    try:
        arguments = _arguments(original, args, kwargs)
    except TypeError:
        return original(*args, **kwargs)  # torch's own error for a bad call
    verbose = _verbose or bool(arguments.get("verbose"))
    label = "%s(%r)" % (name, arguments.get("name"))
    reason = _unsupported(name, arguments, None)
    if reason is None:
        import abicache

        replacement = getattr(abicache, name)
        reason = _unsupported(name, arguments, _accepted(replacement))
    if reason is not None:
        if _offline_forbids_torch():
            import abicache

            miss = abicache.CacheMiss(
                "%s: %s is not supported by abicache, and offline mode (`ABICACHE_OFFLINE=1`) forbids "
                "torch.utils.cpp_extension.%s building it; nothing was compiled. Build it where compiling "
                "is allowed (`ABICACHE_OFFLINE` unset or `warn`)" % (label, reason, name)
            )
            miss.extension = arguments.get("name")
            raise miss
        if verbose:
            _say("%s: %s is not supported; torch.utils.cpp_extension.%s builds it" % (label, reason, name))
        return original(*args, **kwargs)
    given = arguments
    if _verbose:
        arguments = dict(arguments, verbose=True)
    try:
        return replacement(**arguments)
    except Exception as e:  # noqa: BLE001 - torch's function is the authority on any failure but a refusal
        # A refusal reaches the program; offline, so does a miss
        # (`abicache.CacheMiss`) or any failure: torch's function would compile.
        if _is_refusal(e) or isinstance(e, abicache.CacheMiss) or _offline_forbids_torch():
            raise
        first = (str(e).strip().splitlines() or [""])[0]
        fresh = _fallback_name(given)
        if fresh != given.get("name"):
            first += "; `%s` is already loaded in this process, so torch builds it as `%s`" % (given.get("name"), fresh)
        _say("%s failed (%s: %s); falling back to torch.utils.cpp_extension.%s" % (label, type(e).__name__, first, name))
    # Outside the handler: an error of torch's is not chained to abicache's.
    if fresh != given.get("name"):
        return original(**dict(given, name=fresh))
    return original(*args, **kwargs)


def _offline_forbids_torch():
    """Whether offline mode (``ABICACHE_OFFLINE=1``, or ``offline`` in the
    config file) forbids handing a call to torch's own function, which
    compiles. Asked only on the way to torch's function (never on a hit). A
    setting abicache cannot read forbids it when ``ABICACHE_OFFLINE`` itself
    is set to anything but ``0``: an operator who asked for offline never
    gets a compile."""
    import abicache

    try:
        return abicache._native.offline_mode() == "1"
    except Exception:  # noqa: BLE001 - an unusable setting is judged by the variable alone
        return os.environ.get("ABICACHE_OFFLINE", "").strip(_BLANKS) not in ("", "0")
