"""What the RLlib worker's resume path restores, read back (run in the worker's environment)::

    python restored_state.py CHECKPOINT OUT.npz   (in a short, private cwd: Ray's files go there)

Starts a local Ray cluster as the training program does (:func:`ray_worker.train.start_ray`), then
restores ``CHECKPOINT`` as a resume does (``Algorithm.from_checkpoint`` and
:func:`ray_worker.train.sync_restored_weights`) and writes ``OUT.npz``: ``step`` (the step the
resumed run continues from, :func:`ray_worker.checkpoints.saved_step`), ``lifetime_steps`` (RLlib's
lifetime env-step counter, which its schedules read), the learner's weights as
``learner/NAME`` and each env runner's as ``runner-I/NAME`` (what it samples with)."""

import sys
from argparse import Namespace
from pathlib import Path

import numpy as np


def arrays(prefix: str, state: dict) -> dict[str, np.ndarray]:
    """``{prefix/NAME: array}`` of a module's state (a multi-module state, ``{module: {name:
    tensor or array}}``, is of its one module ``default_policy``)."""
    if set(state) == {"default_policy"}:
        state = state["default_policy"]
    return {
        f"{prefix}/{name}": value.detach().cpu().numpy() if hasattr(value, "detach") else np.asarray(value)
        for name, value in state.items()
    }


def main(checkpoint: Path, out: Path) -> None:
    from ray_worker.checkpoints import saved_step
    from ray_worker.train import private_temp_dir, start_ray, sync_restored_weights

    temp, _folder = private_temp_dir()
    start_ray(Namespace(ray_address=None), temp)
    from ray.rllib.algorithms.algorithm import Algorithm
    from ray.rllib.utils.metrics import ENV_RUNNER_RESULTS, NUM_ENV_STEPS_SAMPLED_LIFETIME

    algo = Algorithm.from_checkpoint(str(checkpoint))
    sync_restored_weights(algo)
    found = arrays("learner", algo.learner_group.get_weights())
    runners = algo.env_runner_group.foreach_env_runner(lambda runner: runner.module.get_state(inference_only=True))
    for index, state in enumerate(runners):
        found |= arrays(f"runner-{index}", state)
    lifetime = algo.metrics.peek((ENV_RUNNER_RESULTS, NUM_ENV_STEPS_SAMPLED_LIFETIME), default=-1)
    np.savez(out, step=saved_step(checkpoint), lifetime_steps=int(lifetime), **found)
    algo.stop()


if __name__ == "__main__":
    main(Path(sys.argv[1]), Path(sys.argv[2]))
