"""A real two-node Ray cluster on loopback for the tests and ``bench/cluster.py``.

Each node is ``ray start --block`` in its own temp dir (and ``TMPDIR``), custom resource ``nodeA`` / ``nodeB``,
every port picked free (beside other Ray clusters on the machine), token auth with a fresh
token in the environment only. Stopping ends exactly the processes the nodes started (their
process trees, by pid), never ``ray stop`` (which stops every Ray process of the machine).
"""

from __future__ import annotations

import json
import os
import secrets
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

BIN = Path(sys.executable).parent


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _children() -> dict[int, list[int]]:
    kids: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", encoding="utf-8") as handle:
                ppid = int(handle.read().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        kids.setdefault(ppid, []).append(int(entry))
    return kids


def process_tree(roots: list[int]) -> list[int]:
    kids, todo, found = _children(), list(roots), []
    while todo:
        pid = todo.pop()
        if pid not in found:
            found.append(pid)
            todo += kids.get(pid, [])
    return found


def alive(pids: list[int]) -> list[int]:
    out = []
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat", encoding="utf-8") as handle:
                if handle.read().rsplit(")", 1)[1].split()[0] != "Z":
                    out.append(pid)
        except OSError:
            pass
    return out


class LoopbackCluster:
    def __init__(self, cpus_per_node: int = 2, bin_dir: Path = BIN):
        """``bin_dir``: the environment whose ``ray`` runs the nodes (a worker's, for its runs)."""
        self.base = Path(tempfile.mkdtemp(prefix="mray-"))  # short: Ray's socket paths must fit 107 bytes
        self.token = secrets.token_hex(32)
        self.env = {
            **os.environ,
            "RAY_AUTH_MODE": "token",
            "RAY_AUTH_TOKEN": self.token,
            "RAY_USAGE_STATS_ENABLED": "0",
        }
        self.env.pop("RAY_ADDRESS", None)
        self.port = free_port()
        self.address = f"127.0.0.1:{self.port}"
        self.cpus = cpus_per_node
        self.nodes: dict[str, subprocess.Popen] = {}
        self.node_ids: dict[str, str] = {}
        self.seen: list[int] = []
        self.bin = bin_dir

    def client_env(self) -> dict[str, str]:
        """What a caller needs: the token mode and token (only in its environment)."""
        return {"RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": self.token}

    def _ports(self, head: bool) -> list[str]:
        ports = [
            "--node-manager-port",
            str(free_port()),
            "--object-manager-port",
            str(free_port()),
            "--dashboard-agent-listen-port",
            str(free_port()),
            "--dashboard-agent-grpc-port",
            str(free_port()),
            "--runtime-env-agent-port",
            str(free_port()),
            "--metrics-export-port",
            str(free_port()),
        ]
        if head:
            ports += ["--ray-client-server-port", str(free_port()), "--dashboard-port", str(free_port())]
        return ports

    def start_node(self, name: str, extra: dict[str, float] | None = None) -> None:
        head = not self.nodes
        where = (
            ["--head", "--port", str(self.port), "--include-dashboard=false"] if head else ["--address", self.address]
        )
        log = open(self.base / f"{name}.log", "ab")
        command = [
            str(self.bin / "ray"),
            "start",
            "--block",
            *where,
            "--node-ip-address",
            "127.0.0.1",
            "--num-cpus",
            str(self.cpus),
            "--resources",
            json.dumps({name: 1, **(extra or {})}),
            "--temp-dir",
            str(self.base / name),
            "--disable-usage-stats",
            *self._ports(head),
        ]
        # The node's own /tmp (its actors' work dirs): removed with the cluster, even for a node
        # killed as a machine going away, whose files would otherwise stay on this machine.
        tmp = self.base / f"{name}-tmp"
        tmp.mkdir(mode=0o700, exist_ok=True)
        self.nodes[name] = subprocess.Popen(
            command,
            env={**self.env, "TMPDIR": str(tmp)},
            stdout=log,
            stderr=log,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
        log.close()

    def start(self, timeout: float = 180.0) -> LoopbackCluster:
        self.start_node("nodeA")
        self.wait_nodes(1, timeout)
        self.start_node("nodeB")
        self.wait_nodes(2, timeout)
        return self

    def wait_nodes(self, count: int, timeout: float = 180.0, exact: bool = False) -> None:
        """Until ``count`` nodes (at least, or ``exact``ly) are alive; ``node_ids`` names them."""
        deadline = time.monotonic() + timeout
        script = (
            "import json, ray; ray.init(address=%r, logging_level='ERROR', log_to_driver=False); "
            "print(json.dumps({k: n['NodeID'] for n in ray.nodes() if n['Alive'] "
            "for k in n['Resources'] if k.startswith('node') and not k.startswith('node:')}))"
        ) % self.address
        last = ""
        while time.monotonic() < deadline:
            for name, proc in self.nodes.items():
                if proc.poll() is not None:
                    raise RuntimeError(
                        f"ray start for {name} exited: {(self.base / f'{name}.log').read_text()[-2000:]}"
                    )
            done = subprocess.run(
                [sys.executable, "-c", script], env=self.env, capture_output=True, text=True, timeout=120
            )
            last = done.stderr[-1500:]
            if done.returncode == 0:
                ids = json.loads(done.stdout.strip().splitlines()[-1])
                if len(ids) == count or (len(ids) > count and not exact):
                    self.node_ids = ids
                    return
            time.sleep(1.0)
        raise RuntimeError(f"the loopback Ray cluster did not come up with {count} node(s): {last}")

    def stop_node(self, name: str) -> None:
        """Stop one node as if its machine went away: its whole process tree, SIGKILL."""
        proc = self.nodes.pop(name)
        tree = process_tree([proc.pid])
        self.seen += tree
        for pid in tree:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        proc.wait(timeout=30)

    def remove_node(self, name: str) -> None:
        """Stop one node cleanly (``ray start --block`` stops what it started on SIGTERM)."""
        proc = self.nodes.pop(name)
        self.seen += process_tree([proc.pid])
        proc.terminate()
        proc.wait(timeout=60)

    def stop(self) -> list[int]:
        """Stop every node; returns the pids of ours still alive afterwards (should be none)."""
        tree = process_tree([p.pid for p in self.nodes.values()])
        self.seen += tree
        for proc in self.nodes.values():
            try:
                os.kill(proc.pid, signal.SIGTERM)  # `ray start --block` stops what it started
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + 20
        while alive(tree) and time.monotonic() < deadline:
            time.sleep(0.5)
        for pid in alive(tree):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        for proc in self.nodes.values():
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                pass
        self.nodes.clear()
        time.sleep(0.5)
        left = alive(self.seen)
        import shutil

        shutil.rmtree(self.base, ignore_errors=True)
        return left
