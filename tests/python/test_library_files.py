"""Issue 46, findings 6, 9 and 10: the file a load checks is the file it
loads, ``build_directory`` names the loaded bytes, and loaded libraries hold
no file descriptors.

Real libraries, real processes: a writer process swapping a layer's library
while another process looks it up and opens it as the loader does; a stale
copy in a build directory; a child process whose open-file limit is lower
than the number of libraries it loads."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any, Dict, List

import pytest

# A library with no torch code: cheap to build, loaded with
# `is_python_module=False` (`torch.ops.load_library`'s way).
PLAIN = 'extern "C" int {name}_answer() {{ return {answer}; }}\n'


def _run(code: str, env: Dict[str, str], timeout: float = 600) -> Dict[str, Any]:
    """Runs ``code`` in a new interpreter; returns what it printed after ``RESULT ``."""
    full = dict(os.environ, PYTHONWARNINGS="ignore", ABICACHE_PCH="0")
    full.pop("ABICACHE_INTERCEPT", None)
    full.update(env)
    proc = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, env=full,
                          timeout=timeout)
    for line in proc.stdout.splitlines():
        if line.startswith("RESULT "):
            return json.loads(line[len("RESULT "):])
    raise AssertionError(f"exited {proc.returncode} without a result\n--- stdout\n{proc.stdout}\n--- stderr\n{proc.stderr}")


def _plain_sources(directory: Path, names: List[str]) -> List[Path]:
    directory.mkdir(parents=True, exist_ok=True)
    out = []
    for answer, name in enumerate(names):
        source = directory / f"{name}.cpp"
        source.write_text(PLAIN.format(name=name, answer=answer))
        out.append(source)
    return out


BUILD = """
import json, os, abicache
specs = json.loads(os.environ["SPECS"])
paths = [abicache.TorchOpsExtension(n, [s], cache_dir=c).load() for n, s, c in specs]
print("RESULT " + json.dumps(paths))
"""


# --- 6: the stamp handed to the loader is the hashed descriptor's ----------------------------------

LOOKUP_AND_OPEN = """
import fcntl, json, os, sys, time
import abicache
from abicache import _native, _native_path
ext = abicache.TorchOpsExtension("fall_swap", [os.environ["SOURCE"]], cache_dir=os.environ["CACHE"])
spec, env, root, cache = _native_path.native_args(ext)
genuine = int(os.environ["GENUINE_INO"])

def lookup_and_open():
    # What `_native_path.load` does before it loads: the native lookup, then
    # the descriptor the loader would `dlopen` (None: refused, looked up again).
    outcome = _native.build(spec, env, root, cache, quiet=True)
    return _native_path.open_checked(outcome["path"], outcome.get("library_stamp"), outcome.get("layer", False))

fd = lookup_and_open()
assert fd is not None and os.fstat(fd).st_ino == genuine, "the first lookup (no writer yet) must serve the layer"
os.close(fd)
# Hold the key's build lock: a lookup that misses (it hashed the other file)
# then fails at once (ABICACHE_LOCK_TIMEOUT=0) instead of building.
lock = open(os.path.join(cache, "v1", "locks", ext.key + ".lock"), "a")
fcntl.flock(lock, fcntl.LOCK_EX)
open(os.environ["GO"], "w").close()
served = wrong = refused = misses = 0
deadline = time.monotonic() + float(os.environ["SECONDS"])
while time.monotonic() < deadline:
    try:
        fd = lookup_and_open()
    except abicache.LockTimeout:
        misses += 1
        continue
    if fd is None:
        refused += 1
        continue
    if os.fstat(fd).st_ino == genuine:
        served += 1
    else:
        wrong += 1
    os.close(fd)
print("RESULT " + json.dumps({"served": served, "wrong": wrong, "refused": refused, "misses": misses}))
"""

SWAPPER = """
import ctypes, os, sys, time
libc = ctypes.CDLL(None, use_errno=True)
RENAME_EXCHANGE = 2
a, b, go = sys.argv[1].encode(), sys.argv[2].encode(), sys.argv[3]
while not os.path.exists(go):
    time.sleep(0.01)
swaps = 0
while os.path.exists(go):
    if libc.renameat2(-100, a, -100, b, RENAME_EXCHANGE) != 0:
        raise OSError(ctypes.get_errno(), "renameat2")
    swaps += 1
if swaps % 2:
    libc.renameat2(-100, a, -100, b, RENAME_EXCHANGE)
print(swaps)
"""


def test_a_layer_library_swapped_while_it_is_checked_is_never_what_the_loader_opens(tmp_path: Path) -> None:
    # A layer (someone else's cache) whose library a writer keeps swapping
    # with another file of the same size (`renameat2(RENAME_EXCHANGE)`),
    # while the lookup that hashes it and the loader's open run in a loop.
    # Whatever the timing, the descriptor the loader would load is the
    # file that was hashed, or nothing.
    (source,) = _plain_sources(tmp_path / "src", ["fall_swap"])
    layer = tmp_path / "layer"
    built = _run(BUILD, {"SPECS": json.dumps([["fall_swap", str(source), str(layer)]])})
    library = Path(built[0])
    genuine = library.read_bytes()
    other = bytearray(genuine)
    other[-1] ^= 0xFF  # same size, other bytes: fails the hash
    spare = layer / "v1" / "spare.so"
    spare.write_bytes(bytes(other))
    spare.chmod(0o600)
    go = tmp_path / "go"
    writer = subprocess.Popen([sys.executable, "-c", SWAPPER, str(library), str(spare), str(go)],
                              stdout=subprocess.PIPE, text=True)
    try:
        result = _run(LOOKUP_AND_OPEN, {
            "SOURCE": str(source), "CACHE": str(tmp_path / "cache"), "ABICACHE_READONLY_DIRS": str(layer),
            "ABICACHE_LOCK_TIMEOUT": "0", "GENUINE_INO": str(library.stat().st_ino), "GO": str(go), "SECONDS": "4",
        })
    finally:
        go.unlink(missing_ok=True)
        swaps = int(writer.communicate(timeout=60)[0] or 0)
    assert swaps > 1000, f"the writer swapped only {swaps} times"
    assert result["misses"] + result["refused"] > 0, f"the writer never got between a lookup and its open: {result}"
    assert result["wrong"] == 0, f"the loader was handed a file other than the one hashed: {result}"
    assert result["served"] > 0, result
    assert library.read_bytes() == genuine


# --- 9: build_directory names the loaded bytes -------------------------------------------------------

def test_a_stale_build_directory_copy_of_the_same_size_and_mtime_is_replaced(tmp_path: Path) -> None:
    (source,) = _plain_sources(tmp_path / "src", ["fall_bd"])
    build_dir, cache = tmp_path / "build", tmp_path / "cache"
    load = """
    import json, os, abicache
    path = abicache.load("fall_bd", [os.environ["SOURCE"]], is_python_module=False,
                         build_directory=os.environ["BUILD_DIR"], cache_dir=os.environ["CACHE"])
    print("RESULT " + json.dumps({"path": path}))
    """
    env = {"SOURCE": str(source), "BUILD_DIR": str(build_dir), "CACHE": str(cache)}
    first = _run(load, env)
    copy = Path(first["path"])
    assert copy == build_dir / "fall_bd.so"
    (entry,) = list(cache.glob("v1/entries/*/fall_bd.so"))
    assert copy.read_bytes() == entry.read_bytes()
    # A stale copy (another build, a tampered file) with the library's size and mtime.
    stat = copy.stat()
    stale = bytearray(copy.read_bytes())
    stale[-1] ^= 0xFF
    copy.write_bytes(bytes(stale))
    os.utime(copy, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    second = _run(load, env)
    assert Path(second["path"]) == copy
    assert copy.read_bytes() == entry.read_bytes(), "build_directory kept bytes other than the loaded library's"


# --- 10: loaded libraries hold no descriptors ------------------------------------------------------

LOAD_UNDER_LIMIT = """
import json, os, resource, sys
import abicache, torch
specs = json.loads(os.environ["SPECS"])
open_now = len(os.listdir("/proc/self/fd"))
soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
limit = open_now + int(os.environ["SLACK"])
resource.setrlimit(resource.RLIMIT_NOFILE, (limit, hard))
loaded, error = [], None
try:
    for name, source, cache in specs:
        loaded.append(abicache.TorchOpsExtension(name, [source], cache_dir=cache).load())
except OSError as e:
    error = f"{type(e).__name__}: {e}"
# Every library is mapped (none was taken for another loaded under the same descriptor number).
mapped = set()
with open("/proc/self/maps") as maps:
    for line in maps:
        fields = line.split()
        if len(fields) >= 5 and fields[4] != "0":
            mapped.add(int(fields[4]))
inodes = [os.stat(p).st_ino for p in loaded]
print("RESULT " + json.dumps({"limit": limit, "loaded": len(loaded), "error": error,
      "unmapped": [p for p, i in zip(loaded, inodes) if i not in mapped],
      "open_after": len(os.listdir("/proc/self/fd")), "open_before": open_now}))
"""


def test_more_libraries_than_the_open_file_limit_load(tmp_path: Path) -> None:
    count, slack = 24, 12
    names = [f"fall_fd_{k}" for k in range(count)]
    cache = tmp_path / "cache"
    specs = [[n, str(s), str(cache)] for n, s in zip(names, _plain_sources(tmp_path / "src", names))]
    _run(BUILD, {"SPECS": json.dumps(specs)})  # built once; the child's loads are hits
    result = _run(LOAD_UNDER_LIMIT, {"SPECS": json.dumps(specs), "SLACK": str(slack)})
    assert result["error"] is None, f"{result['loaded']} of {count} libraries loaded under a limit of {result['limit']}: {result['error']}"
    assert result["loaded"] == count
    assert result["unmapped"] == [], "a library was taken for another one loaded before it"
    assert result["open_after"] <= result["open_before"] + 2, result
