"""Unmodified programs use abicache: ``abicache run -- CMD``,
``ABICACHE_INTERCEPT=1`` and ``abicache.intercept()``.

Every test runs real processes: the two client packages of
``tests/fixtures/intercept_clients`` (one binds torch's ``load`` at import,
one looks it up at each call) build a one-line C++ library through
``torch.utils.cpp_extension.load`` without mentioning abicache. The
``ABICACHE_INTERCEPT`` start-up hook is the wheel's ``abicache-intercept.pth``,
so these tests need the wheel installed into the interpreter running them
(``scripts/test.sh`` does that).
"""

from __future__ import annotations

import filecmp
import json
import os
import site
import subprocess
import sys
import venv
from pathlib import Path
from typing import Any, Dict, List, Optional

import pytest

REPO = Path(__file__).resolve().parents[2]
CLIENTS = REPO / "tests" / "fixtures" / "intercept_clients"
RUN_CLIENT = CLIENTS / "run_client.py"
CLIENT_NAMES = ["intercept_client_bind", "intercept_client_lookup"]
ANSWERS = {"intercept_client_bind": 42, "intercept_client_lookup": 43}


def _env(extra: Optional[Dict[str, str]] = None, drop: tuple = ()) -> Dict[str, str]:
    """This process's environment without any interception setting, the
    venv's ``bin`` (ninja, for torch's own builds) first on PATH, and no
    numpy warning from torch on stderr."""
    env = {k: v for k, v in os.environ.items() if k not in ("ABICACHE_INTERCEPT", "ABICACHE_DIR", *drop)}
    env["PATH"] = str(Path(sys.executable).parent) + os.pathsep + env.get("PATH", "")
    env["PYTHONWARNINGS"] = "ignore::UserWarning"
    env.update(extra or {})
    return env


def _run(argv: List[str], env: Dict[str, str], **kwargs: Any) -> subprocess.CompletedProcess:
    return subprocess.run(argv, capture_output=True, text=True, env=env, timeout=600, **kwargs)


def _result(proc: subprocess.CompletedProcess) -> Dict[str, Any]:
    for line in proc.stdout.splitlines():
        if line.startswith("RESULT "):
            return json.loads(line[len("RESULT "):])
    raise AssertionError(f"exited {proc.returncode} without a result\n--- stdout\n{proc.stdout}\n--- stderr\n{proc.stderr}")


def _abicache_run(*args: str) -> List[str]:
    """``abicache run ARGS`` through the package's entry point (the console
    script's code)."""
    return [sys.executable, "-m", "abicache", "run", *args]


def _stats(cache: Path) -> Dict[str, Any]:
    import abicache

    return abicache.stats(str(cache))


@pytest.fixture(scope="module", autouse=True)
def _pth_installed() -> None:
    """The start-up hook must be in a site directory of this interpreter."""
    dirs = [Path(d) for d in site.getsitepackages() + [site.getusersitepackages()]]
    if not any((d / "abicache-intercept.pth").is_file() for d in dirs):
        pytest.fail(
            f"no `abicache-intercept.pth` in a site directory of `{sys.executable}` ({', '.join(map(str, dirs))}): "
            "install the wheel (scripts/install-python-package.sh) before running these tests"
        )


@pytest.fixture(scope="module")
def cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One cache for the module: each client compiles once, later runs hit."""
    return tmp_path_factory.mktemp("intercept") / "cache"


def _under_cache(result: Dict[str, Any], cache: Path) -> bool:
    return Path(result["realpath"]).is_relative_to(cache.resolve())


@pytest.mark.parametrize("client", CLIENT_NAMES)
@pytest.mark.parametrize("how", ["abicache run", "ABICACHE_INTERCEPT=1"])
def test_unmodified_client_builds_through_abicache(client: str, how: str, cache: Path) -> None:
    if how == "abicache run":
        # Through a shell, so the Python process is a child of CMD.
        argv = _abicache_run("--cache-dir", str(cache), "--", "sh", "-c", '"$0" "$1" "$2"', sys.executable,
                             str(RUN_CLIENT), client)
        env = _env()
    else:
        argv = [sys.executable, str(RUN_CLIENT), client]
        env = _env({"ABICACHE_INTERCEPT": "1", "ABICACHE_DIR": str(cache)})
    before = _stats(cache) if cache.exists() else {"hits": 0, "builds": 0}
    proc = _run(argv, env)
    result = _result(proc)
    after = _stats(cache)
    assert result["answer"] == ANSWERS[client]
    assert _under_cache(result, cache), f"{result['path']} is not abicache's (cache `{cache}`)"
    assert result["patched"]
    assert after["hits"] + after["builds"] == before["hits"] + before["builds"] + 1, (before, after)
    # Nothing imported torch or abicache at interpreter start.
    assert result["at_start"] == ["_abicache_intercept"], result["at_start"]
    if after["builds"] == before["builds"]:
        # A hit prints nothing unless verbose.
        assert "abicache" not in proc.stderr, proc.stderr


def test_verbose_says_what_each_call_did(cache: Path) -> None:
    client = "intercept_client_lookup"
    first = _run([sys.executable, str(RUN_CLIENT), client], _env({"ABICACHE_INTERCEPT": "1", "ABICACHE_DIR": str(cache)}))
    assert _result(first)["answer"] == 43
    proc = _run(_abicache_run("--verbose", "--cache-dir", str(cache), "--", sys.executable, str(RUN_CLIENT), client), _env())
    result = _result(proc)
    assert _under_cache(result, cache)
    assert "abicache run: ABICACHE_INTERCEPT=verbose" in proc.stderr, proc.stderr
    assert f"abicache: hit `{client}`" in proc.stderr, proc.stderr


def test_off_unless_asked(cache: Path) -> None:
    code = (
        "import sys, json\n"
        "at_start = sorted(m for m in ('torch', 'abicache', '_abicache_intercept') if m in sys.modules)\n"
        "import torch.utils.cpp_extension as c\n"
        "print('RESULT ' + json.dumps({'at_start': at_start, 'module': c.load.__module__,\n"
        "      'patched': hasattr(c.load, '_abicache_original'), 'abicache': 'abicache' in sys.modules}))\n"
    )
    off = {"module": "torch.utils.cpp_extension", "patched": False, "abicache": False}
    assert _result(_run([sys.executable, "-c", code], _env())) == dict(off, at_start=[])
    # Set but off: the hook reads the value (its module is imported) and registers nothing.
    hooked = (
        "import sys\n"
        "print('RESULT ' + str(int(any(getattr(f, '_abicache_intercept', False) for f in sys.meta_path))))\n"
    )
    for value in ("", " ", "0", "false", "No"):
        assert _result(_run([sys.executable, "-c", hooked], _env({"ABICACHE_INTERCEPT": value}))) == 0, value
    assert _result(_run([sys.executable, "-c", hooked], _env({"ABICACHE_INTERCEPT": "1"}))) == 1
    on = _result(_run([sys.executable, "-c", code], _env({"ABICACHE_INTERCEPT": "1", "ABICACHE_DIR": str(cache)})))
    # On: only the hook at start; patched once torch's module is imported, still without importing abicache.
    assert on == {"at_start": ["_abicache_intercept"], "module": "torch.utils.cpp_extension", "patched": True,
                  "abicache": False}, on


def test_is_standalone_falls_back_to_torch_with_one_line_when_verbose(tmp_path: Path, cache: Path) -> None:
    source = tmp_path / "main.cpp"
    source.write_text('#include <cstdio>\nint main() { std::puts("standalone ran"); return 0; }\n')
    code = (
        "import json, sys\n"
        "from torch.utils.cpp_extension import load\n"
        f"path = load('intercept_standalone', [{str(source)!r}], is_python_module=False, is_standalone=True)\n"
        "print('RESULT ' + json.dumps({'path': path}))\n"
    )
    torch_dir = tmp_path / "torch_extensions"
    env = _env({"ABICACHE_INTERCEPT": "verbose", "ABICACHE_DIR": str(cache), "TORCH_EXTENSIONS_DIR": str(torch_dir)})
    proc = _run([sys.executable, "-c", code], env)
    path = Path(_result(proc)["path"])
    assert path.is_relative_to(torch_dir), path  # torch built it, in torch's directory
    assert subprocess.run([str(path)], capture_output=True, text=True).stdout == "standalone ran\n"
    lines = [line for line in proc.stderr.splitlines() if line.startswith("abicache")]
    assert lines == [
        "abicache: load('intercept_standalone'): `is_standalone=True` (an executable) is not supported; "
        "torch.utils.cpp_extension.load builds it"
    ], proc.stderr


def test_a_call_abicache_refuses_goes_to_torch(tmp_path: Path) -> None:
    # A cache root abicache cannot use (a file): abicache.Error, then torch's own build.
    blocked = tmp_path / "not-a-directory"
    blocked.write_text("")
    torch_dir = tmp_path / "torch_extensions"
    proc = _run(
        [sys.executable, str(RUN_CLIENT), "intercept_client_lookup"],
        _env({"ABICACHE_INTERCEPT": "1", "ABICACHE_DIR": str(blocked / "cache"), "TORCH_EXTENSIONS_DIR": str(torch_dir)}),
    )
    result = _result(proc)
    assert result["answer"] == 43
    assert Path(result["realpath"]).is_relative_to(torch_dir.resolve()), result
    assert "abicache: load('intercept_client_lookup') failed (" in proc.stderr, proc.stderr
    assert "falling back to torch.utils.cpp_extension.load" in proc.stderr, proc.stderr


def test_an_unknown_keyword_is_left_to_torch() -> None:
    import inspect

    import _abicache_intercept

    import abicache

    accepted = inspect.signature(abicache.load).parameters
    assert _abicache_intercept._unsupported("load", {"name": "x", "sources": []}, accepted) is None
    reason = _abicache_intercept._unsupported("load", {"name": "x", "with_future_thing": True}, accepted)
    assert reason == "`with_future_thing`, which abicache.load does not take"
    assert _abicache_intercept._unsupported("load_inline", {"sycl_sources": "x"}, None) == "SYCL (`sycl_sources`)"


def test_build_directory_holds_a_library_its_client_can_glob(tmp_path: Path, cache: Path) -> None:
    # GPTQModel looks for `{name}*.so` in its own build directory.
    build_dir = tmp_path / "build"
    client = "intercept_client_bind"
    proc = _run([sys.executable, str(RUN_CLIENT), client, str(build_dir)],
                _env({"ABICACHE_INTERCEPT": "1", "ABICACHE_DIR": str(cache)}))
    result = _result(proc)
    assert result["globbed"] == [str(build_dir / f"{client}.so")], result
    assert result["answer"] == 42
    assert result["path"] == str(build_dir / f"{client}.so")
    entries = list(cache.rglob(f"{client}*.so"))
    # A copy of the cache's library (never a link: writing through it must not change the entry).
    assert any(filecmp.cmp(result["path"], e, shallow=False) for e in entries), entries
    assert not any(os.path.samefile(result["path"], e) for e in entries), entries


def _make_read_only(directory: Path) -> Optional[str]:
    """Makes ``directory`` unwritable even for root (``chattr +i``) or, for
    another user, by its mode; the reason when neither works here."""
    if os.geteuid() != 0:
        directory.chmod(0o555)
    else:
        proc = subprocess.run(["chattr", "+i", str(directory)], capture_output=True, text=True)
        if proc.returncode != 0:
            return f"cannot make a directory read-only as root here (`chattr +i`: {proc.stderr.strip()})"
    try:
        (directory / "probe").touch()
    except OSError:
        return None
    (directory / "probe").unlink()
    return f"`{directory}` is still writable"


def _make_writable(directory: Path) -> None:
    if os.geteuid() == 0:
        subprocess.run(["chattr", "-i", str(directory)], capture_output=True)
    directory.chmod(0o755)


def test_read_only_build_directory_loads_from_the_cache_with_a_warning(tmp_path: Path, cache: Path) -> None:
    # Some packages keep their build directory inside a read-only site-packages.
    build_dir = tmp_path / "site-packages" / "pkg" / "build"
    build_dir.mkdir(parents=True)
    why = _make_read_only(build_dir)
    if why is not None:
        pytest.skip(why)
    try:
        client = "intercept_client_lookup"
        proc = _run([sys.executable, str(RUN_CLIENT), client, str(build_dir)],
                    _env({"ABICACHE_INTERCEPT": "1", "ABICACHE_DIR": str(cache)}))
    finally:
        _make_writable(build_dir)
    result = _result(proc)
    assert result["answer"] == 43
    assert _under_cache(result, cache) and result["globbed"] == [], result
    assert f"could not copy the library to `{client}.so` in build_directory" in proc.stderr, proc.stderr
    assert f"`{build_dir}`" in proc.stderr, proc.stderr
    assert "loaded from the cache instead" in proc.stderr, proc.stderr


def test_intercept_from_code_patches_the_imported_module_not_names_bound_before(cache: Path) -> None:
    code = (
        "import json, sys\n"
        "import torch.utils.cpp_extension as c\n"
        "from torch.utils.cpp_extension import load as bound_before\n"
        "original = c.load\n"
        "import abicache\n"
        "abicache.intercept()\n"
        "abicache.intercept()  # twice: still one wrapper\n"
        f"sys.path.insert(0, {str(CLIENTS)!r})\n"
        "import intercept_client_lookup\n"
        "path = intercept_client_lookup.build()\n"
        "print('RESULT ' + json.dumps({'path': path, 'bound_before_is_torch': bound_before is original,\n"
        "      'wrapped_once': c.load._abicache_original is original,\n"
        "      'inline_patched': hasattr(c.load_inline, '_abicache_original')}))\n"
    )
    result = _result(_run([sys.executable, "-c", code], _env({"ABICACHE_DIR": str(cache)})))
    assert Path(result["path"]).resolve().is_relative_to(cache.resolve()), result
    assert result["bound_before_is_torch"] and result["wrapped_once"] and result["inline_patched"], result


def test_abicache_run_turns_it_on_where_there_is_no_pth(tmp_path: Path, cache: Path) -> None:
    # A venv without abicache installed that finds abicache and torch on
    # PYTHONPATH: no site directory of it holds the .pth, so only `abicache
    # run`'s sitecustomize turns interception on. The sitecustomize it hides
    # on PYTHONPATH still runs.
    bare = tmp_path / "bare"
    venv.EnvBuilder(with_pip=False).create(bare)
    python = str(bare / "bin" / "python")
    theirs = tmp_path / "theirs"
    theirs.mkdir()
    (theirs / "sitecustomize.py").write_text("import sys\nprint('their sitecustomize ran', file=sys.stderr)\n")
    import torch

    import abicache

    found_on = dict.fromkeys(str(Path(m.__file__).parents[1]) for m in (abicache, torch))
    env = _env({"PYTHONPATH": os.pathsep.join([str(theirs), *found_on])})
    probe = "import sys; print('RESULT ' + str(int('_abicache_intercept' in sys.modules)))"
    assert _result(_run([python, "-c", probe], dict(env, ABICACHE_INTERCEPT="1"))) == 0  # no .pth there
    proc = _run(_abicache_run("--cache-dir", str(cache), "--", python, str(RUN_CLIENT), "intercept_client_bind"), env)
    result = _result(proc)
    assert result["answer"] == 42 and result["patched"], result
    assert _under_cache(result, cache), result
    assert "their sitecustomize ran" in proc.stderr, proc.stderr


def test_exit_status_and_terminating_signal_pass_through() -> None:
    assert _run(_abicache_run("--", "sh", "-c", "exit 7"), _env()).returncode == 7
    # `exec`: the command replaces the process, so its signal is the run's.
    assert _run(_abicache_run("sh", "-c", "kill -TERM $$"), _env()).returncode == -15
    proc = _run(_abicache_run("--", sys.executable, "-c", "import sys; print(sys.stdin.read().upper())"), _env(),
                input="streams untouched")
    assert (proc.returncode, proc.stdout) == (0, "STREAMS UNTOUCHED\n"), proc.stderr


def test_cmd_starts_with_default_signal_dispositions() -> None:
    # Python ignores SIGPIPE and SIGXFSZ; the command must not inherit that.
    proc = _run(_abicache_run("--", "cat", "/proc/self/status"), _env())
    ignored = int(next(line for line in proc.stdout.splitlines() if line.startswith("SigIgn:")).split()[1], 16)
    for signal_number in (13, 25):  # SIGPIPE, SIGXFSZ
        assert not ignored & (1 << (signal_number - 1)), hex(ignored)


def test_missing_or_unknown_cmd_is_a_clear_error() -> None:
    proc = _run(_abicache_run(), _env())
    assert proc.returncode == 2
    assert "<CMD>" in proc.stderr, proc.stderr
    proc = _run(_abicache_run("--", "abicache-no-such-command"), _env())
    assert proc.returncode == 127
    assert "cannot run `abicache-no-such-command`" in proc.stderr, proc.stderr


def test_each_functions_signature_is_worked_out_once_per_process(monkeypatch: Any) -> None:
    import inspect

    import _abicache_intercept

    def client_load(name: str, sources: list, verbose: bool = False) -> None:
        return None

    worked_out = []
    real = inspect.signature

    def counting(function: Any) -> inspect.Signature:
        worked_out.append(function)
        return real(function)

    monkeypatch.setattr(inspect, "signature", counting)
    first = _abicache_intercept._signature(client_load)
    again = _abicache_intercept._signature(client_load)
    assert again is first
    assert worked_out == [client_load]
    assert list(first.parameters) == ["name", "sources", "verbose"]


def _bound(function: Any, args: tuple, kwargs: Dict[str, Any]) -> Any:
    """What ``inspect`` binds (a list of ``(name, value)``), or ``TypeError``."""
    import inspect

    try:
        return list(inspect.signature(function).bind(*args, **kwargs).arguments.items())
    except TypeError:
        return TypeError


def _fast_bound(function: Any, args: tuple, kwargs: Dict[str, Any]) -> Any:
    import _abicache_intercept

    try:
        return list(_abicache_intercept._arguments(function, args, kwargs).items())
    except TypeError:
        return TypeError


def test_calls_bind_as_inspect_binds_them_without_inspect(monkeypatch: Any) -> None:
    import functools
    import inspect

    import torch.utils.cpp_extension as cpp_extension

    import _abicache_intercept
    import abicache

    def keyword_only(name: str, *, cache_dir: Any = None, must: int) -> None:
        return None

    def starred(name: str, *rest: Any, **options: Any) -> None:
        return None

    def positional_only(name: str, /, sources: Any = None) -> None:
        return None

    @functools.wraps(keyword_only)
    def wrapped(*args: Any, **kwargs: Any) -> None:
        return None

    # Its own parameters are not what `inspect` reports (it follows `__wrapped__`).
    @functools.wraps(keyword_only)
    def wrapped_plain(name: str, sources: Any = None) -> None:
        return None

    def declared(name: str, sources: Any = None) -> None:
        return None

    declared.__signature__ = inspect.signature(keyword_only)  # type: ignore[attr-defined]

    calls: List[tuple] = [
        ((), {}),
        (("n",), {}),
        (("n", ["a.cpp"]), {}),
        (("n", ["a.cpp"]), {"extra_cflags": ["-O3"], "verbose": True}),
        ((), {"name": "n", "sources": ["a.cpp"], "cache_dir": "/c", "must": 1}),
        (("n",), {"name": "again"}),
        (("n", ["a.cpp"]), {"name": "again"}),
        (("n",), {"verbose": True, "sources": ["a.cpp"]}),
        ((), {"must": 1, "name": "n"}),
        (("n", ["a.cpp"]), {"no_such_argument": 1}),
        (("n", ["a.cpp"], None, None, None, None, None, None, False, None, None, True, False, True), {}),
        (("n", ["a.cpp"], None, None, None, None, None, None, False, None, None, True, False, True, 1, 2), {}),
        (("n",), {"must": 2}),
        (("n", "x"), {"must": 2}),
        (("n",), {"rest": 1}),
    ]
    functions = [cpp_extension.load, cpp_extension.load_inline, abicache.load, abicache.load_inline,
                 keyword_only, starred, positional_only, wrapped, wrapped_plain, declared]
    for function in functions:
        for args, kwargs in calls:
            assert _fast_bound(function, args, kwargs) == _bound(function, args, kwargs), (function, args, kwargs)
    # The plain functions (torch's, abicache's, `keyword_only`) are read
    # from their code: no `inspect.signature`, however often they are called.
    # (With both per-process memos emptied: the loop above filled them.)
    monkeypatch.setattr(_abicache_intercept, "_signatures", {})
    monkeypatch.setattr(_abicache_intercept, "_shapes", {})
    worked_out: List[Any] = []
    real = inspect.signature
    monkeypatch.setattr(inspect, "signature", lambda f, **kw: worked_out.append(f) or real(f, **kw))
    for function in (cpp_extension.load, cpp_extension.load_inline, abicache.load, keyword_only):
        _fast_bound(function, ("n", ["a.cpp"]), {"verbose": True})
        assert set(_abicache_intercept._accepted(function)) == set(real(function).parameters)
    assert worked_out == []
    # The others are `inspect`'s to bind.
    others = [starred, positional_only, wrapped, wrapped_plain, declared]
    for function in others:
        _fast_bound(function, ("n",), {})
    assert worked_out == others
