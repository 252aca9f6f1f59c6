"""The env families the CleanRL worker knows: which package provides each, which extra installs it.

A family is told from an env id alone (no import, no registry look-up), so the host can say
"install the atari extra" before it starts anything. In the training process,
:func:`prepare_family` makes the family's ids usable: Procgen's through our adapter
(:mod:`cleanrl_worker.procgen_compat`), ALE ids explicitly,
because ``ale-py`` registers them at import only on the gymnasium versions it was built for
(0.9.1 does on gymnasium 0.29.1, 0.10+ on 1.x; 0.12 on 0.29.1 silently registers nothing), and
on gymnasium 1.x the ids of the ``gymnasium.envs`` entry-point group (:func:`register_env_plugins`).

Nothing here imports gymnasium, ale_py or mujoco at module level.
"""

from __future__ import annotations

import contextlib
import importlib.util
import re
from dataclasses import dataclass


@dataclass(frozen=True)
class Family:
    key: str  # "atari"
    title: str  # "Atari (ALE)"
    module: str | None  # the module that provides the envs (None: gymnasium itself)
    install: str | None  # how to install it ("the 'atari' extra: pip install -e '.[atari]'")
    entry_points: tuple[str, ...]  # registry entry-point prefixes of its ids
    known_ids: tuple[str, ...]  # listed by the catalog even when the family is not installed

    @property
    def installed(self) -> bool:
        return self.module is None or importlib.util.find_spec(self.module) is not None


def _extra(name: str) -> str:
    return f"the '{name}' extra: pip install -e '.[{name}]' (or make venv EXTRAS={name})"


MUJOCO_NAMES = (
    "Ant",
    "HalfCheetah",
    "Hopper",
    "Humanoid",
    "HumanoidStandup",
    "InvertedDoublePendulum",
    "InvertedPendulum",
    "Pusher",
    "Reacher",
    "Swimmer",
    "Walker2d",
)
BOX2D_NAMES = ("BipedalWalker", "BipedalWalkerHardcore", "CarRacing", "LunarLander", "LunarLanderContinuous")
# Games CleanRL benchmarks (plain "Pong-v4" style ids are only recognised for these).
ATARI_GAMES = (
    "Alien",
    "Amidar",
    "Assault",
    "Asterix",
    "Asteroids",
    "Atlantis",
    "BankHeist",
    "BattleZone",
    "BeamRider",
    "Bowling",
    "Boxing",
    "Breakout",
    "Centipede",
    "ChopperCommand",
    "CrazyClimber",
    "DemonAttack",
    "DoubleDunk",
    "Enduro",
    "FishingDerby",
    "Freeway",
    "Frostbite",
    "Gopher",
    "Gravitar",
    "IceHockey",
    "Jamesbond",
    "Kangaroo",
    "Krull",
    "KungFuMaster",
    "MontezumaRevenge",
    "MsPacman",
    "NameThisGame",
    "Pitfall",
    "Pong",
    "PrivateEye",
    "Qbert",
    "Riverraid",
    "RoadRunner",
    "Robotank",
    "Seaquest",
    "SpaceInvaders",
    "StarGunner",
    "Tennis",
    "TimePilot",
    "Tutankham",
    "UpNDown",
    "Venture",
    "VideoPinball",
    "WizardOfWor",
    "Zaxxon",
)

FAMILIES = (
    Family(
        "classic_control",
        "Classic control",
        None,
        None,
        ("gymnasium.envs.classic_control",),
        ("CartPole-v1", "Acrobot-v1", "MountainCar-v0", "MountainCarContinuous-v0", "Pendulum-v1"),
    ),
    Family(
        "box2d",
        "Box2D",
        "Box2D",
        "gymnasium's box2d extra: pip install 'gymnasium[box2d]'",
        ("gymnasium.envs.box2d",),
        ("LunarLander-v2", "BipedalWalker-v3", "CarRacing-v2"),
    ),
    Family(
        "mujoco",
        "MuJoCo",
        "mujoco",
        _extra("mujoco"),
        ("gymnasium.envs.mujoco",),
        tuple(f"{name}-v4" for name in MUJOCO_NAMES) + tuple(f"{name}-v5" for name in MUJOCO_NAMES),
    ),
    Family(
        "atari",
        "Atari (ALE)",
        "ale_py",
        _extra("atari"),
        ("ale_py", "shimmy.atari"),
        ("BreakoutNoFrameskip-v4", "PongNoFrameskip-v4", "ALE/Breakout-v5", "ALE/Pong-v5"),
    ),
    Family(
        "minigrid",
        "MiniGrid / BabyAI",
        "minigrid",
        _extra("minigrid"),
        ("minigrid",),
        ("MiniGrid-Empty-5x5-v0", "MiniGrid-DoorKey-5x5-v0", "BabyAI-GoToLocal-v0"),
    ),
    Family(
        "procgen",
        "Procgen",
        "procgen",
        _extra("procgen"),
        ("cleanrl_worker.procgen_compat",),
        ("procgen-coinrun-v0", "procgen-starpilot-v0", "procgen-bigfish-v0"),
    ),
    Family(
        "dm_control",
        "DM Control (shimmy)",
        "shimmy",
        _extra("dm-control"),
        ("shimmy.registration",),
        ("dm_control/cartpole-balance-v0", "dm_control/cheetah-run-v0", "dm_control/walker-walk-v0"),
    ),
)
BY_KEY = {family.key: family for family in FAMILIES}

_VERSIONED = re.compile(r"^(?:(?P<ns>[\w.-]+)/)?(?P<name>[\w:.-]+?)(?:-v(?P<version>\d+))?$")
_ATARI_SUFFIXES = ("NoFrameskip", "Deterministic", "-ram")


def family_of(env_id: str) -> Family | None:
    """The family an env id belongs to, told from the id alone (None: not one we know)."""
    match = _VERSIONED.match(env_id.rpartition(":")[2])
    if match is None:
        return None
    name = match["name"]
    if match["ns"] == "dm_control":
        return BY_KEY["dm_control"]
    if name.startswith("procgen-"):
        return BY_KEY["procgen"]
    if match["ns"] == "ALE" or name.endswith(_ATARI_SUFFIXES) or name.replace("-ram", "") in ATARI_GAMES:
        return BY_KEY["atari"]
    if name in MUJOCO_NAMES:
        return BY_KEY["mujoco"]
    if name in BOX2D_NAMES:
        return BY_KEY["box2d"]
    if name.startswith(("MiniGrid-", "BabyAI-")):
        return BY_KEY["minigrid"]
    if name in ("CartPole", "Acrobot", "MountainCar", "MountainCarContinuous", "Pendulum"):
        return BY_KEY["classic_control"]
    return None


def missing_family_message(env_id: str) -> str | None:
    """One line naming what to install when ``env_id``'s family is not installed, else None."""
    family = family_of(env_id)
    if family is None or family.installed:
        return None
    return f"env {env_id} is a {family.title} env and {family.module} is not installed: install {family.install}"


def register_atari() -> None:
    """Make the ALE ids (``ALE/*-v5``, ``*NoFrameskip-v4``, …) known to gymnasium, on any version."""
    import ale_py
    import gymnasium as gym

    if hasattr(gym, "register_envs"):  # gymnasium >= 1.0: the documented way
        gym.register_envs(ale_py)
    from ale_py import registration

    for probe, names in (
        ("PongNoFrameskip-v4", ("register_v0_v4_envs", "register_legacy_gym_envs")),
        ("ALE/Pong-v5", ("register_v5_envs", "register_gym_envs")),
    ):
        register = next((getattr(registration, name) for name in names if hasattr(registration, name)), None)
        if probe not in gym.registry and register is not None:
            register()


def register_env_plugins() -> None:
    """The ids installed packages declare in gymnasium's ``gymnasium.envs`` entry-point group (the
    arena's ``mosaic/...``): gymnasium 0.29 registers them when imported, 1.x no longer does, so on
    1.x each declared function is called here as 0.29 would. A broken one is skipped, as 0.29 warns."""
    import gymnasium as gym

    if gym.__version__.startswith("0."):
        return
    from importlib.metadata import entry_points

    for point in entry_points(group="gymnasium.envs"):
        with contextlib.suppress(Exception):
            point.load()()


def prepare_family(env_id: str) -> None:
    """In the training process: make ``env_id``'s family usable (register ids) when it is installed."""
    import gymnasium as gym

    if env_id not in gym.registry:
        register_env_plugins()
    family = family_of(env_id)
    if family is not None and family.key == "atari" and family.installed:
        register_atari()
    elif family is not None and family.key == "procgen" and family.installed:
        from cleanrl_worker import procgen_compat

        procgen_compat.register()


def headless_rendering_env(env_id: str, environ: dict[str, str]) -> dict[str, str]:
    """``MUJOCO_GL=egl`` for a MuJoCo or DM Control env on a machine without a display, unless already set.

    MuJoCo renders headless through EGL here (osmesa and glfw fail); an explicit
    ``MUJOCO_GL`` of the user's always wins.
    """
    family = family_of(env_id)
    if family is None or family.key not in ("mujoco", "dm_control") or "MUJOCO_GL" in environ or environ.get("DISPLAY"):
        return {}
    return {"MUJOCO_GL": "egl"}
