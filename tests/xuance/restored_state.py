"""What the XuanCe worker's resume path restores, read back (run in the worker's environment)::

    python restored_state.py CHECKPOINT OUT.npz ALGO ENV SEED TOTAL OVERRIDES_JSON   (cwd: a scratch folder)

Builds the agent as the training program does in mode ``resume`` (:func:`xuance_worker.train.build_config`,
XuanCe's ``make_envs`` and agent registry, :func:`xuance_worker.train.keep_minibatch_size`), restores
``CHECKPOINT`` with :func:`xuance_worker.state.load` (everything, as a resume) and writes ``OUT.npz``:
``step`` (the agent's step counter, where training goes on from) and the policy's weights by name."""

import json
import sys
from pathlib import Path

import numpy as np


def main(checkpoint: Path, out: Path, algo: str, env: str, seed: str, total: str, overrides: str) -> None:
    from xuance.environment import make_envs
    from xuance.torch.agents import REGISTRY_Agents

    from xuance_worker import state
    from xuance_worker.train import build_config, keep_minibatch_size, parse_args

    ns = parse_args(
        ["--algo", algo, "--env", env, "--seed", seed, "--mode", "resume", "--checkpoint", str(checkpoint)]
        + ["--total-timesteps", total, "--overrides", overrides]
    )
    config = build_config(ns, int(total))
    envs = make_envs(config)
    agent = REGISTRY_Agents[config.agent](config, envs)
    try:
        keep_minibatch_size(agent, json.loads(overrides))
        state.load(agent, checkpoint, everything=True)
        weights = {name: value.detach().cpu().numpy() for name, value in agent.policy.state_dict().items()}
        np.savez(out, step=int(agent.current_step), **{f"policy/{k}": v for k, v in weights.items()})
    finally:
        agent.finish()
        envs.close()


if __name__ == "__main__":
    main(Path(sys.argv[1]), Path(sys.argv[2]), *sys.argv[3:8])
