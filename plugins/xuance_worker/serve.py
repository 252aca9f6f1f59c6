"""``python -m xuance_worker.serve --checkpoint DIR --agent ID``: one agent's policy of a XuanCe
checkpoint in an arena's seat (``mosaic match --seat NAME=run:RUN_ID``), in the worker's environment.

The protocol is :meth:`mosaic_core.Worker.policy_server`'s: one ``ready`` line (the agent's
observation and action spaces), then one line for each request on stdin: ``{"cmd": "act",
"observation": [...]}`` → ``{"type": "act", "action": N}``, ``{"cmd": "stop"}`` (or end of input)
ends it; a bad request gets ``{"type": "error", "message": ...}``. Only protocol lines go to stdout.

The agent is built as evaluation builds it (:func:`xuance_worker.train.build_config` from the
checkpoint's algorithm, env and config keys; one env), in a scratch folder removed at the end (XuanCe's
agent opens a TensorBoard folder where it starts), and gets the checkpoint's policy weights only
(:func:`xuance_worker.state.load`: ``torch.load(weights_only=True)``). It plays greedily. Each agent's
action depends on its own observation, so the other agents' inputs are zeros; on a board game
(:mod:`xuance_worker.boardgames`) the observation ends with the legal moves, which the policy obeys
as in training. A recurrent policy (``use_rnn``) is refused: its hidden state is not served yet.
"""

from __future__ import annotations

import argparse
import inspect
import json
import os
import sys
import tempfile
from argparse import Namespace
from pathlib import Path
from typing import IO, Any

import numpy as np

from mosaic_core.child import preload, protocol_stdout


class ServeError(Exception):
    """The checkpoint cannot serve this agent; one line on stderr, exit code 2."""


class ServedAgent:
    """One agent of a XuanCe agent group, its weights a checkpoint's."""

    def __init__(self, checkpoint: Path, agent_id: str):
        from xuance.environment import make_envs
        from xuance.torch.agents import REGISTRY_Agents

        from xuance_worker import state
        from xuance_worker.checkpoints import read_meta
        from xuance_worker.train import build_config

        try:
            meta = read_meta(checkpoint)
        except ValueError as exc:
            raise ServeError(f"checkpoint {checkpoint}: {exc}") from None
        overrides = _checked_overrides(checkpoint, meta)
        ns = Namespace(algo=meta["algo"], env=meta["env"], overrides=json.dumps(overrides), seed=None, mode="evaluate")
        config = build_config(ns, 1)
        if getattr(config, "use_rnn", False):
            raise ServeError(f"checkpoint {checkpoint}: a recurrent policy (use_rnn) cannot take a seat yet")
        envs = make_envs(config)
        try:
            self.group = REGISTRY_Agents[config.agent](config, envs)
            state.load(self.group, checkpoint, everything=False)
        except ValueError as exc:
            raise ServeError(str(exc)) from None
        finally:
            envs.close()
        if agent_id not in self.group.agent_keys:
            raise ServeError(
                f"the run's agents are {', '.join(self.group.agent_keys)}: it has no policy for seat {agent_id!r}"
            )
        self.agent_id, self.meta = agent_id, meta
        self.observation_space = self.group.observation_space[agent_id]
        self.action_space = self.group.action_space[agent_id]
        self.greedy = {"test_mode": True}
        if "deterministic" in inspect.signature(self.group.get_actions).parameters:
            self.greedy["deterministic"] = True

    def ready(self) -> dict[str, Any]:
        obs, actions = self.observation_space, self.action_space
        return {
            "type": "ready",
            "observation_space": {"type": type(obs).__name__, "shape": list(obs.shape)},
            "action_space": {"type": type(actions).__name__, "n": int(getattr(actions, "n", 0))},
            "policy": {"algo": self.meta["algo"], "env": self.meta["env"], "step": self.meta["global_step"]},
            "agent": self.agent_id,
        }

    def act(self, raw: Any) -> int:
        try:
            observation = np.asarray(raw, dtype=np.float32)
        except (TypeError, ValueError):
            raise ServeError("invalid observation: a list of numbers is needed") from None
        if observation.shape != self.observation_space.shape:
            raise ServeError(
                f"invalid observation of shape {list(observation.shape)}: {list(self.observation_space.shape)} needed"
            )
        group = self.group
        inputs = {k: np.zeros(group.observation_space[k].shape, np.float32) for k in group.agent_keys}
        inputs[self.agent_id] = observation
        masks = None
        if group.use_actions_mask:
            masks = [{k: self._mask(k, observation) for k in group.agent_keys}]
        out = group.get_actions(obs_dict=[inputs], avail_actions_dict=masks, **self.greedy)
        return int(np.asarray(out["actions"][0][self.agent_id]).reshape(()))

    def _mask(self, agent: str, observation: np.ndarray) -> np.ndarray:
        """The served agent's legal actions (a board game's observation ends with them); the others' a no-op."""
        n = int(self.group.action_space[agent].n)
        if agent != self.agent_id:
            return np.eye(n, dtype=np.bool_)[0]
        if self.meta["env"].startswith("classic/"):
            return observation[-n:] > 0.5
        return np.ones(n, np.bool_)


def _checked_overrides(checkpoint: Path, meta: dict[str, Any]) -> dict[str, Any]:
    """The config keys ``meta.json`` records, checked as a run's plan checks them (a file that names
    another algorithm, env or key is refused, not passed to XuanCe)."""
    from xuance_worker.catalog import ALGORITHMS
    from xuance_worker.configs import configs_root, problems

    algo, env, overrides = meta.get("algo"), meta.get("env"), meta.get("overrides", {})
    if algo not in ALGORITHMS or not isinstance(env, str) or env.count("/") != 1 or not isinstance(overrides, dict):
        raise ServeError(f"checkpoint {checkpoint}: its meta.json names no algorithm and env of this worker")
    found = problems(configs_root(), algo, env, overrides)
    if found:
        raise ServeError(f"checkpoint {checkpoint}: {found[0]}")
    return overrides


def answer(served: ServedAgent, line: str) -> dict[str, Any]:
    try:
        request = json.loads(line)
    except ValueError:
        return {"type": "error", "message": 'malformed JSON: send one object per line, e.g. {"cmd": "act", ...}'}
    command = request.get("cmd") if isinstance(request, dict) else None
    if command == "stop":
        return {"type": "stopped"}
    if command != "act":
        return {"type": "error", "message": f'unknown command {command!r}: use "act" or "stop"'}
    try:
        return {"type": "act", "action": served.act(request.get("observation"))}
    except ServeError as exc:
        return {"type": "error", "message": str(exc)}


def serve(served: ServedAgent, lines: IO[str], out: IO[str]) -> int:
    """Answer each line until ``stop`` or end of input; 0."""
    for line in lines:
        if not line.strip():
            continue
        response = answer(served, line)
        out.write(json.dumps(response) + "\n")
        out.flush()
        if response["type"] == "stopped":
            break
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m xuance_worker.serve")
    parser.add_argument("--checkpoint", required=True, help="a checkpoint directory (checkpoints/step_N)")
    parser.add_argument("--agent", required=True, help="the agent id whose policy is served (the seat)")
    ns = parser.parse_args(argv)
    out = protocol_stdout()
    os.environ.pop("TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD", None)
    os.environ["TORCH_FORCE_WEIGHTS_ONLY_LOAD"] = "1"  # every torch.load here reads weights only
    os.environ.setdefault("SDL_VIDEODRIVER", "dummy")
    os.environ.setdefault("SDL_AUDIODRIVER", "dummy")
    checkpoint = Path(ns.checkpoint).absolute()
    with tempfile.TemporaryDirectory(prefix="mosaic-xuance-serve-") as scratch:
        os.chdir(scratch)
        try:
            preload("torch", "xuance.torch.agents")
            import torch

            torch.set_num_threads(1)
            served = ServedAgent(checkpoint, ns.agent)
        except ServeError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
        try:
            out.write(json.dumps(served.ready()) + "\n")
            out.flush()
            return serve(served, sys.stdin, out)
        except (BrokenPipeError, KeyboardInterrupt):
            return 0
        finally:
            served.group.finish()


if __name__ == "__main__":
    sys.exit(main())
