"""Gymnasium 0.29 semantics on gymnasium 1.x, for CleanRL scripts written for 0.29.

Upstream CleanRL pins gymnasium 0.29.1. On 1.x its scripts crash (``KeyError:
'final_observation'`` in dqn, c51, sac, td3, ddpg; ``TransformObservation`` without an
observation space in the continuous ones; ``gym.wrappers.FrameStack`` gone in the Atari ones)
or train without logging one episodic return (ppo: no ``final_info``). In the training process
of a script that is not one of ours, :func:`install` puts back what these scripts rely on:

- ``gym.vector.SyncVectorEnv`` / ``AsyncVectorEnv`` reset a finished sub-env in the same step
  (1.x's ``AutoresetMode.SAME_STEP``, gymnasium >= 1.1) and report it in 0.29's layout:
  ``infos["final_observation"]`` and ``infos["final_info"]`` are object arrays with the last
  observation / the info dict of each sub-env whose episode ended (None elsewhere), with
  ``_final_observation`` / ``_final_info`` masks (1.x gives ``final_obs`` and a *batched*
  ``final_info`` dict instead);
- ``TransformObservation(env, fn)`` keeps the env's observation space when none is given;
- the 0.29 names ``FrameStack`` and ``GrayScaleObservation`` exist again.

The bundled algorithms handle both versions themselves (:mod:`cleanrl_worker.gymcompat`) and
run without it; ``extras.gym_compat`` (true/false) forces it on or off. Nothing heavy is
imported at module level: the host asks :func:`dry_run_note` what a dry run should say.
"""

from __future__ import annotations

import sys
from importlib import metadata
from pathlib import Path
from typing import Any

EXTRAS_KEY = "gym_compat"
BUNDLED_DIR = Path(__file__).resolve().parent / "algorithms"


def _major(version: str) -> int:
    try:
        return int(version.split(".")[0])
    except ValueError:
        return 0


def installed_gymnasium() -> str | None:
    try:
        return metadata.version("gymnasium")
    except metadata.PackageNotFoundError:
        return None


def wanted(script: Path | str, extras: dict[str, Any], gymnasium_version: str | None) -> bool:
    """Whether a script gets 0.29 semantics: on gymnasium 1.x, for every script but ours (unless told)."""
    if gymnasium_version is None or _major(gymnasium_version) < 1:
        return False
    forced = extras.get(EXTRAS_KEY)
    if isinstance(forced, bool):
        return forced
    return Path(script).resolve().parent != BUNDLED_DIR


def dry_run_note(script: Path | str, extras: dict[str, Any]) -> str | None:
    """The dry-run summary's line when the compatibility layer will be installed (None otherwise)."""
    version = installed_gymnasium()
    if not wanted(script, extras, version):
        return None
    return (
        f"gymnasium {version}: the script runs with gymnasium 0.29 vector-env semantics (same-step autoreset, "
        f"final_observation/final_info in 0.29's layout, 0.29 wrapper names); extras.{EXTRAS_KEY}=false turns "
        "this off"
    )


# Training process --------------------------------------------------------------------------


def unbatch(batched: dict[str, Any], index: int) -> dict[str, Any]:
    """Sub-env ``index``'s own info dict out of a 1.x batched info dict (``_key`` masks)."""
    info: dict[str, Any] = {}
    for key, value in batched.items():
        if key.startswith("_"):
            continue
        mask = batched.get(f"_{key}")
        if mask is not None and not mask[index]:
            continue
        info[key] = unbatch(value, index) if isinstance(value, dict) else value[index]
    return info


def to_029_infos(infos: dict[str, Any], num_envs: int) -> dict[str, Any]:
    """Rewrite a SAME_STEP step's infos (``final_obs``, batched ``final_info``) in 0.29's layout."""
    import numpy as np

    if "final_obs" not in infos:
        return infos
    ended = np.asarray(infos.pop("_final_obs"), dtype=bool)
    final_obs = infos.pop("final_obs")
    batched = infos.pop("final_info", {})
    infos.pop("_final_info", None)
    final_info = np.full(num_envs, None, dtype=object)
    for index in np.flatnonzero(ended):
        final_info[index] = unbatch(batched, int(index))
    infos["final_observation"], infos["_final_observation"] = final_obs, ended
    infos["final_info"], infos["_final_info"] = final_info, ended.copy()
    return infos


def _same_step(vector_cls: type) -> type:
    import gymnasium as gym

    class SameStep(vector_cls):  # type: ignore[misc, valid-type]
        __doc__ = f"{vector_cls.__name__} with gymnasium 0.29's same-step autoreset and info layout."

        def __init__(self, *args: Any, **kwargs: Any):
            vector: Any = gym.vector  # 1.x's (the lint venv's gymnasium is 0.29, which has no AutoresetMode)
            kwargs.setdefault("autoreset_mode", vector.AutoresetMode.SAME_STEP)
            super().__init__(*args, **kwargs)

        def step(self, actions: Any):
            obs, rewards, terminations, truncations, infos = super().step(actions)
            return obs, rewards, terminations, truncations, to_029_infos(infos, self.num_envs)

    SameStep.__name__ = SameStep.__qualname__ = vector_cls.__name__
    SameStep.__module__ = vector_cls.__module__
    return SameStep


def _transform_observation(base: type) -> type:
    class TransformObservation(base):  # type: ignore[misc, valid-type]
        """``TransformObservation(env, func)`` as in 0.29: the observation space stays the env's."""

        def __init__(self, env: Any, func: Any, observation_space: Any = None):
            super().__init__(env, func, env.observation_space if observation_space is None else observation_space)

    return TransformObservation


def _frame_stack(base: type) -> Any:
    def FrameStack(env: Any, num_stack: int, lz4_compress: bool = False) -> Any:
        return base(env, num_stack)

    return FrameStack


def _grayscale(base: type) -> Any:
    def GrayScaleObservation(env: Any, keep_dim: bool = False) -> Any:
        return base(env, keep_dim=keep_dim)

    return GrayScaleObservation


def install() -> bool:
    """Give this process 0.29 semantics (once); False, with a warning, where 1.x cannot give them."""
    import gymnasium as gym

    # gymnasium 1.x's modules, patched: mypy reads them as the lint venv's 0.29, so they are Any here
    vector: Any = gym.vector
    wrappers: Any = gym.wrappers
    if getattr(vector, "__mosaic_029__", False):
        return True
    if not hasattr(vector, "AutoresetMode"):
        print(
            f"warning: gymnasium {gym.__version__} cannot reset vector envs in the same step (needs >= 1.1): "
            "a script written for gymnasium 0.29 may log no episodic return",
            file=sys.stderr,
        )
        return False
    vector.SyncVectorEnv = _same_step(vector.SyncVectorEnv)
    vector.AsyncVectorEnv = _same_step(vector.AsyncVectorEnv)
    wrappers.TransformObservation = _transform_observation(wrappers.TransformObservation)
    if not hasattr(wrappers, "FrameStack"):
        wrappers.FrameStack = _frame_stack(wrappers.FrameStackObservation)
    if not hasattr(wrappers, "GrayScaleObservation"):
        wrappers.GrayScaleObservation = _grayscale(wrappers.GrayscaleObservation)
    from cleanrl_worker import gymcompat

    gymcompat.NEXT_STEP_AUTORESET = False  # our helpers, when such a script uses them, see 0.29 too
    vector.__mosaic_029__ = True
    return True


def install_for(script: Path | str, extras: dict[str, Any]) -> bool:
    """:func:`install` when :func:`wanted` says so (called by ``cleanrl_worker.launch``)."""
    return wanted(script, extras, installed_gymnasium()) and install()
