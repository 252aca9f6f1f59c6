"""Issue 35, item 8: the RLlib worker's own local Ray cluster listens on loopback only. Its node
address is 127.0.0.1 (``ray_worker.train.start_ray``), for which Ray binds its servers (GCS,
raylet, object manager, agents, workers' gRPC) to 127.0.0.1; for any other address Ray binds every
interface. Checked with ``ss`` on every process of the run's cluster while it trains. That cluster starts no
Ray worker but its env runner's (Ray starts an idle worker per core for a driver unless told not to)."""

from __future__ import annotations

import ipaddress
import re
import signal
import subprocess
import time
from pathlib import Path

from tests.rllib.conftest import events_of, ray_pids, run_args


def listeners(pids: set[int]) -> list[str]:
    """The TCP addresses (``HOST:PORT`` as ``ss`` prints them) where any of ``pids`` listens."""
    shown = subprocess.run(["ss", "-ltnpH"], capture_output=True, text=True, check=True).stdout
    wanted = {str(pid) for pid in pids}
    return [line.split()[3] for line in shown.splitlines() if wanted & set(re.findall(r"pid=(\d+)", line))]


def loopback(address: str) -> bool:
    host = address.rsplit(":", 1)[0].strip("[]")
    try:
        ip = ipaddress.ip_address(host)
    except ValueError:
        return False  # "*", "0.0.0.0" shown as a name
    return (getattr(ip, "ipv4_mapped", None) or ip).is_loopback


def ray_workers(pids: set[int]) -> list[str]:
    """The titles of the Ray worker processes among ``pids`` (``ray::IDLE``, ``ray::SomeActor``...),
    Ray's agents left out."""
    titles = []
    for pid in pids:
        try:
            title = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[0].decode(errors="replace")
        except OSError:
            continue
        if title.startswith("ray::") and not title.endswith("Agent"):
            titles.append(title)
    return titles


def test_the_local_cluster_listens_on_loopback_only_and_starts_no_idle_worker(rllib_env, tmp_path):
    run_dir = tmp_path / "lo"
    proc = subprocess.Popen(
        run_args("lo", tmp_path, total=10**6),
        env=rllib_env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline:
            if (run_dir / "events.jsonl").exists() and any(e["event"] == "metrics" for e in events_of(run_dir)):
                break
            assert proc.poll() is None, proc.communicate()[1]
            time.sleep(0.5)
        [pid] = {e["payload"]["pid"] for e in events_of(run_dir) if e["event"] == "heartbeat"}
        cluster = ray_pids(run_dir, pid)
        found, workers = listeners(cluster), ray_workers(cluster)
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.communicate(timeout=120)
    assert len(found) >= 3, found  # the GCS, the raylet, the object manager at least
    assert [address for address in found if not loopback(address)] == [], found
    [env_runner] = workers  # SMALL: one env runner; it has sampled
    assert "EnvRunner" in env_runner, workers
