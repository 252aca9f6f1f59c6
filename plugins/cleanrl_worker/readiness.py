"""MOSAIC's documented CleanRL algorithms and whether each can run on this machine now.

:data:`DOCUMENTED` is MOSAIC's registry table (34 names: its ``DEFAULT_ALGO_REGISTRY`` plus the
Isaac Gym script its docs name), each with what its script needs: the modules it imports beyond
the ``cleanrl`` extra (and its default env's family), the extra that installs them, and what no
install here can give (a download at run time, hardware). :func:`status_of` computes the status
from the sources the registry found and from ``importlib.util.find_spec``: nothing is imported.
"""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass
from importlib import metadata

# What an extra's script imports; the extra that installs it (pyproject.toml).
NEEDS = {
    "cleanrl": ("torch", "tyro", "tensorboard", "gymnasium"),
    "atari": ("ale_py", "cv2"),
    "mujoco": ("mujoco",),
    "envpool": ("envpool",),
    "procgen": ("procgen", "gym"),  # upstream's Procgen scripts use gym 0.23's wrappers
    "jax": ("jax", "flax", "optax"),
    "pettingzoo": ("pettingzoo", "supersuit", "multi_agent_ale_py"),
}
LANE_PINS = ("torch", "numpy", "gymnasium")  # kept at their installed versions by the install command

HUB = "downloads its teacher model from the Hugging Face hub at run time (no network here)"
ISAAC = "needs NVIDIA Isaac Gym (not on PyPI; a CUDA GPU)"
OLD_ENVPOOL = (
    "upstream's EnvPool scripts use envpool<0.7's old gym API (4-value step, gym spaces), which has no "
    "Python 3.11 wheel; envpool 0.8+ speaks gymnasium"
)
ROMS = "PettingZoo's multi-agent Atari needs multi_agent_ale_py and AutoROM's ROM download (no wheel for Python 3.11, no network here)"


@dataclass(frozen=True)
class Documented:
    family: str  # MOSAIC's table: "PPO", "Policy optimization", "Q-learning", "Distributional", "Continuous control"
    extras: tuple[str, ...] = ()  # beyond "cleanrl"
    blocker: str | None = None  # what no install here can give
    note: str = ""


def _d(family: str, *extras: str, blocker: str | None = None, note: str = "") -> Documented:
    return Documented(family, extras, blocker, note)


DOCUMENTED: dict[str, Documented] = {
    "ppo": _d("PPO"),
    "ppo_continuous_action": _d("PPO", "mujoco", note="default env HalfCheetah-v4 (MuJoCo)"),
    "ppo_atari": _d("PPO", "atari"),
    "ppo_atari_multigpu": _d("PPO", "atari", note="one process here; several GPUs through torchrun"),
    "ppo_atari_lstm": _d("PPO", "atari"),
    "ppo_atari_envpool": _d("PPO", "envpool"),
    "ppo_atari_envpool_xla_jax": _d("PPO", "envpool", "jax"),
    "ppo_atari_envpool_xla_jax_scan": _d("PPO", "envpool", "jax"),
    "ppo_procgen": _d("PPO", "procgen"),
    "ppo_rnd_envpool": _d("PPO", "envpool"),
    "ppo_pettingzoo_ma_atari": _d("PPO", "pettingzoo", blocker=ROMS),
    "ppo_continuous_action_isaacgym": _d("PPO", blocker=ISAAC),
    "ppg_procgen": _d("Policy optimization", "procgen"),
    "pqn": _d("Policy optimization"),
    "pqn_atari_envpool": _d("Policy optimization", "envpool"),
    "pqn_atari_envpool_lstm": _d("Policy optimization", "envpool"),
    "rpo_continuous_action": _d("Policy optimization", "mujoco", note="default env HalfCheetah-v4 (MuJoCo)"),
    "dqn": _d("Q-learning"),
    "dqn_atari": _d("Q-learning", "atari"),
    "dqn_atari_jax": _d("Q-learning", "atari", "jax"),
    "dqn_jax": _d("Q-learning", "jax"),
    "rainbow_atari": _d("Q-learning", "atari"),
    "qdagger_dqn_atari_impalacnn": _d("Q-learning", "atari", blocker=HUB),
    "qdagger_dqn_atari_jax_impalacnn": _d("Q-learning", "atari", "jax", blocker=HUB),
    "c51": _d("Distributional"),
    "c51_jax": _d("Distributional", "jax"),
    "c51_atari": _d("Distributional", "atari"),
    "c51_atari_jax": _d("Distributional", "atari", "jax"),
    "ddpg_continuous_action": _d("Continuous control", "mujoco", note="default env Hopper-v4 (MuJoCo)"),
    "ddpg_continuous_action_jax": _d("Continuous control", "mujoco", "jax", note="default env Hopper-v4 (MuJoCo)"),
    "td3_continuous_action": _d("Continuous control", "mujoco", note="default env Hopper-v4 (MuJoCo)"),
    "td3_continuous_action_jax": _d("Continuous control", "mujoco", "jax", note="default env Hopper-v4 (MuJoCo)"),
    "sac_continuous_action": _d("Continuous control", "mujoco", note="default env Hopper-v4 (MuJoCo)"),
    "sac_atari": _d("Continuous control", "atari"),
}
# MOSAIC maps its patched ppo to the worker's own copy and every other name to upstream's module.
MOSAIC_MODULES = {name: "cleanrl_worker.algorithms.ppo" if name == "ppo" else f"cleanrl.{name}" for name in DOCUMENTED}


@dataclass(frozen=True)
class Status:
    state: str  # "ready", "needs_extra", "needs_checkout", "cannot_run"
    detail: str
    install: str | None = None  # the exact command for needs_extra

    def to_dict(self) -> dict[str, str | None]:
        return {"state": self.state, "detail": self.detail, "install": self.install}

    @property
    def text(self) -> str:
        return {
            "ready": "ready",
            "needs_extra": f"needs {self.detail}: {self.install}",
            "needs_checkout": f"needs a checkout: {self.detail}",
            "cannot_run": f"cannot run here: {self.detail}",
        }[self.state]


def _found(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


def _old_envpool() -> bool:
    """Whether the envpool installed here is one upstream's EnvPool scripts run on (< 0.7)."""
    try:
        major, minor = (int(part) for part in metadata.version("envpool").split(".")[:2])
    except (metadata.PackageNotFoundError, ValueError):
        return False
    return (major, minor) < (0, 7)


def missing_extras(extras: tuple[str, ...]) -> list[str]:
    """The extras (``cleanrl`` always counted) some of whose modules are not importable here."""
    return [extra for extra in ("cleanrl", *extras) if not all(_found(m) for m in NEEDS[extra])]


def install_command(extras: list[str]) -> str:
    """One command that adds ``extras`` to this venv, keeping the lane's torch/numpy/gymnasium."""
    pins = []
    for name in LANE_PINS:
        try:
            pins.append(f"{name}=={metadata.version(name).split('+')[0]}")
        except metadata.PackageNotFoundError:
            pins.append("torch==2.13.0" if name == "torch" else "")
    return " ".join(["pip install -e '.[" + ",".join(extras) + "]'", *filter(None, pins)])


def status_of(name: str, sources: tuple[str, ...], extras: tuple[str, ...] = ()) -> Status:
    """Whether ``name`` (found in ``sources``, registry order) can run here now.

    ``extras`` are the extras a name outside :data:`DOCUMENTED` needs (an entry point's own)."""
    entry = DOCUMENTED.get(name)
    if entry is not None:
        extras = entry.extras
        if entry.blocker and not (name == "ppo_continuous_action_isaacgym" and _found("isaacgym")):
            return Status("cannot_run", entry.blocker)
    if "envpool" in extras and (not sources or sources[0] not in ("bundled", "plugin")) and not _old_envpool():
        return Status(
            "cannot_run",
            OLD_ENVPOOL
            + ("; the bundled ppo_atari_envpool runs on envpool 1.2.5" if name == "ppo_atari_envpool" else ""),
        )
    missing = missing_extras(tuple(extras))
    install = install_command(missing) if missing else None
    if not sources:
        then = f"; then extra {', '.join(missing)}: {install}" if missing else ""
        return Status(
            "needs_checkout", f"an upstream CleanRL checkout (MOSAIC_CLEANRL_HOME or --cleanrl-home){then}", install
        )
    if missing:
        return Status("needs_extra", "extra " + ", ".join(missing), install)
    return Status("ready", entry.note if entry else "")
