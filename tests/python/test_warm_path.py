"""The lean warm path (issue 12): keys through the cache's stat cache follow
every edit exactly as a cold scan does, and a hit imports and probes only
what it needs, once per process."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import abicache
from abicache import _env

# The racy window of the stat cache (abicache_fs::RACY_WINDOW) plus a margin.
RACY_WINDOW_S = 2.1


def _key(tmp_path: Path, cache: Path) -> str:
    ext = abicache.TorchOpsExtension(
        "stat_cached", [str(tmp_path / "op.cpp")], extra_include_paths=[str(tmp_path / "inc")], cache_dir=cache
    )
    return ext.key


def test_a_warm_key_through_the_stat_cache_is_always_the_cold_key(tmp_path: Path) -> None:
    (tmp_path / "inc").mkdir()
    (tmp_path / "op.cpp").write_text('#include "a.h"\n#include <b.h>\nint op;\n')
    (tmp_path / "inc" / "a.h").write_text("int a = 1;\n")
    (tmp_path / "inc" / "b.h").write_text("int b = 1;\n")
    cache = tmp_path / "cache"
    time.sleep(RACY_WINDOW_S)
    first = _key(tmp_path, cache)
    facts = cache / "v1" / "scan-facts.bin"
    assert facts.is_file(), "aged files are remembered in the cache's stat cache"
    assert _key(tmp_path, cache) == first

    def cold() -> str:
        return _key(tmp_path, tmp_path / f"cold-{time.monotonic_ns()}")

    # Same size, in place, twice within the same second.
    (tmp_path / "inc" / "a.h").write_text("int a = 2;\n")
    second = _key(tmp_path, cache)
    assert second != first and second == cold()
    (tmp_path / "inc" / "a.h").write_text("int a = 3;\n")
    third = _key(tmp_path, cache)
    assert third not in (first, second) and third == cold()
    # Replaced by rename, with the old mtime put back.
    b = tmp_path / "inc" / "b.h"
    stat = b.stat()
    (tmp_path / "inc" / "b.new").write_text("int b = 2;\n")
    os.utime(tmp_path / "inc" / "b.new", ns=(stat.st_atime_ns, stat.st_mtime_ns))
    os.replace(tmp_path / "inc" / "b.new", b)
    fourth = _key(tmp_path, cache)
    assert fourth != third and fourth == cold()


def test_a_corrupt_stat_cache_is_a_cold_scan(tmp_path: Path) -> None:
    (tmp_path / "inc").mkdir()
    (tmp_path / "op.cpp").write_text('#include "a.h"\n#include <b.h>\nint op;\n')
    (tmp_path / "inc" / "a.h").write_text("int a = 1;\n")
    (tmp_path / "inc" / "b.h").write_text("int b = 1;\n")
    cache = tmp_path / "cache"
    first = _key(tmp_path, cache)
    facts = cache / "v1" / "scan-facts.bin"
    facts.write_bytes(b"\0" * 100)
    assert _key(tmp_path, cache) == first


def test_the_interpreter_is_probed_once_per_process() -> None:
    first = _env.environment_json()
    assert _env.environment_json() is first
    assert _env.site_packages() == _env.site_packages()


def test_import_abicache_leaves_load_inline_and_the_drop_ins_cold_parts_for_first_use() -> None:
    code = (
        "import sys, abicache\n"
        "from abicache import load\n"
        "assert 'abicache._load' not in sys.modules and 'abicache._inline' not in sys.modules, 'imported eagerly'\n"
        "from abicache import load_inline\n"
        "assert load_inline is abicache.load_inline and 'abicache._inline' in sys.modules\n"
        "assert 'abicache._load' not in sys.modules and 'abicache._native' not in sys.modules\n"
        "print('ok')\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr


def test_import_abicache_runs_only_the_package_file_and_a_name_imports_only_its_module() -> None:
    # The package's code lives in modules by concern; `import abicache` runs
    # `__init__.py` alone, and each public name imports the module defining
    # it (and what that module needs on a warm load) on first use.
    code = (
        "import sys, abicache\n"
        "def ours(): return sorted(m for m in sys.modules if m.startswith('abicache.'))\n"
        "print(ours())\n"
        "abicache.TorchOpsExtension\n"
        "print(ours())\n"
        "abicache.load\n"
        "print(ours())\n"
        "print(abicache.TorchOpsExtension.__module__, abicache.load.__module__)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == [
        "[]",
        "['abicache._extension', 'abicache._warm_record']",
        "['abicache._dropins', 'abicache._extension', 'abicache._warm_record']",
        "abicache abicache",
    ], "`_cpu` (only for records that need it), the native module and the rest stay unimported"
