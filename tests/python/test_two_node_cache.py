"""One writable cache shared by two nodes (issue 51), on the two-node test bed.

Two sshfs (FUSE) mounts of one export directory, each in its own node (own
hostname, own PID namespace, own boot id; tests/python/two_node_bed.py) stand
for two NFS clients of one server: each node caches attributes, locks taken
through one mount are not seen through the other, and pids collide across
the nodes. Every process here is a real Python process on a node, importing
torch and loading the CPU example (examples/cpu_muladd) from the cache at
``<bed>/shared/cache`` (the same path on both nodes, as an NFS home is).

Builds are counted by compiler wrappers first on each node's ``PATH`` (a link,
``-shared``, is one build) and by ``abicache stats``. The example is compiled
once for the module (by the concurrent builders) and shared by the tests that
follow; the killed-leaseholder test builds it once more under another key.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Dict, Iterator, List, Optional

import pytest

from _util import example_spec
from skip_report import skip_for_hardware
from two_node_bed import NODES, TwoNodeBed, unavailable

BUILDERS_PER_NODE = 8
# A short lease timeout for the killed-leaseholder test (seconds).
LEASE_TIMEOUT = 6

# One process on a node: imports torch and abicache, waits at the barrier
# (`ready` file written, then until `go` exists), loads the extension
# (`loops` times in fresh lookups when asked, for the gc test) and calls its op.
WORKER = r"""
import json, os, socket, sys, time
import torch, abicache
args = json.loads(sys.argv[1])
out = {"host": socket.gethostname(), "pid": os.getpid()}
barrier = args.get("barrier")
if barrier:
    open(os.path.join(barrier, "ready.%s.%d" % (out["host"], os.getpid())), "w").close()
    while not os.path.exists(os.path.join(barrier, "go")):
        time.sleep(0.005)
t0 = time.monotonic()
try:
    path = abicache.TorchOpsExtension(**args["spec"], cache_dir=args["cache"]).load()
    out["seconds"] = time.monotonic() - t0
    a = torch.arange(4, dtype=torch.float32)
    r = torch.ops.muladd_example.muladd(a, a, 1.0)
    out.update(path=path, ok=bool(torch.equal(r, a * a + 1.0)), exists=os.path.exists(path))
    with open(path, "rb") as f:
        import hashlib
        out["sha256"] = hashlib.sha256(f.read()).hexdigest()
except Exception as e:
    out["error"] = "%s: %s" % (type(e).__name__, e)
print("RESULT " + json.dumps(out), flush=True)
"""

COMPILERS = ("c++", "g++", "cc", "gcc")


def _result(proc: "subprocess.Popen[str]", timeout: float = 900) -> Dict[str, Any]:
    stdout, stderr = proc.communicate(timeout=timeout)
    for line in stdout.splitlines():
        if line.startswith("RESULT "):
            return dict(json.loads(line[len("RESULT "):]), stderr=stderr[-2000:])
    return {"error": f"exited {proc.returncode} without a result", "stderr": stderr[-4000:]}


class Cluster:
    """The bed plus what the tests put around it: the cache path both nodes
    use, per-node compiler wrappers that log each build, and process helpers."""

    def __init__(self, bed: TwoNodeBed, work: Path) -> None:
        self.bed = bed
        self.work = work
        self.cache = bed.shared / "cache"
        self.worker = work / "worker.py"
        self.worker.write_text(WORKER)
        venv_bin = os.path.dirname(sys.executable)
        search = venv_bin + os.pathsep + os.environ.get("PATH", "")
        self.paths: Dict[str, str] = {}
        for node in NODES:
            wrappers = work / f"bin.{node}"
            wrappers.mkdir()
            log = self.build_log(node)
            log.write_text("")
            Path(f"{log}.compiles").write_text("")
            for name in COMPILERS:
                real = shutil.which(name, path=search)
                if real is None:
                    continue
                # A link (`-shared`) is one build; `BED_SLOW_COMPILE=S` makes
                # each compile (`-c`) sleep S seconds first (a long build to
                # kill mid-way).
                body = (f'case " $* " in *" -shared "*) echo "$(hostname) $$" >> "{log}";; esac\n'
                        f'case " $* " in *" -c "*) echo "$(hostname) $$" >> "{log}.compiles"\n'
                        f'  [ -n "$BED_SLOW_COMPILE" ] && sleep "$BED_SLOW_COMPILE";; esac\n'
                        f'exec "{real}" "$@"\n')
                wrapper = wrappers / name
                wrapper.write_text("#!/bin/sh\n" + body)
                wrapper.chmod(wrapper.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
            self.paths[node] = str(wrappers) + os.pathsep + search

    def build_log(self, node: str) -> Path:
        return self.work / f"builds.{node}.log"

    def compiles(self, node: str) -> List[str]:
        """Compiles (``-c``) started on ``node`` so far."""
        return Path(f"{self.build_log(node)}.compiles").read_text().splitlines()

    def builds(self) -> List[str]:
        """Every build (link) on either node so far: ``nodeA 12``."""
        return [line for node in NODES for line in self.build_log(node).read_text().splitlines()]

    def env(self, node: str, **extra: str) -> Dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("ABICACHE_") or k == "ABICACHE_PCH"}
        env.pop("CXX", None)
        env.pop("CC", None)
        env.update(PATH=self.paths[node], PYTHONWARNINGS="ignore", PYTHONDONTWRITEBYTECODE="1")
        env.update(extra)
        return env

    def start_worker(self, node: str, spec: Dict[str, Any], barrier: Optional[Path] = None,
                     **env: str) -> "subprocess.Popen[str]":
        args = {"spec": spec, "cache": str(self.cache), "barrier": str(barrier) if barrier else None}
        return self.bed.popen(node, [sys.executable, str(self.worker), json.dumps(args)], env=self.env(node, **env),
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)

    def abicache(self, node: str, *args: str, **env: str) -> "subprocess.CompletedProcess[str]":
        """``abicache ARGS --cache-dir <cache>`` on ``node``."""
        return self.bed.run(node, [sys.executable, "-m", "abicache", *args, "--cache-dir", str(self.cache)],
                            env=self.env(node, **env), timeout=300)

    def stats(self, node: str = "A") -> Dict[str, Any]:
        out = self.abicache(node, "stats", "--json")
        assert out.returncode == 0, out.stderr
        stats: Dict[str, Any] = json.loads(out.stdout)
        return stats

    def entries(self) -> List[Path]:
        """Published entries, as the server sees them (its own directory)."""
        root = self.bed.export / "cache" / "v1" / "entries"
        return sorted(p for p in root.iterdir() if p.is_dir()) if root.exists() else []


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    reason = unavailable()
    if reason is not None:
        if reason.setup:
            pytest.skip(str(reason))
        skip_for_hardware(str(reason))
    work = tmp_path_factory.mktemp("two-node")
    bed = TwoNodeBed(work / "bed")
    with bed:
        yield Cluster(bed, work)


@pytest.fixture(scope="module")
def concurrent(cluster: Cluster) -> List[Dict[str, Any]]:
    """16 builders (8 per node) of the CPU example into the empty shared
    cache, released at once from a barrier; their results."""
    barrier = cluster.work / "barrier"
    barrier.mkdir()
    procs = [cluster.start_worker(node, example_spec("cpu"), barrier)
             for node in NODES for _ in range(BUILDERS_PER_NODE)]
    deadline = time.monotonic() + 600
    while len(list(barrier.glob("ready.*"))) < len(procs):
        if time.monotonic() > deadline or any(p.poll() is not None for p in procs):
            break
        time.sleep(0.05)
    (barrier / "go").touch()
    return [_result(p) for p in procs]


def test_concurrent_builders_on_two_nodes_all_load_with_at_most_two_builds(cluster: Cluster,
                                                                          concurrent: List[Dict[str, Any]]) -> None:
    failed = [r for r in concurrent if not r.get("ok")]
    assert not failed, f"{len(failed)} of {len(concurrent)} processes did not load a working library:\n" + \
        "\n".join(json.dumps(r) for r in failed)
    # Both nodes took part, with colliding pids (each node's own namespace).
    assert {r["host"] for r in concurrent} == {"nodeA", "nodeB"}
    assert all(r["exists"] for r in concurrent)
    assert len({r["sha256"] for r in concurrent}) == 1, "the processes loaded different bytes"
    builds = cluster.builds()
    print(f"concurrent builders: {len(concurrent)} loaded, builds {builds}, "
          f"load seconds {sorted(round(r['seconds'], 1) for r in concurrent)}")
    assert 1 <= len(builds) <= 2, f"{len(builds)} builds (links) for one key across two nodes: {builds}"
    stats = cluster.stats()
    assert stats["corrupt"] == 0, stats
    assert 1 <= stats["builds"] <= 2, stats
    (entry,) = cluster.entries()
    assert (entry / "manifest.json").is_file()


def test_counters_from_both_nodes_add_up(cluster: Cluster, concurrent: List[Dict[str, Any]]) -> None:
    stats = cluster.stats("B")
    print(f"counters after 16 loads: hits {stats['hits']} builds {stats['builds']} misses {stats['misses']}")
    # Every one of the 16 loads counted exactly once, as a hit or a build.
    assert stats["hits"] + stats["builds"] == len(concurrent), stats
    # Then 3 more loads on each node, all hits, counted exactly.
    before = stats["hits"]
    procs = [cluster.start_worker(node, example_spec("cpu")) for node in NODES for _ in range(3)]
    results = [_result(p) for p in procs]
    assert all(r.get("ok") for r in results), results
    # Read from node A, whose mount may hold node B's counter log at an
    # older size for up to its attribute-cache time (sshfs: 20 s; an NFS
    # client revalidates on open): the counts are exact once that has passed,
    # none lost and none twice.
    t0 = time.monotonic()
    while True:
        after = cluster.stats("A")
        if after["hits"] - before >= 6 or time.monotonic() - t0 > 30:
            break
        time.sleep(1)
    print(f"counters: node A's stats showed all 6 further hits after {time.monotonic() - t0:.1f} s")
    assert after["hits"] - before == 6, (before, after)
    assert after["builds"] == stats["builds"], (stats, after)
    # Each node's count is its own (one counter log per host, never
    # interleaved across nodes).
    logs = sorted(p.name for p in (cluster.bed.export / "cache" / "v1" / "stats").glob("*.log"))
    assert len(logs) == 2, logs


def test_a_killed_leaseholder_is_taken_over_within_the_timeout_plus_one_build(cluster: Cluster,
                                                                               concurrent: List[Dict[str, Any]]) -> None:
    # Another key (one more define), so this is a cold build.
    spec = dict(example_spec("cpu"), extra_cflags=["-DTWO_NODE_KILLED_LEASEHOLDER"])
    timeout = str(LEASE_TIMEOUT)
    before = cluster.stats()
    compiles_a = len(cluster.compiles("A"))
    # Node A's builder compiles slowly (each compile sleeps 60 s first): it is
    # certainly mid-build when killed.
    builder = cluster.start_worker("A", spec, BED_SLOW_COMPILE="60", ABICACHE_LEASE_TIMEOUT=timeout)
    deadline = time.monotonic() + 300
    while len(cluster.compiles("A")) == compiles_a:
        assert builder.poll() is None, _result(builder)
        assert time.monotonic() < deadline, "node A's builder started no compile within 300 s"
        time.sleep(0.05)
    # The builder holds the key's lease (`v1/leases/<key>.lease`), as the
    # server sees it.
    while not _leases(cluster):
        assert time.monotonic() < deadline, "node A builds without a lease file under v1/leases/"
        time.sleep(0.05)
    (lease,) = _leases(cluster)
    holder = (cluster.bed.export / "cache" / "v1" / "leases" / lease).read_text()
    assert "nodeA" in holder, holder
    # kill -9 the builder, and everything it started (its compilers), as a
    # node that dies would: the whole process group (`nsenter` started it in
    # its own session).
    os.killpg(builder.pid, signal.SIGKILL)
    builder.communicate()
    t0 = time.monotonic()
    result = _result(cluster.start_worker("B", spec, ABICACHE_LEASE_TIMEOUT=timeout))
    took = time.monotonic() - t0
    assert result.get("ok"), result
    after = cluster.stats()
    assert after["builds"] == before["builds"] + 1, (before, after)
    build_seconds = after["build_seconds"] - before["build_seconds"]
    print(f"killed leaseholder: node B loaded after {took:.1f} s (lease timeout {LEASE_TIMEOUT} s, "
          f"its build {build_seconds:.1f} s)")
    # B's load took at most the lease timeout (plus the 2 s clock-skew
    # allowance) and its one build, plus a process start (torch import, on a
    # busy machine: 20 s).
    assert took <= LEASE_TIMEOUT + 2 + build_seconds + 20, (took, build_seconds)
    # ... and no less than the timeout: B waited for A's lease to go stale.
    assert took >= 0.75 * LEASE_TIMEOUT, took
    assert not _leases(cluster), "a lease was left behind"
    # Nothing half-published: every entry directory is complete.
    for entry in cluster.entries():
        assert (entry / "manifest.json").is_file(), f"entry {entry.name} has no manifest: {sorted(entry.iterdir())}"
    assert len(cluster.entries()) == 2


def _leases(cluster: Cluster) -> List[str]:
    """The key leases (``v1/leases/<key>.lease``) on the export."""
    leases = cluster.bed.export / "cache" / "v1" / "leases"
    return sorted(p.name for p in leases.glob("*.lease") if p.name != "gc.lease") if leases.is_dir() else []


def test_gc_on_one_node_while_the_other_loads_vanishes_nothing(cluster: Cluster,
                                                               concurrent: List[Dict[str, Any]]) -> None:
    spec = example_spec("cpu")
    builds_before = len(cluster.builds())
    gcs: List[subprocess.CompletedProcess[str]] = []
    loads: List[Dict[str, Any]] = []
    # Node B loads first: from then on the entry is one that another node's
    # process has just returned, which gc must spare.
    first = _result(cluster.start_worker("B", spec))
    assert first.get("ok"), first
    loads.append(first)
    # Node B: two loops of fresh processes, each loading, calling the op and
    # reading its library; node A: gc down to nothing, again and again, 30 s.
    stop = time.monotonic() + 30
    loopers = [cluster.start_worker("B", spec) for _ in range(2)]
    while time.monotonic() < stop or loopers:
        if time.monotonic() < stop:
            gcs.append(cluster.abicache("A", "gc", "--max-size", "0", "--json"))
        for p in list(loopers):
            if p.poll() is not None:
                loopers.remove(p)
                loads.append(_result(p))
                if time.monotonic() < stop:
                    loopers.append(cluster.start_worker("B", spec))
        time.sleep(0.2)
    assert all(g.returncode == 0 for g in gcs), [g.stderr for g in gcs if g.returncode]
    vanished = [r for r in loads if not r.get("ok") or not r.get("exists")]
    print(f"gc under load: {len(gcs)} gc runs on A, {len(loads)} loads on B, {len(vanished)} vanished, "
          f"{len(cluster.builds()) - builds_before} rebuilds")
    assert len(loads) >= 4, loads
    assert not vanished, "\n".join(json.dumps(r) for r in vanished)
    # Nor did gc evict the entry under B's feet (B would have rebuilt it).
    evicting = [json.loads(g.stdout) for g in gcs if g.returncode == 0 and json.loads(g.stdout)["evicted"]]
    assert len(cluster.builds()) == builds_before, (cluster.builds(), evicting[:3])


def test_a_library_replaced_from_the_other_node_is_never_served_stale(cluster: Cluster,
                                                                      concurrent: List[Dict[str, Any]]) -> None:
    spec = example_spec("cpu")
    first = _result(cluster.start_worker("A", spec))
    assert first.get("ok"), first
    library = Path(first["path"])
    # Node B replaces the library (same path, same size, new content: 64
    # bytes in the middle changed), through its own mount.
    replace = (
        "import os, sys, hashlib\n"
        "p = sys.argv[1]; data = bytearray(open(p, 'rb').read()); mid = len(data) // 2\n"
        "data[mid:mid + 64] = bytes(b ^ 0xFF for b in data[mid:mid + 64])\n"
        "tmp = p + '.replacement'; open(tmp, 'wb').write(data); os.replace(tmp, p)\n"
        "print(hashlib.sha256(data).hexdigest())\n"
    )
    out = cluster.bed.run("B", [sys.executable, "-c", replace, str(library)], env=cluster.env("B"))
    assert out.returncode == 0, out.stderr
    replaced = out.stdout.strip()
    # Node A loads it at once (within its mount's attribute cache, 20 s).
    builds_before = len(cluster.builds())
    second = _result(cluster.start_worker("A", spec))
    print(f"stale hit: A's load after B's replacement: "
          f"{'the original bytes' if second.get('sha256') == first['sha256'] else 'other bytes'}, "
          f"{len(cluster.builds()) - builds_before} rebuilds")
    assert second.get("ok"), second
    assert second["sha256"] != replaced, "node A served the library node B replaced"
