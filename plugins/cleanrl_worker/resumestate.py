"""What a bundled algorithm's checkpoint carries besides weights so that a resumed run is the
run it would have been (docs/run-contract.md): the RNG states of python, numpy and torch, the
vector env's sub-envs, the loop's own variables, and the run name its TensorBoard folder and
final model are named by.

Everything is stored as tensors, numbers and strings (JSON text for nested plain values, arrays in it
as the base64 of their bytes; numpy's 128-bit generator states are ints no tensor holds), so a
checkpoint still loads with
``torch.load(..., weights_only=True)``: no pickle, no code.

Env state is saved as data where the env lets it be read and set: classic control (CartPole,
Acrobot, MountainCar, Pendulum…: ``state``, ``np_random`` and step counters), Atari (the emulator's
state, RNG included, as the bytes ALE serializes it to) and gymnasium's MuJoCo envs (the
simulator's integration state from ``mj_getState``, and the body quantities an env reads before
its next step), with the wrappers' counters, frame stacks and frame buffers. Other envs (envpool's,
which no call sets; procgen's, whose gym3 state calls are not used yet) resume with fresh episodes
(:func:`env_state` returns None; ``mosaic algos`` says so).
"""

from __future__ import annotations

import base64
import json
import random
from collections import deque
from typing import Any

import numpy as np
import torch

from cleanrl_worker.checkpoint_header import CHECKPOINTS

PLAIN_ENVS = ("gymnasium.envs.classic_control", "gym.envs.classic_control")
ALE_ENVS = ("ale_py.",)
MUJOCO_ENVS = ("gymnasium.envs.mujoco.",)
# TimeLimit's and RecordEpisodeStatistics' counters, NormalizeReward's discounted return (0.29: returns,
# 1.x: discounted_reward); the normalisers' running statistics travel as the checkpoint's normalization.
# Atari's (cleanrl_worker.atari): lives and game-over flags, AtariPreprocessing's two max-pooled frames,
# the frame stack (0.29: frames, 1.x: obs_queue).
WRAPPER_FIELDS = (
    "_elapsed_steps",
    "episode_returns",
    "episode_lengths",
    "episode_count",
    "returns",
    "discounted_reward",
    "lives",
    "game_over",
    "obs_buffer",
    "frames",
    "obs_queue",
)
# What a MuJoCo env reads of its simulator's derived quantities before its next step (Ant's and
# Humanoid's positions before the step, their contact forces): as the last step left them, not as
# mj_forward would recompute them from the restored state.
MUJOCO_DERIVED = ("xpos", "xquat", "xmat", "xipos", "ximat", "subtree_com", "cinert", "cvel", "cfrc_ext")
VECTOR_FIELDS = ("_autoreset_envs",)  # gymnasium 1.x: which sub-envs reset at the next step


def layout_path(step: int) -> str:
    """Where the checkpoint at env step ``step`` goes (the worker's ``checkpoint_layout``)."""
    return CHECKPOINTS.format(step=int(step))


# Plain values <-> JSON ------------------------------------------------------------------------


def _plain(value: Any) -> Any:
    if isinstance(value, np.ndarray):
        data = base64.b64encode(np.ascontiguousarray(value).tobytes()).decode("ascii")
        return {"__bytes__": data, "dtype": str(value.dtype), "shape": list(value.shape)}
    if isinstance(value, deque):
        return {"__deque__": [_plain(v) for v in value], "maxlen": value.maxlen}
    if isinstance(value, np.generic):
        return {"__scalar__": value.item(), "dtype": str(value.dtype)}
    if isinstance(value, tuple):
        return {"__tuple__": [_plain(v) for v in value]}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    return value


def _restored(value: Any) -> Any:
    if isinstance(value, dict):
        if "__bytes__" in value:
            flat = np.frombuffer(base64.b64decode(value["__bytes__"]), dtype=np.dtype(value["dtype"]))
            return flat.reshape(value["shape"]).copy()  # writable: wrappers fill some in place
        if "__array__" in value:  # checkpoints written before arrays were stored as bytes
            return np.asarray(value["__array__"], dtype=np.dtype(value["dtype"]))
        if "__deque__" in value:
            return deque((_restored(v) for v in value["__deque__"]), maxlen=value["maxlen"])
        if "__scalar__" in value:
            return np.dtype(value["dtype"]).type(value["__scalar__"])
        if "__tuple__" in value:
            return tuple(_restored(v) for v in value["__tuple__"])
        return {k: _restored(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_restored(v) for v in value]
    return value


def to_text(value: Any) -> str:
    return json.dumps(_plain(value))


def from_text(text: str) -> Any:
    return _restored(json.loads(text))


# RNG states ---------------------------------------------------------------------------------------


def rng_state() -> dict[str, Any]:
    return {
        "python": to_text(random.getstate()),
        "numpy": to_text(np.random.get_state()),
        "torch": torch.get_rng_state(),
    }


def restore_rng(state: dict[str, Any]) -> None:
    version, internal, gauss = from_text(state["python"])
    random.setstate((version, tuple(internal), gauss))
    np.random.set_state(from_text(state["numpy"]))
    torch.set_rng_state(state["torch"])


# Env state ----------------------------------------------------------------------------------------


def _generator_state(generator: Any) -> Any:
    return None if generator is None else generator.bit_generator.state


def _layers(env: Any) -> list[Any]:
    layers = [env]
    while hasattr(layers[-1], "env"):
        layers.append(layers[-1].env)
    return layers


def _space_rngs(space: Any) -> Any:
    return _generator_state(getattr(space, "_np_random", None))


def _simulator_state(base: Any) -> dict[str, Any] | None:
    """The base env's own state as plain values, or None when it keeps state no call reads."""
    module = type(base).__module__
    if module.startswith(PLAIN_ENVS):
        names = ("state", "steps_beyond_terminated", "steps_beyond_done", "last_u")
        return {"attributes": {name: value for name, value in vars(base).items() if name in names}}
    if module.startswith(ALE_ENVS):
        emulator = base.ale.cloneState(include_rng=True).serialize()
        return {"ale": base64.b64encode(emulator).decode("ascii")}
    if module.startswith(MUJOCO_ENVS):
        import mujoco

        integration = np.empty(mujoco.mj_stateSize(base.model, mujoco.mjtState.mjSTATE_INTEGRATION))
        mujoco.mj_getState(base.model, base.data, integration, mujoco.mjtState.mjSTATE_INTEGRATION)
        derived = {name: np.array(getattr(base.data, name)) for name in MUJOCO_DERIVED}
        return {"mujoco": {"integration": integration, "derived": derived}}
    return None


def _restore_simulator(base: Any, saved: dict[str, Any]) -> None:
    if "ale" in saved:
        import ale_py

        base.ale.restoreState(ale_py.ALEState(base64.b64decode(saved["ale"])))
    elif "mujoco" in saved:
        import mujoco

        state, integration = saved["mujoco"], mujoco.mjtState.mjSTATE_INTEGRATION
        mujoco.mj_setState(base.model, base.data, state["integration"], integration)
        mujoco.mj_forward(base.model, base.data)  # every derived quantity, from the restored state
        # again: mj_forward wrote its own result over the solver's warm start
        mujoco.mj_setState(base.model, base.data, state["integration"], integration)
        for name, value in state["derived"].items():
            getattr(base.data, name)[...] = value
    for name, value in saved.get("attributes", {}).items():
        setattr(base, name, value)


def env_state(envs: Any) -> str | None:
    """The sub-envs' state as JSON text, or None when any of them keeps state that is not plain."""
    subs = getattr(envs, "envs", None)
    if subs is None:
        return None
    records = []
    for env in subs:
        simulator = _simulator_state(env.unwrapped)
        if simulator is None:
            return None
        records.append(
            {
                "wrappers": [
                    {name: getattr(layer, name) for name in WRAPPER_FIELDS if name in vars(layer)}
                    for layer in _layers(env)
                ],
                "simulator": simulator,
                "np_random": _generator_state(getattr(env.unwrapped, "_np_random", None)),
                "action_space": _space_rngs(env.action_space),
                "observation_space": _space_rngs(env.observation_space),
            }
        )
    vector = {name: getattr(envs, name) for name in VECTOR_FIELDS if name in vars(envs)}
    return to_text(
        {
            "envs": records,
            "vector": vector,
            "single_action_space": _space_rngs(envs.single_action_space),
            "action_space": _space_rngs(envs.action_space),
        }
    )


def _set_generator(holder: Any, attribute: str, state: Any) -> None:
    if state is None:
        return
    generator = getattr(holder, attribute, None)
    if generator is None:
        generator = np.random.Generator(getattr(np.random, state["bit_generator"])())
        setattr(holder, attribute, generator)
    generator.bit_generator.state = state


def restore_envs(envs: Any, text: str) -> None:
    """Put the sub-envs back as :func:`env_state` found them (same env id and number of envs),
    after the run's ``envs.reset`` (which readies the wrappers)."""
    saved = from_text(text)
    if len(saved["envs"]) != len(envs.envs):
        raise ValueError(f"the checkpoint saved {len(saved['envs'])} sub-envs, this run has {len(envs.envs)}")
    for env, record in zip(envs.envs, saved["envs"]):
        for layer, fields in zip(_layers(env), record["wrappers"]):
            for name, value in fields.items():
                setattr(layer, name, value)
        base = env.unwrapped
        # "env": a checkpoint written before the simulators' state was saved (classic control's attributes)
        _restore_simulator(base, record.get("simulator") or {"attributes": record.get("env", {})})
        _set_generator(base, "_np_random", record["np_random"])
        _set_generator(env.action_space, "_np_random", record["action_space"])
        _set_generator(env.observation_space, "_np_random", record["observation_space"])
    for name, value in saved.get("vector", {}).items():
        setattr(envs, name, value)
    _set_generator(envs.single_action_space, "_np_random", saved["single_action_space"])
    _set_generator(envs.action_space, "_np_random", saved["action_space"])


# A loop's whole state ---------------------------------------------------------------------------


def training_state(envs: Any, **loop: Any) -> dict[str, Any]:
    """The RNGs, the sub-envs and the loop's own variables (arrays or tensors: the observation
    the next step acts on, autoreset flags…) at a save: a checkpoint's ``training_state``."""
    return {
        "rng": rng_state(),
        "envs": env_state(envs),
        "loop": {
            name: torch.as_tensor(np.asarray(value) if not torch.is_tensor(value) else value).cpu()
            for name, value in loop.items()
        },
    }


def restore_training_state(state: dict[str, Any] | None, envs: Any) -> dict[str, np.ndarray] | None:
    """Put back what :func:`training_state` saved, after the run's ``envs.reset``: the RNGs always;
    the sub-envs and the loop's variables (returned, as arrays) where the envs could be saved.
    None: the loop goes on from its fresh reset (an env whose state no attribute holds)."""
    if not state:
        return None
    restore_rng(state["rng"])
    if state["envs"] is None:
        return None
    restore_envs(envs, state["envs"])
    return {name: value.numpy().copy() for name, value in state["loop"].items()}


# TensorBoard --------------------------------------------------------------------------------------


def summary_writer(run_name: str, from_step: int | None) -> Any:
    """The run's TensorBoard writer, ``runs/{run_name}``; on a resume the same folder, with what
    an earlier attempt wrote after ``from_step`` purged (one history, no overlapping steps)."""
    from torch.utils.tensorboard import SummaryWriter

    return SummaryWriter(f"runs/{run_name}", purge_step=None if from_step is None else from_step + 1)
