"""A two-node test bed on one machine: two FUSE mounts of one export directory
standing for two NFS clients of one server (issue 51).

- The "server" is a loopback ``sshd`` from Debian's ``openssh-server`` on a
  free port, with a generated host key and a generated client key, all in the
  bed's own directory (no password, nothing read from or written to
  ``/root/.ssh``). Its export is ``<bed>/export``.
- Each node (``A``, ``B``) is a set of namespaces kept alive by one
  ``sleep infinity`` (the node's init): its own UTS namespace (hostname
  ``nodeA``/``nodeB``), its own PID namespace (pids collide across the nodes,
  as they do across machines), and its own mount namespace in which
  ``/proc`` is the node's and ``/proc/sys/kernel/random/boot_id`` is
  bind-mounted over by a per-node file (a boot id per node). The network is
  the host's, so both nodes reach the loopback ``sshd``.
- Each node mounts the export with ``sshfs`` (FUSE) at the same path,
  ``<bed>/shared``, inside its own mount namespace, with sshfs's default
  caches on (attributes and directory entries, 20 s): like NFS clients'
  attribute caches, a change made through one node's mount is seen by the
  other's only when its cached attributes expire or it opens the file.
- Locks are not shared across the mounts: sshfs implements neither ``flock``
  nor ``fcntl`` locks, so the kernel keeps them local to each mount (two nodes
  both get an exclusive ``flock`` on one file). ``O_CREAT|O_EXCL`` is the
  server's (SFTP's ``SSH_FXF_EXCL``), so exactly one node creates a file, and a
  rename is the server's ``rename(2)`` (``posix-rename@openssh.com``).

Commands run in a node through ``nsenter`` into its init's namespaces.
``down`` kills each node's init, which ends its PID namespace (and with it the
node's ``sshfs`` and anything left running there) and so its mount namespace
and mounts, then stops ``sshd``; it is safe to call on a half-made bed.

Used by ``tests/python/test_two_node_cache.py`` and, by hand, through
``scripts/two-node-bed.sh up|run NODE CMD...|down`` (this file's ``main``).
It needs root (namespaces, mounts), ``/dev/fuse``, ``unshare``/``nsenter``
(util-linux), and Debian's ``openssh-server`` and ``sshfs``
(``scripts/setup-services.sh`` installs them); :func:`unavailable` says in
words what is missing. Standard library only.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Dict, List, Optional, Sequence

NODES = ("A", "B")
SSHD = "/usr/sbin/sshd"
STATE = "bed.json"


class BedUnavailable(Exception):
    """The bed cannot be made on this machine; the message says why and what to do.

    ``setup`` is True when running ``scripts/setup-services.sh`` would fix it
    (a missing package); False when the machine refuses (not root, no FUSE,
    namespaces refused)."""

    def __init__(self, message: str, setup: bool) -> None:
        super().__init__(message)
        self.setup = setup


def unavailable() -> Optional[BedUnavailable]:
    """Why the bed cannot be made here (checked cheaply, before ``up``), or None."""
    if os.geteuid() != 0:
        return BedUnavailable("the two-node bed needs root (it makes namespaces and mounts)", setup=False)
    if not os.path.exists("/dev/fuse"):
        return BedUnavailable("the two-node bed needs FUSE: /dev/fuse is missing (load the fuse module)", setup=False)
    for tool in ("unshare", "nsenter", "fusermount3"):
        if shutil.which(tool) is None and not (tool == "fusermount3" and shutil.which("fusermount")):
            return BedUnavailable(f"`{tool}` is missing (util-linux / fuse3): run scripts/setup-services.sh",
                                  setup=True)
    if not os.access(SSHD, os.X_OK) or shutil.which("sshfs") is None:
        return BedUnavailable("the two-node bed needs Debian's openssh-server and sshfs: run scripts/setup-services.sh",
                              setup=True)
    probe = subprocess.run(["unshare", "--uts", "--pid", "--fork", "--mount", "--mount-proc", "true"],
                           capture_output=True, text=True)
    if probe.returncode != 0:
        return BedUnavailable(f"namespaces refused here (`unshare --uts --pid --mount` exited "
                              f"{probe.returncode}: {probe.stderr.strip()})", setup=False)
    return None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _children(pid: int) -> List[int]:
    try:
        return [int(p) for p in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except OSError:
        return []


class TwoNodeBed:
    """One bed under ``root``: ``export/`` (the server's directory),
    ``shared/`` (where each node mounts it), keys, ``sshd``'s files and the
    nodes' boot-id files. Its state is kept in ``root/bed.json`` so that
    another process (the script's ``run`` and ``down``) can use it."""

    def __init__(self, root: Path) -> None:
        self.root = Path(root).resolve()
        self.export = self.root / "export"
        self.shared = self.root / "shared"
        self.state: Dict[str, object] = {}
        state = self.root / STATE
        if state.exists():
            self.state = json.loads(state.read_text())

    # --- lifecycle -------------------------------------------------------

    def up(self) -> "TwoNodeBed":
        """Starts sshd and both nodes and mounts the export in each; on any
        failure tears down what was made and raises ``BedUnavailable`` or
        ``RuntimeError`` naming the step."""
        reason = unavailable()
        if reason is not None:
            raise reason
        self.root.mkdir(parents=True, exist_ok=True)
        self.export.mkdir(exist_ok=True)
        self.shared.mkdir(exist_ok=True)
        try:
            self._start_sshd()
            for node in NODES:
                self._start_node(node)
                self._mount(node)
        except BaseException:
            self.down()
            raise
        return self

    def down(self) -> None:
        """Ends both nodes (their PID namespaces, so their sshfs and mounts)
        and sshd. Idempotent; never raises for what is already gone."""
        for node in NODES:
            pid = self.state.get(f"init_{node}")
            if isinstance(pid, int):
                # The node's init is pid 1 of its namespace: killing it kills
                # every process there, sshfs included, and the mount namespace
                # (with its FUSE mount) goes with its last process.
                self._kill(pid)
            holder = self.state.get(f"unshare_{node}")
            if isinstance(holder, int):
                self._kill(holder)
        pid = self.state.get("sshd")
        if isinstance(pid, int):
            self._kill(pid)
        self.state = {}
        state = self.root / STATE
        if state.exists():
            state.unlink()

    def __enter__(self) -> "TwoNodeBed":
        return self.up()

    def __exit__(self, *exc: object) -> None:
        self.down()

    # --- running in a node ----------------------------------------------

    def argv(self, node: str, command: Sequence[str], cwd: Optional[Path] = None) -> List[str]:
        """``nsenter`` into ``node``'s namespaces, then ``command`` (run from
        ``cwd``, default the bed's ``shared/``: entering a mount namespace
        resets the working directory)."""
        init = self.state.get(f"init_{node}")
        if not isinstance(init, int):
            raise RuntimeError(f"node {node} is not up (run `up` first)")
        return ["nsenter", f"--target={init}", "--uts", "--pid", "--mount", f"--wd={cwd or self.shared}", "--",
                *command]

    def popen(self, node: str, command: Sequence[str], env: Optional[Dict[str, str]] = None,
              cwd: Optional[Path] = None, **kwargs: object) -> "subprocess.Popen[str]":
        """Starts ``command`` in ``node``; the Popen's pid is ``nsenter``'s, and
        :meth:`node_process` finds the command's own host pid."""
        return subprocess.Popen(self.argv(node, command, cwd), env=env, text=True, **kwargs)  # type: ignore[call-overload]

    def run(self, node: str, command: Sequence[str], env: Optional[Dict[str, str]] = None,
            timeout: float = 600, cwd: Optional[Path] = None) -> "subprocess.CompletedProcess[str]":
        """Runs ``command`` in ``node`` to completion, output captured."""
        return subprocess.run(self.argv(node, command, cwd), env=env, text=True, capture_output=True,
                              timeout=timeout)

    @staticmethod
    def node_process(nsenter_pid: int, timeout: float = 10) -> int:
        """The host pid of the command ``nsenter`` (pid ``nsenter_pid``)
        forked into the node."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            kids = _children(nsenter_pid)
            if kids:
                return kids[0]
            time.sleep(0.01)
        raise RuntimeError(f"nsenter {nsenter_pid} started no command within {timeout} s")

    def boot_id(self, node: str) -> str:
        """The boot id ``node``'s processes read."""
        return (self.root / f"boot_id.{node}").read_text().strip()

    # --- internals -------------------------------------------------------

    def _save(self) -> None:
        (self.root / STATE).write_text(json.dumps(self.state))

    @staticmethod
    def _kill(pid: int) -> None:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            return
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                # Our own child: reap it; otherwise wait for it to vanish.
                if os.waitpid(pid, os.WNOHANG)[0] == pid:
                    return
            except ChildProcessError:
                if not os.path.exists(f"/proc/{pid}"):
                    return
            time.sleep(0.02)

    def _start_sshd(self) -> None:
        keys = self.root / "keys"
        keys.mkdir(exist_ok=True)
        for name in ("host", "client"):
            if not (keys / name).exists():
                subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", f"two-node-bed {name}",
                                "-f", str(keys / name)], check=True)
        authorized = keys / "authorized_keys"
        shutil.copy(keys / "client.pub", authorized)
        authorized.chmod(0o600)
        port = _free_port()
        config = self.root / "sshd_config"
        config.write_text("\n".join([
            f"Port {port}", "ListenAddress 127.0.0.1", f"HostKey {keys / 'host'}",
            f"AuthorizedKeysFile {authorized}", "PubkeyAuthentication yes", "PasswordAuthentication no",
            "KbdInteractiveAuthentication no", "PermitRootLogin prohibit-password", "StrictModes no",
            "UsePAM no", f"PidFile {self.root / 'sshd.pid'}", "Subsystem sftp internal-sftp", "",
        ]))
        # sshd's privilege-separation directory (Debian's unit makes it).
        os.makedirs("/run/sshd", mode=0o755, exist_ok=True)
        # -D: stays in the foreground as our child, so we hold its pid.
        proc = subprocess.Popen([SSHD, "-D", "-f", str(config), "-E", str(self.root / "sshd.log")],
                                stdin=subprocess.DEVNULL, start_new_session=True)
        self.state.update(sshd=proc.pid, port=port)
        self._save()
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                raise RuntimeError(f"sshd exited {proc.returncode}: {(self.root / 'sshd.log').read_text()}")
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
                return
            except OSError:
                time.sleep(0.05)
        raise RuntimeError(f"sshd did not listen on 127.0.0.1:{port} within 15 s")

    def _start_node(self, node: str) -> None:
        boot_id = self.root / f"boot_id.{node}"
        boot_id.write_text(str(uuid.uuid4()) + "\n")
        script = (f"hostname node{node} && mount --bind {boot_id} /proc/sys/kernel/random/boot_id "
                  "&& exec sleep infinity")
        holder = subprocess.Popen(
            ["unshare", "--uts", "--pid", "--fork", "--mount", "--mount-proc", "--propagation", "private",
             "sh", "-c", script],
            stdin=subprocess.DEVNULL, start_new_session=True, stderr=subprocess.PIPE, text=True,
        )
        self.state[f"unshare_{node}"] = holder.pid
        self._save()
        # The node's init is unshare's child (`sleep`, pid 1 in the node) once
        # the set-up has run: wait until it reads the node's boot id.
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            if holder.poll() is not None:
                raise RuntimeError(f"node {node}: unshare exited {holder.returncode}: {holder.stderr.read()}")
            for kid in _children(holder.pid):
                try:
                    comm = Path(f"/proc/{kid}/comm").read_text().strip()
                except OSError:
                    continue
                if comm == "sleep":
                    self.state[f"init_{node}"] = kid
                    self._save()
                    seen = self.run(node, ["cat", "/proc/sys/kernel/random/boot_id"], timeout=10).stdout.strip()
                    if seen != boot_id.read_text().strip():
                        raise RuntimeError(f"node {node} reads boot id {seen!r}, not its own")
                    return
            time.sleep(0.02)
        raise RuntimeError(f"node {node}: its init did not start within 15 s")

    def _mount(self, node: str) -> None:
        keys = self.root / "keys"
        options = ",".join([
            f"IdentityFile={keys / 'client'}", "StrictHostKeyChecking=no", "UserKnownHostsFile=/dev/null",
            "BatchMode=yes", "LogLevel=ERROR",
        ])
        # sshfs's default caches stay on (attributes, directory entries).
        out = self.run(node, ["sshfs", "-p", str(self.state["port"]), "-o", options,
                              f"127.0.0.1:{self.export}", str(self.shared)], timeout=30, cwd=Path("/"))
        if out.returncode != 0:
            raise RuntimeError(f"node {node}: sshfs exited {out.returncode}: {out.stderr.strip()}")
        check = self.run(node, ["stat", "-f", "-c", "%T", str(self.shared)], timeout=10, cwd=Path("/"))
        if "fuse" not in check.stdout:
            raise RuntimeError(f"node {node}: {self.shared} is {check.stdout.strip()!r}, not the sshfs mount")


def main(argv: List[str]) -> int:
    """``up DIR`` | ``run DIR NODE CMD...`` | ``down DIR`` (scripts/two-node-bed.sh)."""
    usage = "usage: two_node_bed.py up DIR | run DIR NODE CMD... | down DIR"
    if len(argv) < 2 or argv[0] not in ("up", "run", "down"):
        print(usage, file=sys.stderr)
        return 2
    verb, bed = argv[0], TwoNodeBed(Path(argv[1]))
    if verb == "up":
        try:
            bed.up()
        except BedUnavailable as e:
            print(f"two-node-bed: {e}", file=sys.stderr)
            return 3
        print(f"two-node-bed: up in {bed.root}: export {bed.export}, mounted at {bed.shared} on nodes A and B "
              f"(hostnames nodeA/nodeB, own pid namespaces and boot ids); sshd on 127.0.0.1:{bed.state['port']}")
        return 0
    if verb == "down":
        bed.down()
        print(f"two-node-bed: down ({bed.root})")
        return 0
    if len(argv) < 4 or argv[2] not in NODES:
        print(usage + " (NODE is A or B)", file=sys.stderr)
        return 2
    # `run` keeps the terminal: the command's output and exit status are its own.
    return subprocess.call(bed.argv(argv[2], argv[3:], cwd=Path.cwd() if Path.cwd() != Path("/") else None))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
