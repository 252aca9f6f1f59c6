"""The worker contract suite (mosaic_core.testing.contract_suite) for the XuanCe worker: MAPPO on
simple_spread trains, is SIGTERMed near its middle through the host and continued by `mosaic resume`
with one history, and `mosaic evaluate` writes the eval.json of a CleanRL evaluation (per agent too)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import numpy as np
import pytest
from conftest import SMALL, SPREAD

from mosaic_core.testing.contract_suite import WorkerContractSuite
from tests.conftest import worker_bin
from tests.eval_schema import assert_same_schema, cleanrl_evaluation

pytestmark = pytest.mark.slow  # a minute of training: the main lane runs them, the gymnasium 1.x lane skips them

AGENTS = {"agent_0", "agent_1", "agent_2"}


class TestXuanCeContract(WorkerContractSuite):
    worker = "xuance"
    algo = "mappo"
    env_id = SPREAD
    total_timesteps = 8000  # 20 updates of 400-step rollouts over 4 envs
    stop_step = (
        total_timesteps // 2
    )  # a reported step past the first updates (its first report is too early to resume from)
    extras = SMALL
    evaluate = True
    resume_state = True  # XuanCe's vector envs' random state is not restored: the closest property
    timeout = 600.0

    @pytest.fixture(scope="class")
    @classmethod
    def worker_env(cls, xuance_env) -> dict[str, str]:
        return {"MOSAIC_VENVS": xuance_env["MOSAIC_VENVS"]} if "MOSAIC_VENVS" in xuance_env else {}

    def checkpoint_weights(self, checkpoint: Path) -> dict[str, np.ndarray]:
        """The policy's weights in the checkpoint, read as tensors only (``weights_only``)."""
        import torch

        state = torch.load(checkpoint / "state.pt", map_location="cpu", weights_only=True)
        return {name: value.numpy() for name, value in state["policy"].items()}

    def update_steps(self, run_dir: Path) -> list[int]:
        """XuanCe's updates: its learning_rate scalar, written once per update (its metric events
        come by time); across a resume's attempts, each step once."""
        from mosaic_analytics.curves import read_scalars

        steps = read_scalars(run_dir, "learning_rate").steps
        assert len(set(steps)) == len(steps), f"an update step written twice: {steps}"
        return sorted(steps)

    def restored_state(self, checkpoint: Path) -> tuple[int, dict[str, np.ndarray]]:
        """The worker's resume path in the XuanCe environment (tests/xuance/restored_state.py):
        the agent's step counter and its policy's weights once the checkpoint is loaded."""
        python = worker_bin(self.env if "MOSAIC_VENVS" in self.env else self._env(), "xuance") / "python"
        out, cwd = self.folder / "restored.npz", self.folder / "scratch"
        cwd.mkdir()
        program = Path(__file__).with_name("restored_state.py")
        args = [self.algo, self.env_id, str(self.seed), str(self.total_timesteps), json.dumps(self.extras)]
        done = subprocess.run(
            [str(python), str(program), str(checkpoint), str(out), *args],
            cwd=cwd,
            capture_output=True,
            text=True,
            timeout=self.timeout,
        )
        assert done.returncode == 0, done.stderr[-3000:]
        found = dict(np.load(out))
        return int(found.pop("step")), {name.split("/", 1)[1]: value for name, value in found.items()}

    def test_evaluate_writes_the_one_schema(self, completed) -> None:
        """The suite's evaluation, per agent too, held to a CleanRL evaluation's schema."""
        super().test_evaluate_writes_the_one_schema(completed)
        (found,) = (self.run_dir(completed.name) / "evaluations").glob("*/eval.json")
        result = json.loads(found.read_text())
        assert result["global_step"] > 0 and all(set(e["agents"]) == AGENTS for e in result["episodes"])
        assert_same_schema(result, cleanrl_evaluation(self.folder, episodes=2), self.seed)

    def test_evaluate_records_the_first_episode_as_an_mp4(self, completed) -> None:
        """`mosaic evaluate --video` of a XuanCe run: the first episode's frames (MPE rendered
        rgb_array), written as an MP4 with the OpenCV XuanCe brings; a GIF is refused in one line."""
        import cv2

        filmed = self.copy_of(completed)
        video = self.folder / "spread.mp4"
        done = self.cli(
            "evaluate", filmed, "--episodes", "2", "--video", str(video), "--runs-dir", str(self.runs_root), "--json"
        )
        assert done.returncode == 0, done.stderr[-3000:]
        result = json.loads(done.stdout)
        capture = cv2.VideoCapture(str(video))
        frames, width = int(capture.get(cv2.CAP_PROP_FRAME_COUNT)), int(capture.get(cv2.CAP_PROP_FRAME_WIDTH))
        ok, image = capture.read()
        capture.release()
        assert ok and width > 0 and frames == result["episodes"][0]["length"], (frames, result["episodes"][0])
        assert len({int(v) for v in image.reshape(-1)[::97]}) > 1  # a rendered scene, not a blank frame
        gif = self.cli("enjoy", filmed, "--video", str(self.folder / "spread.gif"), "--runs-dir", str(self.runs_root))
        self.one_line(gif, "worker 'xuance' cannot play with a .gif video")
