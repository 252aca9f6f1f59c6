"""Interactive mode: step one environment by JSON lines over stdin/stdout.

``python -m cleanrl_worker.interactive --env-id E [--seed S] [--policy-path P [--deterministic]] [--render]``
(``mosaic run --worker cleanrl --interactive ...`` runs it with the user's stdin/stdout).

One JSON object per line in each direction. On start the session prints a ``ready`` line
(env id, spaces, policy), then answers each command with exactly one line:

- ``{"cmd": "reset", "seed": 3}`` (seed optional; the first reset uses ``--seed``)
  → ``{"type": "reset", "observation": ..., "info": ..., "step": 0, "episode_return": 0.0, ...}``
- ``{"cmd": "step", "action": 1}`` (action optional: the loaded policy's action, else a
  random one) → ``{"type": "step", "action": ..., "action_source": "user"|"policy"|"random",
  "observation": ..., "reward": ..., "terminated": ..., "truncated": ..., "info": ...,
  "episode_return": ..., "step": ...}``
- ``{"cmd": "act", "observation": [...]}`` → ``{"type": "act", "action": ...}``: the loaded policy's
  action for an observation the caller gives (the env is not stepped: an arena's seat, served from
  this process; ``Worker.policy_server``);
- ``{"cmd": "ping"}`` → ``{"type": "pong"}``; ``{"cmd": "help"}`` → the commands;
  ``{"cmd": "stop"}`` → ``{"type": "stopped"}`` and exit 0. End of input also exits 0.

A request's ``"id"`` is echoed in its response. Observations come as a summary (shape,
dtype, min/max/mean, and the values when small); with ``--render`` each reset/step carries
``"frame": {"format": "png", "width", "height", "data": <base64>}``. A malformed line, an
unknown command or an invalid action gets ``{"type": "error", "message": ...}`` and the
session goes on. Only protocol lines go to stdout: anything else printed (by an env or a
library) is sent to stderr.
"""

from __future__ import annotations

import argparse
import base64
import io
import json
import math
import sys
from typing import IO, Any

import numpy as np

from mosaic_core.child import protocol_stdout

COMMANDS = {
    "reset": 'start an episode: {"cmd": "reset", "seed": 3} (seed optional)',
    "step": 'take one step: {"cmd": "step", "action": 1} (action optional: policy or random)',
    "act": 'the loaded policy\'s action for a given observation: {"cmd": "act", "observation": [0.1, 0.2]}',
    "ping": 'liveness check: {"cmd": "ping"}',
    "help": 'this list: {"cmd": "help"}',
    "stop": 'end the session: {"cmd": "stop"}',
}
SMALL = 64  # observations/arrays with at most this many elements are sent in full


class CommandError(Exception):
    """A request the session cannot carry out; answered with an error line."""


# JSON-safe summaries ---------------------------------------------------------------------


def json_safe(value: Any) -> Any:
    """``value`` as plain JSON types: numpy scalars/arrays, tuples, non-finite floats handled."""
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    if isinstance(value, (int, np.integer)):
        return int(value)
    if isinstance(value, (float, np.floating)):
        # float32 0.1 as 0.1, not 0.10000000149011612
        number = float(str(value)) if isinstance(value, np.floating) and value.itemsize < 8 else float(value)
        return number if math.isfinite(number) else str(number)
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, np.ndarray):
        return _values(value) if value.size <= SMALL else summarize(value)
    if isinstance(value, dict):
        return {str(key): json_safe(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_safe(item) for item in value]
    if isinstance(value, bytes):
        return base64.b64encode(value).decode("ascii")
    return repr(value)


def summarize(obs: Any) -> dict[str, Any]:
    """Shape, dtype, min/max/mean (and the values when small) of an observation."""
    if isinstance(obs, dict):
        return {"type": "dict", "items": {str(key): summarize(item) for key, item in obs.items()}}
    if isinstance(obs, tuple):
        return {"type": "tuple", "items": [summarize(item) for item in obs]}
    if isinstance(obs, str):
        return {"type": "str", "values": obs}
    array = np.asarray(obs)
    summary: dict[str, Any] = {"shape": list(array.shape), "dtype": str(array.dtype)}
    if array.size and array.dtype.kind in "biuf":
        summary.update(
            min=json_safe(array.min()), max=json_safe(array.max()), mean=json_safe(array.astype(np.float64).mean())
        )
    if array.size <= SMALL:
        summary["values"] = _values(array)
    return summary


def _values(array: np.ndarray) -> Any:
    """An array's values as (nested) JSON lists, each at its own precision."""
    if array.ndim == 0:
        return json_safe(array[()])
    return [_values(row) if row.ndim else json_safe(row[()]) for row in array]


def describe_space(space: Any) -> dict[str, Any]:
    """A JSON description of a gymnasium space (bounds only when small)."""
    import gymnasium as gym

    kind = type(space).__name__
    if isinstance(space, gym.spaces.Discrete):
        return {"type": kind, "n": int(space.n), "start": int(space.start)}
    if isinstance(space, gym.spaces.Box):
        described = {"type": kind, "shape": list(space.shape), "dtype": str(space.dtype)}
        if space.low.size <= SMALL:
            described.update(low=_values(space.low), high=_values(space.high))
        return described
    if isinstance(space, gym.spaces.MultiDiscrete):
        return {"type": kind, "nvec": json_safe(space.nvec)}
    if isinstance(space, gym.spaces.MultiBinary):
        return {"type": kind, "n": json_safe(space.n)}
    if isinstance(space, gym.spaces.Dict):
        return {"type": kind, "spaces": {key: describe_space(sub) for key, sub in space.spaces.items()}}
    if isinstance(space, gym.spaces.Tuple):
        return {"type": kind, "spaces": [describe_space(sub) for sub in space.spaces]}
    return {"type": kind, "repr": str(space)}


def encode_frame(frame: Any) -> dict[str, Any] | None:
    """An RGB(A) or grey frame as PNG, base64-encoded (None when there is no frame)."""
    if frame is None:
        return None
    from PIL import Image

    array = np.asarray(frame)
    if array.dtype != np.uint8:
        array = np.clip(array, 0, 255).astype(np.uint8)
    buffer = io.BytesIO()
    Image.fromarray(array).save(buffer, format="PNG")
    return {
        "format": "png",
        "width": int(array.shape[1]),
        "height": int(array.shape[0]),
        "data": base64.b64encode(buffer.getvalue()).decode("ascii"),
    }


def parse_action(space: Any, raw: Any) -> Any:
    """A user's JSON action as the env expects it, or :class:`CommandError` saying why not."""
    import gymnasium as gym

    if isinstance(space, gym.spaces.Discrete):
        if isinstance(raw, bool) or not isinstance(raw, int):
            raise CommandError(f"invalid action {raw!r}: {space} needs an integer")
        action: Any = np.int64(raw)
    elif isinstance(space, (gym.spaces.Box, gym.spaces.MultiDiscrete, gym.spaces.MultiBinary)):
        try:
            array = np.asarray(raw, dtype=np.float64)
        except (TypeError, ValueError):
            raise CommandError(f"invalid action {raw!r}: {space} needs numbers") from None
        if array.shape != space.shape and array.size == int(np.prod(space.shape)):
            array = array.reshape(space.shape)  # e.g. 0.5 for a Box of shape (1,)
        if array.shape != space.shape:
            raise CommandError(f"invalid action {raw!r}: {space} needs shape {list(space.shape)}")
        if space.dtype is not None and space.dtype.kind in "iu" and not np.all(array == np.round(array)):
            raise CommandError(f"invalid action {raw!r}: {space} needs integers")
        action = array.astype(space.dtype)
    else:
        action = raw
    if not space.contains(action):
        raise CommandError(f"invalid action {raw!r}: not in {space}")
    return action


# The session ----------------------------------------------------------------------------


class Session:
    """One env, an optional policy, and the state of the current episode."""

    def __init__(self, env: Any, policy: Any = None, seed: int | None = None, render: bool = False):
        self.env, self.policy, self.render = env, policy, render
        self.seed = seed
        self.obs: Any = None
        self.step_index = 0
        self.episode = 0
        self.episode_return = 0.0
        self.done = True
        self.started = False
        env.action_space.seed(seed)

    def ready(self, env_id: str, policy_info: dict[str, Any] | None) -> dict[str, Any]:
        return {
            "type": "ready",
            "env_id": env_id,
            "seed": self.seed,
            "render": self.render,
            "observation_space": describe_space(self.env.observation_space),
            "action_space": describe_space(self.env.action_space),
            "policy": policy_info,
            "commands": COMMANDS,
        }

    def handle(self, request: Any) -> dict[str, Any]:
        if not isinstance(request, dict):
            raise CommandError(f'expected a JSON object like {{"cmd": "ping"}}, got {type(request).__name__}')
        command = request.get("cmd")
        if command == "ping":
            return {"type": "pong"}
        if command == "help":
            return {"type": "help", "commands": COMMANDS}
        if command == "stop":
            return {"type": "stopped"}
        if command == "reset":
            return self.reset(request.get("seed"))
        if command == "step":
            return self.step(request.get("action"))
        if command == "act":
            return self.act(request.get("observation"))
        raise CommandError(f"unknown command {command!r}: use one of {', '.join(COMMANDS)}")

    def reset(self, seed: Any) -> dict[str, Any]:
        if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int) or seed < 0):
            raise CommandError(f"invalid seed {seed!r}: a non-negative integer is needed")
        if seed is None and not self.started:
            seed = self.seed  # the first episode follows --seed; later ones continue the env's RNG
        self.obs, info = self.env.reset(seed=seed)
        if seed is not None:
            self.env.action_space.seed(seed)
        self.started, self.done = True, False
        self.episode += 1
        self.step_index, self.episode_return = 0, 0.0
        return self._response("reset", info, seed=seed)

    def step(self, raw_action: Any) -> dict[str, Any]:
        if not self.started:
            raise CommandError('no episode yet: send {"cmd": "reset"} first')
        if self.done:
            raise CommandError('the episode has ended: send {"cmd": "reset"} to start another')
        if raw_action is not None:
            action, source = parse_action(self.env.action_space, raw_action), "user"
        elif self.policy is not None:
            action, source = self.policy(self.obs), "policy"
        else:
            action, source = self.env.action_space.sample(), "random"
        self.obs, reward, terminated, truncated, info = self.env.step(action)
        self.step_index += 1
        self.episode_return += float(reward)
        self.done = bool(terminated or truncated)
        if self.done:  # for events.jsonl when run by a MOSAIC host (a no-op otherwise)
            from mosaic_core.child import emit_event

            emit_event(
                "note",
                {
                    "interactive": "episode_end",
                    "episode": self.episode,
                    "episode_return": self.episode_return,
                    "length": self.step_index,
                },
            )
        return self._response(
            "step",
            info,
            action=json_safe(action),
            action_source=source,
            reward=json_safe(reward),
            terminated=bool(terminated),
            truncated=bool(truncated),
        )

    def act(self, raw_observation: Any) -> dict[str, Any]:
        if self.policy is None:
            raise CommandError("no policy loaded: start the session with --policy-path")
        space = self.env.observation_space
        try:
            observation = np.asarray(raw_observation, dtype=space.dtype)
        except (TypeError, ValueError):
            raise CommandError(f"invalid observation: {space} needs numbers") from None
        if observation.shape != space.shape:
            raise CommandError(
                f"invalid observation of shape {list(observation.shape)}: {space} needs {list(space.shape)}"
            )
        return {"type": "act", "action": json_safe(self.policy(observation))}

    def _response(self, kind: str, info: dict[str, Any], **fields: Any) -> dict[str, Any]:
        response = {
            "type": kind,
            **fields,
            "observation": summarize(self.obs),
            "info": json_safe(info),
            "episode": self.episode,
            "step": self.step_index,
            "episode_return": json_safe(self.episode_return),
            "done": self.done,
        }
        if self.render:
            response["frame"] = encode_frame(self.env.render())
        return response


def serve(session: Session, lines: IO[str], out: IO[str]) -> int:
    """Answer each line of ``lines`` on ``out`` until ``stop`` or end of input; returns 0."""

    def send(message: dict[str, Any]) -> None:
        out.write(json.dumps(message, allow_nan=False) + "\n")
        out.flush()

    while True:
        line = lines.readline()
        if not line:
            return 0
        if not line.strip():
            continue
        request: Any = None
        try:
            request = json.loads(line)
            response = session.handle(request)
        except json.JSONDecodeError as exc:
            response = {
                "type": "error",
                "message": f"malformed JSON ({exc.msg} at column {exc.colno}): "
                f'send one object per line, e.g. {{"cmd": "ping"}}',
            }
        except CommandError as exc:
            response = {"type": "error", "message": str(exc)}
        except Exception as exc:  # an env that raises on a step must not end the session
            response = {"type": "error", "message": f"{type(exc).__name__}: {exc}"}
        if isinstance(request, dict) and "id" in request:
            response["id"] = json_safe(request["id"])
        send(response)
        if response["type"] == "stopped":
            return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m cleanrl_worker.interactive", description="Step an environment by JSON lines over stdin/stdout."
    )
    parser.add_argument("--env-id", required=True, help="gymnasium environment id")
    parser.add_argument("--seed", type=int, default=None, help="seed of the first reset and of random actions")
    parser.add_argument("--policy-path", help="a .cleanrl_model checkpoint whose policy picks default actions")
    parser.add_argument("--render", action="store_true", help="send a PNG frame with each reset/step")
    parser.add_argument("--deterministic", action="store_true", help="the policy's greedy / mean action")
    return parser


def main(argv: list[str] | None = None) -> int:
    from cleanrl_worker.policy_eval import BadInput, load_policy, make_plain_env, quiet_rendering

    ns = build_parser().parse_args(argv)
    out = protocol_stdout()
    from mosaic_core import child

    child.connect()  # a no-op outside a MOSAIC run
    quiet_rendering()
    if ns.policy_path:
        child.preload("torch")  # the policy's
    render_mode = "rgb_array" if ns.render else None
    try:
        if ns.policy_path:
            loaded = load_policy(ns.policy_path, ns.env_id, seed=ns.seed or 0, deterministic=ns.deterministic)
            env, policy, policy_info = loaded.make_env(render_mode=render_mode), loaded.single, loaded.info
        else:
            env, policy, policy_info = make_plain_env(ns.env_id, render_mode), None, None
    except BadInput as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    session = Session(env, policy, seed=ns.seed, render=ns.render)
    try:
        out.write(json.dumps(session.ready(ns.env_id, policy_info)) + "\n")
        out.flush()
        return serve(session, sys.stdin, out)
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        return 0
    finally:
        env.close()


if __name__ == "__main__":
    sys.exit(main())
