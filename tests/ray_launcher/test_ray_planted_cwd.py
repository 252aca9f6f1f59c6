"""Issue 35, class 5: ``mosaic run --ray-address`` typed in a folder another local user (uid 65534)
planted ``mosaic_ray/``, ``mosaic_core/``, ``numpy.py``… in (:mod:`tests.security.planted`). Ray's
driver would put that folder first on the sys.path of every worker of the job, so the run's actor
imported their ``mosaic_ray`` as the cluster's user; our driver's job config gives the workers no
folder of ours (``mosaic_ray.cluster.driver_job_config``). The run completes, nothing planted is
imported, on the node or here."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from tests.conftest import BIN
from tests.ray_launcher.conftest import caller_env
from tests.security.planted import PlantedFolder
from tests.trainer.second_user import needs_second_user


@pytest.fixture
def planted():
    folder = PlantedFolder()
    yield folder
    folder.remove()


@needs_second_user
def test_a_ray_run_from_a_planted_folder_imports_nothing_of_it_on_the_node(cluster, planted, tmp_path):
    done = subprocess.run(
        [
            str(BIN / "mosaic"),
            "run",
            "--worker",
            "example",
            "--env-id",
            "CartPole-v1",
            "--total-timesteps",
            "2000",
            "--json",
            "--runs-dir",
            str(tmp_path / "runs"),
            "--ray-address",
            cluster.address,
            "--ray-resources",
            '{"nodeB": 1}',
        ],
        cwd=planted.path,
        env=caller_env(cluster),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    events = [json.loads(line) for line in done.stdout.splitlines() if line.strip()]
    assert events[0]["payload"]["ray"]["node_id"] == cluster.node_ids["nodeB"]
    assert events[-1]["event"] == "run_completed"
    assert planted.markers() == {}


def test_the_driver_gives_the_cluster_no_folder_of_ours():
    """What Ray's driver adds to the job (its cwd, its script's folder) never reaches it; through
    Ray Client the config is Ray's own (it travels pickled; the server adds no folder)."""
    from mosaic_ray.cluster import driver_job_config

    config = driver_job_config("127.0.0.1:6379")
    config._py_driver_sys_path.extend([os.getcwd(), str(Path(BIN))])
    assert config._py_driver_sys_path == [] and list(config._get_proto_job_config().py_driver_sys_path) == []
    assert driver_job_config("ray://127.0.0.1:10001") is None
