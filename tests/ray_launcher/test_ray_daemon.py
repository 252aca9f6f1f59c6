"""`mosaic daemon --ray-address`: a submission queues as today and runs on the cluster; `mosaic
runs --target` shows the node. The job is the example worker."""

from __future__ import annotations

import json
import subprocess
import tempfile
import time

from tests.conftest import BIN
from tests.ray_launcher.conftest import caller_env, processes_of


def test_the_daemon_dispatches_a_submission_to_the_cluster(cluster, tmp_path):
    state = tmp_path / "daemon"
    env = caller_env(cluster)
    err = tempfile.TemporaryFile("w+")
    daemon = subprocess.Popen(
        [
            str(BIN / "mosaic"),
            "daemon",
            "--listen",
            "127.0.0.1:0",
            "--state-dir",
            str(state),
            "--ray-address",
            cluster.address,
            "--ray-resources",
            '{"nodeB": 1}',
        ],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=err,
        text=True,
    )
    try:
        ready = json.loads(daemon.stdout.readline())
        target = ready["listen_address"]
        config = tmp_path / "job.json"
        config.write_text(json.dumps({"worker": "example", "env_id": "CartPole-v1", "total_timesteps": 3000}))
        submit = subprocess.run(
            [str(BIN / "mosaic"), "submit", str(config), "--target", target, "--state-dir", str(state)],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert submit.returncode == 0, submit.stderr
        deadline, rows = time.monotonic() + 300, []
        while time.monotonic() < deadline:
            listed = subprocess.run(
                [str(BIN / "mosaic"), "runs", "--target", target, "--state-dir", str(state), "--json"],
                cwd=tmp_path,
                env=env,
                capture_output=True,
                text=True,
                timeout=60,
            )
            rows = json.loads(listed.stdout or "[]")
            if rows and rows[0]["terminal_event"]:
                break
            time.sleep(2)
        assert rows and rows[0]["terminal_event"] == "run_completed", (rows, open_log(err))
        assert rows[0]["node"] and cluster.node_ids["nodeB"][:12] in rows[0]["node"]
        table = subprocess.run(
            [str(BIN / "mosaic"), "runs", "--target", target, "--state-dir", str(state)],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
        ).stdout
        assert "NODE" in table.splitlines()[0] and cluster.node_ids["nodeB"][:12] in table
        assert not processes_of(rows[0]["run_id"])
    finally:
        daemon.terminate()
        daemon.wait(timeout=60)
        daemon.stdout.close()
        err.close()


def open_log(err) -> str:
    err.seek(0)
    return err.read()[-3000:]
