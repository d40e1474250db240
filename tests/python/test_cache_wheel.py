"""A cache wheel end to end: entries of 2 environments (.venv's torch and
.venv-compat's) x 2 extensions (the CPU and the stable-ABI examples) exported
with ``abicache export --wheel``, installed with pip next to the abicache
wheel into fresh venvs, and found there with no configuration: loads compile
nothing on a ``PATH`` without a compiler; a tampered wheel is refused with one
warning and the entry is built; uninstalled, the extensions build.

The fresh venvs see torch through a ``.pth`` line naming the base venv's
site-packages (nothing is downloaded); their own site-packages, where pip
installs abicache and the cache wheel, comes first on ``sys.path``; pip runs
with ``--ignore-installed`` so it neither skips abicache (the base venv has
it) nor touches the base venv.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any, Dict, List, Optional

import pytest

from _util import COMPAT_PYTHON, abicache_wheel, example_spec

DIST = "examples-abicache-cache"
PACKAGE = "_abicache_cache_examples_abicache_cache"

LOAD_BOTH = r"""
import json, sys, torch, abicache
cache = sys.argv[1]
specs = json.loads(sys.argv[2])
paths = [abicache.TorchOpsExtension(**spec, cache_dir=cache).load() for spec in specs]
a, b = torch.tensor([1.0, 2.0]), torch.tensor([3.0, 4.0])
assert torch.ops.muladd_example.muladd(a, b, 0.5).tolist() == [3.5, 8.5]
stats = abicache.stats(cache)
print("RESULT " + json.dumps({"paths": paths, "builds": stats["builds"], "layer_hits": stats["layer_hits"],
                              "abicache": abicache.__file__}))
"""


def site_packages(python: Path) -> str:
    return subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True, text=True, check=True,
    ).stdout.strip()


def fresh_venv(base_python: Path, where: Path) -> Path:
    """A new venv without pip whose ``sys.path`` ends with ``base_python``'s
    site-packages (torch), returning its python."""
    subprocess.run([str(base_python), "-m", "venv", "--without-pip", str(where)], check=True)
    python = where / "bin" / "python"
    Path(site_packages(python), "_base_venv.pth").write_text(site_packages(base_python) + "\n")
    return python


def pip(base_python: Path, python: Path, *args: str) -> None:
    out = subprocess.run(
        [str(base_python), "-m", "pip", "--python", str(python), *args, "--quiet"],
        capture_output=True, text=True, timeout=600,
    )
    assert out.returncode == 0, out.stdout + out.stderr


def load_both(python: Path, cache: Path, path_env: str) -> Dict[str, Any]:
    """Loads both examples in a new process of ``python`` with ``PATH=path_env``,
    no ``CXX``/``PYTHONPATH`` and an empty cache; returns what it reports and its stderr."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "CXX", "CC", "ABICACHE_READONLY_DIRS")}
    env["PATH"] = path_env
    specs = [example_spec("cpu"), example_spec("stable")]
    proc = subprocess.run(
        [str(python), "-c", LOAD_BOTH, str(cache), json.dumps(specs)],
        capture_output=True, text=True, env=env, timeout=900,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    result = json.loads(next(l for l in proc.stdout.splitlines() if l.startswith("RESULT "))[len("RESULT "):])
    result["stderr"] = proc.stderr
    return result


def layer_warnings(stderr: str) -> List[str]:
    return [line for line in stderr.splitlines() if "read-only cache layer" in line]


@pytest.fixture(scope="module")
def cache_wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The examples built in both venvs into one cache, exported as a wheel."""
    if not COMPAT_PYTHON.exists():
        pytest.skip("no .venv-compat: run scripts/setup-venv.sh compat")
    cache = tmp_path_factory.mktemp("ci") / "cache"
    specs = json.dumps([example_spec("cpu"), example_spec("stable")])
    build = "import json, sys, abicache\nfor s in json.loads(sys.argv[2]): abicache.TorchOpsExtension(**s, cache_dir=sys.argv[1]).load()"
    for python in (Path(sys.executable), COMPAT_PYTHON):
        subprocess.run([str(python), "-c", build, str(cache), specs], check=True, timeout=1800)
    out_dir = tmp_path_factory.mktemp("wheelhouse")
    exported = subprocess.run(
        [sys.executable, "-m", "abicache", "export", "--wheel", f"{DIST}==1.0", "--out", str(out_dir), "--json"],
        capture_output=True, text=True, env=dict(os.environ, ABICACHE_DIR=str(cache)),
    )
    assert exported.returncode == 0, exported.stderr
    report = json.loads(exported.stdout)
    # CPU example once per torch, the stable-ABI one once for both.
    assert sorted(name for name, _ in report["entries"]) == ["muladd_example", "muladd_example", "stable_scale"]
    print(f"cache wheel: {report['path']} ({report['size']} bytes, {report['tag']})", file=sys.stderr)
    return Path(report["path"])


@pytest.mark.parametrize("base", [Path(sys.executable), COMPAT_PYTHON], ids=["venv", "venv-compat"])
def test_an_installed_cache_wheel_loads_both_examples_with_no_compile_and_no_compiler(
    cache_wheel: Path, base: Path, tmp_path: Path
) -> None:
    python = fresh_venv(base, tmp_path / "fresh")
    pip(base, python, "install", "--no-deps", "--no-index", "--ignore-installed", str(abicache_wheel()), str(cache_wheel))
    layer = Path(site_packages(python), PACKAGE, "cache")
    assert layer.is_dir()
    assert shutil.which("c++", path=str(python.parent)) is None
    loaded = load_both(python, tmp_path / "cache", str(python.parent))
    assert loaded["abicache"].startswith(site_packages(python)), loaded
    assert loaded["builds"] == 0 and loaded["layer_hits"] == 2, loaded
    assert all(p.startswith(str(layer)) for p in loaded["paths"]), loaded
    assert layer_warnings(loaded["stderr"]) == [], loaded["stderr"]


def test_a_tampered_cache_wheel_is_refused_with_one_warning_and_uninstalled_the_examples_build(
    cache_wheel: Path, tmp_path: Path
) -> None:
    base = Path(sys.executable)
    python = fresh_venv(base, tmp_path / "fresh")
    pip(base, python, "install", "--no-deps", "--no-index", "--ignore-installed", str(abicache_wheel()), str(cache_wheel))
    layer = Path(site_packages(python), PACKAGE, "cache")
    path_with_compiler = f"{python.parent}{os.pathsep}{os.environ['PATH']}"
    first = load_both(python, tmp_path / "first", str(python.parent))
    muladd = Path(next(p for p in first["paths"] if "muladd" in p))
    data = bytearray(muladd.read_bytes())
    data[-1] ^= 0xFF
    muladd.write_bytes(bytes(data))

    tampered = load_both(python, tmp_path / "tampered", path_with_compiler)
    warnings = layer_warnings(tampered["stderr"])
    assert len(warnings) == 1 and "BLAKE3" in warnings[0], tampered["stderr"]
    assert tampered["builds"] == 1 and tampered["layer_hits"] == 1, tampered
    assert not any(p.startswith(str(layer)) for p in tampered["paths"] if "muladd" in p), tampered

    pip(base, python, "uninstall", "-y", DIST)
    assert not layer.exists()
    gone = load_both(python, tmp_path / "gone", path_with_compiler)
    assert gone["builds"] == 2 and gone["layer_hits"] == 0, gone
    assert layer_warnings(gone["stderr"]) == [], gone["stderr"]


LOAD_CPU = r"""
import json, sys, torch, abicache
from abicache import _layers
cache = sys.argv[1]
spec = json.loads(sys.argv[2])
path = abicache.TorchOpsExtension(**spec, cache_dir=cache).load()
stats = abicache.stats(cache)
print("RESULT " + json.dumps({"path": path, "builds": stats["builds"], "layer_hits": stats["layer_hits"],
                              "layers": _layers.wheel_layers()}))
"""

FOUND = "from abicache import _layers; print('FOUND ' + repr(_layers.wheel_layers()))"


def test_a_cache_wheel_unpacked_in_the_current_directory_is_never_a_layer(cache_wheel: Path, tmp_path: Path) -> None:
    """#46 finding 1 as an attacker does it: a project directory holding two
    plain directories (the wheel's ``.dist-info`` with its ``abicache.caches``
    entry point, and its ``cache/``). Run from there with ``python -c``,
    ``python -m`` and a script on stdin (``''`` first on ``sys.path``), the
    cache is not a layer: the extension is built. No trusted keys are set, so
    only discovery keeps it out (with them, its unsigned index would also be
    refused: ``with_trusted_keys_a_wheel_whose_index_was_deleted_serves_nothing``)."""
    import zipfile

    project = tmp_path / "project"
    with zipfile.ZipFile(cache_wheel) as wheel:
        wheel.extractall(project)
    planted = project / PACKAGE / "cache"
    assert planted.is_dir() and any(project.glob("*.dist-info/entry_points.txt"))
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "ABICACHE_READONLY_DIRS")}
    env.pop("ABICACHE_TRUSTED_KEYS", None)
    (project / "found_layers.py").write_text(FOUND + "\n")
    for argv, stdin in (
        ([sys.executable, "-c", FOUND], None),
        ([sys.executable, "-m", "found_layers"], None),
        ([sys.executable, "-"], FOUND),
    ):
        proc = subprocess.run(argv, input=stdin, capture_output=True, text=True, cwd=project, env=env, timeout=120)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        found = next(l for l in proc.stdout.splitlines() if l.startswith("FOUND "))
        assert str(planted) not in found and str(project) not in found, (argv, found)

    proc = subprocess.run(
        [sys.executable, "-c", LOAD_CPU, str(tmp_path / "cache"), json.dumps(example_spec("cpu"))],
        capture_output=True, text=True, cwd=project, env=env, timeout=900,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    loaded = json.loads(next(l for l in proc.stdout.splitlines() if l.startswith("RESULT "))[len("RESULT "):])
    assert loaded["layer_hits"] == 0 and loaded["builds"] == 1, loaded
    assert not loaded["path"].startswith(str(project)), loaded


def uv_program() -> str:
    """The project's `uv` (``scripts/test.sh`` hands it over as
    ``ABICACHE_TEST_UV``; else ``scripts/setup-uv.sh`` makes or finds it)."""
    from _util import REPO

    given = os.environ.get("ABICACHE_TEST_UV")
    if given:
        return given
    return subprocess.run(
        [str(REPO / "scripts" / "setup-uv.sh")], capture_output=True, text=True, check=True
    ).stdout.strip()


def test_a_cache_wheel_uv_installed_with_hard_links_is_served_by_rust_and_python_alike(
    cache_wheel: Path, tmp_path: Path
) -> None:
    """#46 finding 4: ``uv pip install`` hard-links an installed wheel's files
    from its cache, so the layer's libraries have several links. Rust's layer
    check accepted them and Python's load refused them ("removed or replaced
    3 times", nothing built); both now accept a file with several links owned
    by root or this user, and serve it with no compile and no compiler."""
    base = Path(sys.executable)
    python = fresh_venv(base, tmp_path / "fresh")
    pip(base, python, "install", "--no-deps", "--no-index", "--ignore-installed", str(abicache_wheel()))
    uv_cache = tmp_path / "uv-cache"  # on the venv's filesystem, so uv can hard-link
    out = subprocess.run(
        [uv_program(), "pip", "install", "--python", str(python), "--link-mode", "hardlink",
         "--cache-dir", str(uv_cache), "--no-deps", "--offline", str(cache_wheel)],
        capture_output=True, text=True, timeout=600,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    layer = Path(site_packages(python), PACKAGE, "cache")
    libraries = [p for p in layer.rglob("*.so")]
    assert libraries and all(p.stat().st_nlink >= 2 for p in libraries), [(p, p.stat().st_nlink) for p in libraries]
    loaded = load_both(python, tmp_path / "cache", str(python.parent))
    assert loaded["builds"] == 0 and loaded["layer_hits"] == 2, loaded
    assert all(p.startswith(str(layer)) for p in loaded["paths"]), loaded
    assert layer_warnings(loaded["stderr"]) == [], loaded["stderr"]
