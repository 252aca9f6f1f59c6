"""The env catalog (``mosaic envs``): every env id by family, installed or not, its spaces, the
bundled algorithms that fit it.

Ids come from gymnasium's registry (after registering the installed families' ids), so an id a
newly installed package registers appears without a change here; each family's best-known ids
are listed too when the family is not installed, with the extra that installs it. Spaces are
read by making the env (Atari: from its registration, making 1,000 ALE envs takes minutes).

:data:`ALGORITHM_SPACES` declares which action and observation spaces each bundled algorithm
handles: :func:`fit_problem` is the one check, for the catalog and for a dry run.
"""

from __future__ import annotations

import contextlib
import io
import warnings
from dataclasses import asdict, dataclass, field
from typing import Any

from cleanrl_worker.env_families import FAMILIES, family_of, register_atari, register_env_plugins


@dataclass(frozen=True)
class SpacesFit:
    """What a bundled algorithm can train on."""

    actions: tuple[str, ...]  # "discrete", "continuous"
    vector_observations: bool  # flat Box observations (MLP)
    image_families: tuple[str, ...] = ()  # families whose image observations its CNN is built for

    def describe(self) -> dict[str, Any]:
        return {
            "actions": list(self.actions),
            "observations": (["vector"] if self.vector_observations else [])
            + [f"image ({family})" for family in self.image_families],
        }


ALGORITHM_SPACES = {
    "ppo": SpacesFit(("discrete",), True, ("minigrid",)),
    "dqn": SpacesFit(("discrete",), True),
    "c51": SpacesFit(("discrete",), True),
    "ppo_atari": SpacesFit(("discrete",), False, ("atari",)),
    "dqn_atari": SpacesFit(("discrete",), False, ("atari",)),
    "ppo_procgen": SpacesFit(("discrete",), False, ("procgen",)),
    # EnvPool's Atari tasks (`Breakout-v5`): not gymnasium ids, so the catalog lists none for it
    "ppo_atari_envpool": SpacesFit(("discrete",), False, ("envpool",)),
    "ppo_continuous_action": SpacesFit(("continuous",), True),
    "sac_continuous_action": SpacesFit(("continuous",), True),
    "td3_continuous_action": SpacesFit(("continuous",), True),
    "ddpg_continuous_action": SpacesFit(("continuous",), True),
}


# Bundled algorithms that flatten Dict observations (DM Control's), as CleanRL's own ppo_continuous_action does.
FLATTENS_DICT = ("ppo_continuous_action",)


def fit_problem(algo: str, *, action: str, observation: str, family: str | None) -> str | None:
    """Why bundled ``algo`` cannot train on an env with these spaces (None: it can, or it is not ours).

    ``action``: "discrete" / "continuous" / other; ``observation``: "vector" / "image" / other.
    """
    fit = ALGORITHM_SPACES.get(algo)
    if fit is None:
        return None
    if action not in fit.actions:
        return f"{algo} needs a {' or '.join(fit.actions)} action space, not {action}"
    if observation == "vector" and fit.vector_observations:
        return None
    if observation == "Dict" and algo in FLATTENS_DICT:  # DM Control's dict of vectors, flattened
        return None
    if observation == "image" and family in fit.image_families:
        return None
    wanted = fit.describe()["observations"]
    what = f"image ({family})" if observation == "image" else observation
    better = image_algorithm(algo, action, family) if observation == "image" else None
    hint = f": for these frames use --algo {better}" if better else ""
    return f"{algo} takes {' or '.join(wanted)} observations, not {what}{hint}"


def image_algorithm(algo: str, action: str, family: str | None) -> str | None:
    """The bundled algorithm to suggest for image observations ``algo`` cannot take: its own
    Atari variant (``ppo`` -> ``ppo_atari``) first, else one whose CNN is built for ``family``."""
    fits = [name for name, fit in ALGORITHM_SPACES.items() if action in fit.actions and fit.image_families]
    own = f"{algo}_atari"
    if own in fits:
        return own
    return next((name for name in fits if family in ALGORITHM_SPACES[name].image_families), None)


@dataclass
class EnvEntry:
    env_id: str
    family: str
    installed: bool
    install: str | None
    observation: str  # "vector", "image", another space's name, or "?" (not installed / not made)
    action: str  # "discrete", "continuous", another space's name, or "?"
    observation_shape: list[int] | None = None
    action_size: int | None = None  # Discrete n or Box dimension
    algorithms: list[str] = field(default_factory=list)
    error: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def classify(observation_space: Any, action_space: Any) -> tuple[str, list[int] | None, str, int | None]:
    """``(observation kind, shape, action kind, size)`` of two gymnasium spaces."""
    import gymnasium as gym
    import numpy as np

    obs_kind, shape = type(observation_space).__name__, None
    if isinstance(observation_space, gym.spaces.Box):
        shape = list(observation_space.shape or ())
        obs_kind = "image" if len(shape) == 3 or (len(shape) == 2 and observation_space.dtype == np.uint8) else "vector"
    elif isinstance(observation_space, gym.spaces.Dict) and "image" in observation_space.spaces:
        obs_kind, shape = "image", list(observation_space["image"].shape or ())  # MiniGrid: ImgObsWrapper takes it
    act_kind, size = type(action_space).__name__, None
    if isinstance(action_space, gym.spaces.Discrete):
        act_kind, size = "discrete", int(action_space.n)
    elif isinstance(action_space, gym.spaces.Box):
        act_kind, size = "continuous", int(np.prod(action_space.shape))
    return obs_kind, shape, act_kind, size


# Spaces of a family's ids when they cannot be read (family not installed, or not made).
STATIC_SPACES = {
    "mujoco": ("vector", "continuous"),
    "atari": ("image", "discrete"),
    "minigrid": ("image", "discrete"),
    "procgen": ("image", "discrete"),
}


def _fitting(entry: EnvEntry) -> list[str]:
    return [
        algo
        for algo in ALGORITHM_SPACES
        if entry.observation != "?"
        and fit_problem(algo, action=entry.action, observation=entry.observation, family=entry.family) is None
    ]


def _registered_family(spec: Any) -> str:
    entry_point = spec.entry_point if isinstance(spec.entry_point, str) else getattr(spec.entry_point, "__module__", "")
    for family in FAMILIES:
        if entry_point.startswith(family.entry_points):
            return family.key
    known = family_of(spec.id)
    return known.key if known else "other"


def _register_installed() -> None:
    register_env_plugins()
    for family in FAMILIES:
        if not family.installed:
            continue
        with contextlib.suppress(Exception):  # a broken optional package must not hide the others
            if family.key == "atari":
                register_atari()
            elif family.key == "minigrid":
                import minigrid  # noqa: F401  (registers MiniGrid and BabyAI)
            elif family.key == "procgen":
                from cleanrl_worker import procgen_compat

                procgen_compat.register()


def _read_spaces(entry: EnvEntry, spec: Any) -> None:
    import gymnasium as gym

    if entry.family == "atari":  # from the registration: rgb / grayscale images or 128 bytes of RAM
        ram = spec.kwargs.get("obs_type") == "ram"
        entry.observation, entry.action = ("vector" if ram else "image"), "discrete"
        entry.observation_shape = [128] if ram else [210, 160, 3]
        return
    try:
        with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()):
            warnings.simplefilter("ignore")
            env = gym.make(spec.id, disable_env_checker=True)
        try:
            entry.observation, entry.observation_shape, entry.action, entry.action_size = classify(
                env.observation_space, env.action_space
            )
        finally:
            env.close()
    except Exception as exc:  # an id whose package is missing or broken: listed with the reason
        entry.error = " ".join(str(exc).split())[:200] or type(exc).__name__


def catalog(families: tuple[str, ...] = ()) -> list[EnvEntry]:
    """Every env id of the known families (and ids other packages register), sorted by family then id."""
    import gymnasium as gym

    _register_installed()
    entries: dict[str, EnvEntry] = {}
    by_key = {family.key: family for family in FAMILIES}
    for env_id, spec in list(gym.registry.items()):
        key = _registered_family(spec)
        if (families and key not in families) or (key == "other" and spec.entry_point is None):
            continue
        family = by_key.get(key)
        installed = family.installed if family else True
        entry = EnvEntry(
            env_id, key, installed, family.install if family else None, *STATIC_SPACES.get(key, ("?", "?"))
        )
        if installed:
            _read_spaces(entry, spec)
        entries[env_id] = entry
    for family in FAMILIES:
        if families and family.key not in families:
            continue
        for env_id in family.known_ids:
            if env_id not in entries and not family.installed:
                observation, action = STATIC_SPACES.get(family.key, ("?", "?"))
                entries[env_id] = EnvEntry(env_id, family.key, False, family.install, observation, action)
    order = [family.key for family in FAMILIES] + ["other"]
    result = sorted(
        entries.values(), key=lambda e: (order.index(e.family) if e.family in order else len(order), e.env_id)
    )
    for entry in result:
        entry.algorithms = _fitting(entry)
    return result


def family_summary() -> list[dict[str, Any]]:
    """Each known family: installed or not, and what installs it."""
    return [{"family": f.key, "title": f.title, "installed": f.installed, "install": f.install} for f in FAMILIES]


def is_main_variant(entry: EnvEntry) -> bool:
    """The ids shown by default: for Atari, CleanRL's ``*NoFrameskip-v4`` and ALE's ``ALE/*-v5`` images."""
    if entry.error or (entry.observation == "?" and entry.installed):
        return False
    if entry.family != "atari":
        return True
    return entry.observation == "image" and (
        entry.env_id.endswith("NoFrameskip-v4") or (entry.env_id.startswith("ALE/") and entry.env_id.endswith("-v5"))
    )
