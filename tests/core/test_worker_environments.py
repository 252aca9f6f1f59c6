"""Worker environments: a worker whose dependencies conflict with the host's runs in its own venv,
built by ``mosaic workers install NAME``, through ``mosaic run`` and the daemon.

The example package's ``example-venv`` worker pins gymnasium 1.2.2 (the host's default lane has
0.29.1) and has no torch: its training process proves where it ran by printing gymnasium's version
and ``sys.prefix``. The environment is built once per test session, under the session's private
``$MOSAIC_VENVS`` (tests/conftest.py: CI's ``$MOSAIC_TEST_VENVS``, shared by its lanes, else a temp dir).
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from tests.conftest import BIN, REPO, run_cli

WORKER = "example-venv"


@pytest.fixture(scope="session")
def venvs() -> Path:
    root = Path(os.environ["MOSAIC_VENVS"])  # the session's (tests/conftest.py private_user_state)
    done = run_cli(["workers", "install", WORKER], cwd=REPO, env={"MOSAIC_VENVS": str(root)}, timeout=900)
    assert done.returncode == 0, done.stderr
    return root


def _environment(root: Path, cwd: Path) -> dict:
    listed = run_cli(["workers", "--json"], cwd=cwd, env={"MOSAIC_VENVS": str(root)})
    assert listed.returncode == 0, listed.stderr
    return next(w for w in json.loads(listed.stdout) if w["name"] == WORKER)["environment_status"]


def test_a_run_of_a_worker_with_its_own_environment_executes_there(venvs, workdir, runs_root):
    status = _environment(venvs, workdir)
    assert status["state"] == "ready" and Path(status["path"]).parent == venvs
    done = run_cli(
        ["run", "--worker", WORKER, "--env-id", "CartPole-v1", "--total-timesteps", "2000", "--run-id", "iso"],
        cwd=workdir,
        env={"MOSAIC_VENVS": str(venvs)},
    )
    assert done.returncode == 0, done.stderr
    names = [e["event"] for e in done.events]
    assert names[0] == "run_started" and names[-1] == "run_completed"
    assert any(e["event"] == "metrics" and e["payload"]["episodic_return"] for e in done.events)
    said = (runs_root / "iso" / "logs" / f"{WORKER}.stderr.log").read_text()
    assert f"gymnasium 1.2.2 in {status['path']}," in said  # the host's venv has gymnasium 0.29.1
    launch = json.loads((runs_root / "iso" / "launch.json").read_text())
    assert launch["command"][0] == status["python"]
    # installing again is a no-op: the same environment, nothing rebuilt
    again = run_cli(["workers", "install", WORKER], cwd=workdir, env={"MOSAIC_VENVS": str(venvs)})
    assert again.returncode == 0 and "building" not in again.stderr and "ready" in again.stderr


def test_the_daemon_runs_a_worker_in_its_own_environment(venvs, tmp_path, monkeypatch):
    from mosaic_core.trainer import client
    from mosaic_core.trainer import trainer_pb2 as pb
    from tests.trainer.conftest import DaemonProcess, wait_final

    monkeypatch.setenv("MOSAIC_VENVS", str(venvs))  # the daemon (and the runs it spawns) inherit it
    daemon = DaemonProcess(
        [str(BIN / "mosaic"), "daemon", "--listen", "127.0.0.1:0", "--state-dir", str(tmp_path / "state")], tmp_path
    )
    try:
        config = {"worker": WORKER, "env_id": "CartPole-v1", "total_timesteps": 1500}
        run_id = client.submit(daemon.target, json.dumps(config), token=daemon.token).run_id
        final = wait_final(daemon.target, run_id, timeout=120, token=daemon.token)
        assert (final.status, final.terminal_event) == (pb.RUN_STATUS_TERM, "run_completed"), final.failure_reason
        said = (Path(final.run_dir) / "logs" / f"{WORKER}.stderr.log").read_text()
        assert "gymnasium 1.2.2 in " + str(venvs) in said
    finally:
        daemon.stop()


def test_a_missing_environment_is_one_line_naming_the_install_command(workdir, runs_root, tmp_path):
    empty = tmp_path / "no-venvs"
    assert _environment(empty, workdir)["state"] == "missing"
    for extra in ([], ["--dry-run"]):
        done = run_cli(
            ["run", "--worker", WORKER, "--env-id", "CartPole-v1", "--total-timesteps", "100", *extra],
            cwd=workdir,
            env={"MOSAIC_VENVS": str(empty)},
        )
        assert done.returncode == 2 and "Traceback" not in done.stderr
        assert done.stderr.strip().splitlines() == [
            f"mosaic: error: worker {WORKER!r} runs in its own environment, which is not installed: "
            f"run `mosaic workers install {WORKER}`"
        ]
    assert not runs_root.exists()


def test_preflight_checks_the_pins_in_the_environment_itself(venvs):
    from mosaic_core.environments import check_pins

    status = _environment(venvs, REPO)
    assert check_pins(status["python"], ["gymnasium==1.2.2", "numpy==1.26.4"]) == []
    assert check_pins(status["python"], ["gymnasium==0.29.1", "torch==2.13.0", "pluggy>=1"]) == [
        "gymnasium is 1.2.2, pinned 0.29.1",
        "torch is missing, pinned 2.13.0",
    ]


def test_the_core_runs_the_example_worker_in_a_venv_without_torch(venvs, tmp_path):
    """The host's core needs no torch, wandb, tensorboard, matplotlib or tyro: the worker
    environment holds only the core's own dependencies, gymnasium and the example package, and
    ``mosaic run`` from there runs the example worker end to end."""
    bin_dir = Path(_environment(venvs, REPO)["python"]).parent
    missing = subprocess.run(
        [
            str(bin_dir / "python"),
            "-c",
            "import importlib.util as u; print([m for m in "
            "('torch', 'wandb', 'tensorboard', 'matplotlib', 'tyro') if u.find_spec(m)])",
        ],
        capture_output=True,
        text=True,
    )
    assert missing.stdout.strip() == "[]", missing.stderr
    env = {k: v for k, v in os.environ.items() if not k.startswith("MOSAIC_")}
    done = subprocess.run(
        [
            str(bin_dir / "mosaic"),
            "run",
            "--worker",
            "example",
            "--env-id",
            "CartPole-v1",
            "--total-timesteps",
            "2000",
            "--run-id",
            "light",
            "--json",
        ],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    events = [json.loads(line) for line in done.stdout.splitlines()]
    assert events[-1]["event"] == "run_completed"
    manifest = json.loads((tmp_path / "var/trainer/runs/light/manifest.json").read_text())
    assert manifest["status"] == "completed" and manifest["metrics"]


def test_a_failed_build_names_the_package_and_leaves_nothing(tmp_path, monkeypatch):
    from mosaic_core.capabilities import WorkerCapabilities, WorkerEnvironment, WorkerMetadata
    from mosaic_core.environments import install
    from mosaic_core.errors import UsageError

    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "setup.py").write_text("raise RuntimeError('this package cannot be built')\n")
    monkeypatch.setenv("MOSAIC_VENVS", str(tmp_path / "venvs"))
    meta = WorkerMetadata(
        name="brk",
        version="1",
        description="a worker whose environment cannot build",
        worker="brk:Worker",
        capabilities=WorkerCapabilities(
            worker_type="brk",
            supported_paradigms=("sequential",),
            env_families=("gymnasium",),
            action_spaces=("discrete",),
            observation_spaces=("vector",),
        ),
        environment=WorkerEnvironment(requirements=(f"broken-pkg @ file://{broken}",)),
    )
    with pytest.raises(UsageError) as caught:
        install(meta, "mosaic-rl", say=lambda line: None)
    message = str(caught.value)
    assert "\n" not in message and f"pip could not install {broken}" in message and "removed" in message
    assert sorted(p.name for p in (tmp_path / "venvs").iterdir()) == ["brk.install.log", "brk.lock"]


def test_an_environments_root_another_user_can_write_is_refused(tmp_path, monkeypatch):
    from mosaic_core.environments import _private_root
    from mosaic_core.errors import UsageError

    root = tmp_path / "shared-venvs"
    root.mkdir(mode=0o777)
    os.chmod(root, 0o777)
    monkeypatch.setenv("MOSAIC_VENVS", str(root))
    with pytest.raises(UsageError, match="writable by others; refusing to run code from it"):
        _private_root(create=False)
