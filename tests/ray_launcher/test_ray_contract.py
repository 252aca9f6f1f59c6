"""The Ray launcher meets the launcher contract (mosaic_core.testing.launcher_suite) on the real
two-node loopback cluster (tests/ray_launcher/conftest.py): a run, a stop and its resume, bad
options, a sweep whose trials use both nodes. What is Ray's own: test_ray_run.py."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from mosaic_core.testing.launcher_suite import LauncherContractSuite
from tests.ray_launcher.conftest import caller_env


class TestRayLauncherContract(LauncherContractSuite):
    launcher = "ray"
    bad_options = [
        (("--ray-resources", "[1]"), "--ray-resources must be a JSON object"),
        (("--ray-num-cpus", "many"), "--ray-num-cpus must be a number"),
        (("--ray-address", "127.0.0.1:1"), "Ray cluster at 127.0.0.1:1 does not answer"),
    ]
    refused_at_place = [
        (("--ray-resources", '{"nodeC": 1}'), "no node of the Ray cluster"),
        (("--num-gpus", "1"), "GPU=1"),
    ]
    sweep_trials = 4
    sweep_flags = ("--parallel", "2", "--ray-num-cpus", "2")  # a whole node a run: two at a time use both

    @pytest.fixture
    def launcher_flags(self, cluster) -> list[str]:
        self.cluster = cluster
        return ["--launcher", "ray", "--ray-address", cluster.address]

    def environment(self) -> dict[str, str]:
        return {**caller_env(self.cluster), **self.env}

    def check_sweep(self, done: subprocess.CompletedProcess[str], run_dirs: list[Path]) -> None:
        nodes = {json.loads((run_dir / "manifest.json").read_text())["ray"]["node_id"] for run_dir in run_dirs}
        assert nodes == {self.cluster.node_ids["nodeA"], self.cluster.node_ids["nodeB"]}
