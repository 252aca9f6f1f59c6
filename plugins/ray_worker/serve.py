"""``python -m ray_worker.serve --checkpoint DIR --agent AGENT``: the policy an RLlib run maps to one
agent, served over JSON lines for an arena's seat (the protocol of
:meth:`mosaic_core.worker.Worker.policy_server`), in the worker's environment: RLlib's module only,
loaded by :func:`ray_worker.matchplay.load_policy` (no algorithm, no Ray), greedy.

The observation comes flattened to one vector: in a turn-based game the board then the action mask
(1 = legal), which this server splits back into the dict the action-masking module reads, so the
policy never picks an illegal move; in a parallel game (MPE) the agent's own observation. The ready
line's ``observation_space`` is a Box of the vector's length, its ``action_space`` the module's.
Only protocol lines go to stdout: what RLlib or torch print goes to stderr.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import IO, Any

import numpy as np

from mosaic_core.child import preload, protocol_stdout


def observation_sizes(space: Any) -> tuple[int, int]:
    """(the observation's length, the action mask's: 0 without one) of a module's observation space."""
    from ray_worker.pettingzoo_envs import MASK, OBS

    if hasattr(space, "spaces") and MASK in space.spaces:
        return int(np.prod(space[OBS].shape)), int(np.prod(space[MASK].shape))
    return int(np.prod(space.shape)), 0


def describe_action_space(space: Any) -> dict[str, Any]:
    if hasattr(space, "n"):
        return {"type": "Discrete", "n": int(space.n)}
    return {"type": type(space).__name__, "shape": list(space.shape)}


def seat_observation(values: Any, sizes: tuple[int, int]) -> Any:
    """The flattened observation as the policy reads it (board and mask apart in a turn-based game)."""
    board, mask = sizes
    array = np.asarray(values, dtype=np.float32).reshape(-1)
    if array.size != board + mask:
        raise ValueError(f"the observation has {array.size} values; this policy reads {board + mask}")
    return {"observation": array[:board], "action_mask": array[board:]} if mask else array


def answer(policy: Any, request: Any, sizes: tuple[int, int]) -> dict[str, Any]:
    """The reply to one request (``act`` or ``ping``)."""
    command = request.get("cmd") if isinstance(request, dict) else None
    if command == "ping":
        return {"type": "pong"}
    if command != "act":
        return {"type": "error", "message": f"unknown command {command!r} (act, ping, stop)"}
    try:
        action = policy.act(seat_observation(request.get("observation"), sizes))
    except (ValueError, TypeError) as exc:
        return {"type": "error", "message": str(exc)}
    return {"type": "act", "action": np.asarray(action).tolist()}


def serve(policy: Any, agent: str, out: IO[str]) -> None:
    """The ready line, then one reply per request until ``stop`` or end of input."""
    sizes = observation_sizes(policy.module.observation_space)
    ready = {
        "type": "ready",
        "agent": agent,
        "observation_space": {"type": "Box", "shape": [sum(sizes)], "dtype": "float32"},
        "action_space": describe_action_space(policy.module.action_space),
    }
    print(json.dumps(ready), file=out, flush=True)
    for line in sys.stdin:
        if not line.strip():
            continue
        try:
            request = json.loads(line)
        except ValueError:
            reply: dict[str, Any] = {"type": "error", "message": "not a JSON line"}
        else:
            if isinstance(request, dict) and request.get("cmd") == "stop":
                print(json.dumps({"type": "stopped"}), file=out, flush=True)
                return
            reply = answer(policy, request, sizes)
        print(json.dumps(reply), file=out, flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m ray_worker.serve", description=__doc__.split("\n\n")[0])
    parser.add_argument("--checkpoint", required=True, help="an RLlib checkpoint directory of a run")
    parser.add_argument("--agent", required=True, help="the agent id whose policy takes the seat")
    args = parser.parse_args(argv)
    out = protocol_stdout()
    preload("torch")
    import torch

    from ray_worker.matchplay import load_policy

    torch.set_num_threads(1)  # one observation at a time: more threads only cost
    try:
        policy = load_policy(Path(args.checkpoint), args.agent)
    except (OSError, ValueError, KeyError) as exc:
        print(f"ray_worker.serve: no policy of {args.agent} from {args.checkpoint}: {exc}", file=sys.stderr)
        return 1
    serve(policy, args.agent, out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
