"""One real two-node Ray cluster on loopback for this folder's tests (starting one costs 20-60 s
here), stopped when they end (its idle daemons would take CPU from the rest of the session). Tests
share it as it is: a test that adds nodes takes them away again before it ends."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

pytest.importorskip("ray", reason="the [ray] extra (ray==2.60.0) is not installed")

from tests.conftest import HOST_VARS
from tests.ray_launcher.loopback import LoopbackCluster


@pytest.fixture(scope="package")
def cluster():
    ray_cluster = LoopbackCluster(cpus_per_node=2)
    try:
        ray_cluster.start()
        yield ray_cluster
    finally:
        left = ray_cluster.stop()
        assert not left, f"Ray processes left after the cluster stopped: {left}"


def caller_env(cluster: LoopbackCluster, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in HOST_VARS and not k.startswith(("RAY_", "MOSAIC_RAY_"))}
    return {**env, **cluster.client_env(), "PYTHONUNBUFFERED": "1", **extra}


def processes_of(run_id: str) -> list[int]:
    """Processes anywhere on the machine whose command line or cwd names the run."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            cmdline = Path(f"/proc/{entry}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            cwd = os.readlink(f"/proc/{entry}/cwd")
        except OSError:
            continue
        if run_id in cmdline or run_id in cwd:
            found.append(int(entry))
    return found
