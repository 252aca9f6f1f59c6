"""Every continuous bundled algorithm on a MuJoCo env through `mosaic run` (Hopper: v4 on gymnasium
0.29.1, v5 on 1.x), returns read back from TensorBoard, a FastLane frame rendered headless."""

from __future__ import annotations

import json

import numpy as np
import pytest

from .conftest import (
    MUJOCO_VERSION,
    clean_environ,
    completed,
    finish,
    mosaic_command,
    needs_mujoco,
    scalars,
    start,
    wait_for_frame,
)

pytestmark = needs_mujoco
ENV_ID = f"Hopper-{MUJOCO_VERSION}"
OFF_POLICY = {"learning_starts": 1000, "batch_size": 64, "buffer_size": 2000}
RUNS = {
    "ppo_continuous_action": (2048, {"num_steps": 1024, "update_epochs": 2}),
    "sac_continuous_action": (1200, {**OFF_POLICY, "fastlane": True}),
    "td3_continuous_action": (1200, OFF_POLICY),
    "ddpg_continuous_action": (1200, OFF_POLICY),
}


@pytest.fixture(scope="module")
def mujoco_runs(tmp_path_factory):
    """The four algorithms side by side; a frame of the SAC run read while it trains."""
    workdir = tmp_path_factory.mktemp("mujoco")
    procs = {
        algo: start(workdir, *mosaic_command(algo.replace("_", "-"), algo, ENV_ID, total, extras))
        for algo, (total, extras) in RUNS.items()
    }
    try:
        frame = wait_for_frame("sac-continuous-action", procs["sac_continuous_action"])
        for proc in procs.values():
            completed(proc)
        return workdir / "var/trainer/runs", frame
    finally:
        for proc in procs.values():
            if proc.poll() is None:
                proc.kill()
                finish(proc)


@pytest.mark.parametrize("algo", sorted(RUNS))
def test_each_continuous_algorithm_trains_on_mujoco(mujoco_runs, algo):
    runs_root, _ = mujoco_runs
    values = scalars(runs_root / algo.replace("_", "-"))
    returns = values["charts/episodic_return"]
    assert len(returns) >= 2 and all(np.isfinite(r) for _, r in returns)
    loss = "losses/value_loss" if algo.startswith("ppo") else "losses/qf1_loss"
    assert loss in values and all(np.isfinite(v) for _, v in values[loss]), sorted(values)


def test_a_mujoco_frame_is_rendered_headless_and_read_live(mujoco_runs):
    _, frame = mujoco_runs
    height, width, channels = frame.pixels.shape
    assert channels == 3 and min(height, width) > 64
    assert float(np.std(frame.pixels)) > 1  # a rendered scene, not a blank buffer


def test_headless_mujoco_runs_get_egl_unless_the_user_chose(tmp_path):
    import subprocess

    def summary(**env):
        headless = {k: v for k, v in clean_environ(**env).items() if k != "DISPLAY"}
        proc = subprocess.run(
            mosaic_command("gl", "sac_continuous_action", ENV_ID, 1000, {}, "--dry-run", "--emit-summary"),
            cwd=tmp_path,
            capture_output=True,
            text=True,
            env=headless,
            timeout=120,
        )
        assert proc.returncode == 0, proc.stderr
        return json.loads(proc.stdout)["env"]

    assert summary().get("MUJOCO_GL") == "egl"
    assert "MUJOCO_GL" not in summary(MUJOCO_GL="osmesa")
