"""The CUDA path, on a machine with an NVIDIA GPU (skipped elsewhere, saying so).

* the daemon counts the GPUs torch sees (``detect_gpus`` reads no torch);
* bundled PPO asked for CUDA trains on the GPU (its checkpoint's tensors were saved from it);
* that run is portable: a CPU-only process (no visible GPU) evaluates it and resumes it to a
  larger budget, one history.
"""

from __future__ import annotations

import json
import os

import pytest

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device here (the GPU lane only)")

CPU_ONLY = {"CUDA_VISIBLE_DEVICES": ""}


def test_the_daemon_counts_the_gpus_torch_sees():
    from mosaic_core.trainer.submission import detect_gpus

    assert detect_gpus() == torch.cuda.device_count()


def test_a_cuda_run_trains_on_the_gpu_and_continues_on_a_cpu(mosaic, runs_root):
    extras = json.dumps({"cuda": True, "num_envs": 2, "num_steps": 256})
    done = mosaic(
        "run", "--worker", "cleanrl", "--algo", "ppo", "--env-id", "CartPole-v1", "--total-timesteps", "4096",
        "--seed", "1", "--run-id", "gpu", "--quiet", "--extras", extras,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    run = runs_root / "gpu"
    (checkpoint,) = [e["payload"]["path"] for e in done.events if e["event"] == "checkpoint_saved"][-1:]
    saved = torch.load(run / checkpoint, map_location=None, weights_only=True)  # where each tensor was saved from
    devices = {t.device.type for t in saved["models"]["agent"].values()}
    assert devices == {"cuda"}, devices

    evaluated = mosaic("evaluate", "gpu", "--episodes", "3", "--json", "--runs-dir", str(runs_root), env=CPU_ONLY)
    assert evaluated.returncode == 0, evaluated.stderr[-3000:]
    assert len(json.loads(evaluated.stdout)["episodes"]) == 3

    resumed = mosaic(
        "resume", "gpu", "--total-timesteps", "6144", "--runs-dir", str(runs_root), "--quiet", env=CPU_ONLY
    )
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    events = [json.loads(line) for line in (run / "events.jsonl").read_text().splitlines()]
    assert [e["seq"] for e in events] == list(range(events[0]["seq"], events[0]["seq"] + len(events)))
    assert events[-1]["event"] == "run_completed"
    assert max(e["payload"].get("global_step", 0) for e in events if e["event"] == "metrics") > 4096
    assert os.environ.get("CUDA_VISIBLE_DEVICES") != ""  # this process still sees the GPU
