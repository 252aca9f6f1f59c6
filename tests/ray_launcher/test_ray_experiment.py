"""`mosaic experiment run SPEC --ray-address`: each seed's `mosaic run` goes to the cluster (2 CPUs a
run, a whole node), its run directory here; a second
`experiment run` runs nothing; `mosaic compare` reads the runs. The job is the bundled ppo with a
tiny budget."""

from __future__ import annotations

import json
import subprocess

from tests.conftest import BIN
from tests.ray_launcher.conftest import caller_env, processes_of

SPEC = """
name = "on-ray"
seeds = [1, 2]
total_timesteps = 1024
parallel = 2

[[group]]
worker = "cleanrl"
algo = "ppo"
env = "CartPole-v1"
"""


def test_an_experiment_runs_its_seeds_on_the_cluster(cluster, tmp_path):
    (tmp_path / "spec.toml").write_text(SPEC, encoding="utf-8")
    runs = tmp_path / "runs"

    def mosaic(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            [str(BIN / "mosaic"), *args],
            cwd=tmp_path,
            env=caller_env(cluster),
            capture_output=True,
            text=True,
            timeout=600,
        )

    argv = ("experiment", "run", "spec.toml", "--runs-dir", str(runs), "--ray-address", cluster.address)
    done = mosaic(*argv, "--ray-num-cpus", "2")
    assert done.returncode == 0, done.stderr[-3000:]
    nodes = set()
    for run_dir in runs.iterdir():
        manifest = json.loads((run_dir / "manifest.json").read_text())
        assert manifest["status"] == "completed", manifest
        nodes.add(manifest["ray"]["node_id"])
        config = json.loads((run_dir / "config.json").read_text())
        assert config["extras"]["experiment"] == "on-ray" and config["extras"]["experiment_group"]
        assert not processes_of(run_dir.name)
    assert nodes and nodes <= set(cluster.node_ids.values())  # each seed ran on a node of the cluster

    again = mosaic(*argv)
    assert again.returncode == 0 and "2 of 2 runs completed already, 0 to run" in again.stderr, again.stderr
    compared = mosaic("compare", "on-ray", "--runs-dir", str(runs), "--reps", "200", "--json")
    assert compared.returncode == 0, compared.stderr
    assert json.loads(compared.stdout)["sections"]["CartPole-v1"]["groups"]["ppo CartPole-v1"]["runs"] == 2
