"""The worker contract suite (mosaic_core.testing.contract_suite) for the RLlib worker: PPO on
CartPole trains, is SIGTERMed near its middle through the host and continued by `mosaic resume` with
one history, and `mosaic evaluate` writes the eval.json of a CleanRL evaluation; all with the CleanRL plugin
disabled (`mosaic algos --worker rllib` too)."""

from __future__ import annotations

import json
import pickle
import subprocess
from pathlib import Path

import numpy as np
import pytest

from mosaic_core.testing.contract_suite import WorkerContractSuite
from tests.conftest import worker_bin
from tests.eval_schema import assert_same_schema, cleanrl_evaluation
from tests.rllib.conftest import SMALL

pytestmark = pytest.mark.slow  # a local Ray cluster per run: the main lane runs them, the gymnasium 1.x lane skips them


class TestRLlibContract(WorkerContractSuite):
    worker = "rllib"
    algo = "PPO"
    env_id = "CartPole-v1"
    total_timesteps = 4000  # 8 iterations of 500 steps
    # The stop: once the second iteration's end is reported (past the first updates; its first report,
    # the first episode's, is too early to resume from), with six iterations left for it to land in
    stop_step = 1000
    extras = {"algo_params": SMALL, "metrics_interval_s": 0.05}  # each iteration's step reported as it ends
    evaluate = True
    resume_state = True  # RLlib's env runners' random state is not restored: the closest property
    timeout = 600.0
    env = {"MOSAIC_DISABLE_PLUGINS": "cleanrl"}  # every test without the CleanRL plugin

    @pytest.fixture(scope="class")
    @classmethod
    def worker_env(cls, rllib_env) -> dict[str, str]:
        return {"MOSAIC_VENVS": rllib_env["MOSAIC_VENVS"]} if "MOSAIC_VENVS" in rllib_env else {}

    def update_steps(self, run_dir: Path) -> list[int]:
        """RLlib's iterations: the worker writes charts/learning_rate once at the end of each."""
        from mosaic_analytics.curves import read_scalars

        steps = read_scalars(run_dir, "charts/learning_rate").steps
        assert len(set(steps)) == len(steps), f"an iteration's step written twice: {steps}"
        return sorted(steps)

    def checkpoint_weights(self, checkpoint: Path) -> dict[str, np.ndarray]:
        """The learner's PPO module weights in the checkpoint's pickle, read with an unpickler that
        builds only dicts and numpy arrays (nothing else in the file can run)."""
        path = checkpoint / "learner_group" / "learner" / "rl_module" / "default_policy" / "module_state.pkl"
        with path.open("rb") as handle:
            return dict(ArraysOnly(handle).load())

    def restored_state(self, checkpoint: Path) -> tuple[int, dict[str, np.ndarray]]:
        """The worker's resume path in the RLlib environment (tests/rllib/restored_state.py): the
        step it continues from, which RLlib's lifetime counter matches, and the learner's weights;
        each env runner samples with the same weights from the first iteration on."""
        python = worker_bin(self.env if "MOSAIC_VENVS" in self.env else self._env(), "rllib") / "python"
        out, cwd = self.folder / "restored.npz", self.folder / "r"
        cwd.mkdir()
        done = subprocess.run(
            [str(python), str(Path(__file__).with_name("restored_state.py")), str(checkpoint), str(out)],
            cwd=cwd,
            capture_output=True,
            text=True,
            timeout=self.timeout,
        )
        assert done.returncode == 0, done.stderr[-3000:]
        found = dict(np.load(out))
        step = int(found.pop("step"))
        assert int(found.pop("lifetime_steps")) == step
        learner = {name.split("/", 1)[1]: value for name, value in found.items() if name.startswith("learner/")}
        runners = {name: value for name, value in found.items() if name.startswith("runner-")}
        stale = {n: float(np.abs(v - learner[n.split("/", 1)[1]]).max()) for n, v in runners.items()}
        assert runners and not any(stale.values()), f"env runners' weights differ from the learner's: {stale}"
        return step, learner

    def test_evaluate_writes_the_one_schema(self, completed) -> None:
        """The suite's evaluation, held to a CleanRL evaluation's schema (the suite runs without the
        CleanRL plugin: `mosaic algos --worker rllib` and `mosaic evaluate` need none of it)."""
        super().test_evaluate_writes_the_one_schema(completed)
        (found,) = (self.run_dir(completed.name) / "evaluations").glob("*/eval.json")
        result = json.loads(found.read_text())
        assert result["global_step"] > 0 and all(e["return"] == e["length"] > 0 for e in result["episodes"])  # CartPole
        assert_same_schema(result, cleanrl_evaluation(self.folder, episodes=2), self.seed)
        listed = self.cli("algos", "--worker", "rllib", "--json")
        assert listed.returncode == 0, listed.stderr[-3000:]
        assert {"PPO", "DQN"} <= {e["algo"] for e in json.loads(listed.stdout)["algorithms"]}

    def test_evaluate_with_a_video_records_an_mp4_or_says_the_environment_has_no_encoder(self, completed) -> None:
        """`mosaic evaluate --video` of an RLlib run: with an MP4 encoder in the RLlib environment
        (opencv from `--extras atari`, imageio-ffmpeg, moviepy) the first episode's frames
        (CartPole rendered rgb_array) are the video; without one (the base environment) it is one
        line, exit 2, before anything runs or is written."""

        from mosaic_core import contract

        filmed = self.copy_of(completed)
        python = worker_bin(self.env if "MOSAIC_VENVS" in self.env else self._env(), "rllib") / "python"
        video = self.folder / "cart.mp4"
        evaluations = self.run_dir(filmed) / "evaluations"
        before = sorted(evaluations.iterdir()) if evaluations.is_dir() else []
        done = self.cli(
            "evaluate", filmed, "--episodes", "2", "--video", str(video), "--runs-dir", str(self.runs_root), "--json"
        )
        if contract.video_encoder(str(python)) is None:
            self.one_line(done, "the rllib worker's environment has no MP4 encoder")
            assert not video.exists()
            assert (sorted(evaluations.iterdir()) if evaluations.is_dir() else []) == before
            return
        import cv2

        assert done.returncode == 0, done.stderr[-3000:]
        result = json.loads(done.stdout)
        capture = cv2.VideoCapture(str(video))
        frames = int(capture.get(cv2.CAP_PROP_FRAME_COUNT))
        capture.release()
        assert frames == result["episodes"][0]["length"] + 1, (frames, result["episodes"][0])  # the reset's frame too


class ArraysOnly(pickle.Unpickler):
    """Reads a pickle of (ordered) dicts of numpy arrays; refuses any other global."""

    ALLOWED = {
        ("collections", "OrderedDict"): dict,
        ("numpy", "ndarray"): np.ndarray,
        ("numpy", "dtype"): np.dtype,
        ("numpy.core.multiarray", "_reconstruct"): np.core.multiarray._reconstruct,
        ("numpy._core.multiarray", "_reconstruct"): np.core.multiarray._reconstruct,
        ("numpy.core.multiarray", "scalar"): np.core.multiarray.scalar,
        ("numpy._core.multiarray", "scalar"): np.core.multiarray.scalar,
        ("numpy.core.numeric", "_frombuffer"): np.core.numeric._frombuffer,
        ("numpy._core.numeric", "_frombuffer"): np.core.numeric._frombuffer,
    }

    def find_class(self, module: str, name: str):
        if (module, name) not in self.ALLOWED:
            raise pickle.UnpicklingError(f"{module}.{name} is not data")
        return self.ALLOWED[(module, name)]
