"""What the XuanCe worker runs, as the host sees it (import-light: no xuance, torch or pettingzoo).

Env ids are ``FAMILY/SCENARIO`` as XuanCe's configs name them (``mpe/simple_spread_v3``); a bare
MPE scenario (``simple_spread_v3``) means ``mpe/``. Which pairs have a config is XuanCe's to say:
:func:`ask_configs` runs :mod:`xuance_worker.configs` in the worker's environment.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from mosaic_core import ConfigError

# MOSAIC's name -> what XuanCe's agent is (the names are XuanCe's config folders).
ALGORITHMS = {
    "mappo": "MAPPO: PPO with a centralised critic (on-policy)",
    "ippo": "IPPO: independent PPO learners (on-policy)",
    "coma": "COMA: counterfactual multi-agent policy gradients (on-policy)",
    "qmix": "QMIX: monotonic value factorisation (off-policy, discrete actions)",
    "vdn": "VDN: additive value decomposition (off-policy, discrete actions)",
    "iql": "IQL: independent Q-learners (off-policy, discrete actions)",
    "maddpg": "MADDPG: centralised critics, deterministic actors (off-policy, continuous actions)",
}
SMAC_FAMILIES = ("sc2", "smac")


def split_env_id(env_id: str) -> str:
    """``family/scenario`` for an env id; a ConfigError (exit 2) for a single-agent id."""
    if "/" not in env_id:
        if env_id.startswith("simple_"):
            return f"mpe/{env_id}"
        raise ConfigError(
            f"{env_id!r} is a single-agent env id; the xuance worker trains multi-agent PettingZoo "
            "envs (FAMILY/SCENARIO, e.g. mpe/simple_spread_v3): use --worker cleanrl for "
            "single-agent envs",
            field="env_id",
        )
    family, scenario = env_id.split("/", 1)
    if not family or not scenario or "/" in scenario or scenario.startswith("."):
        raise ConfigError(f"env id {env_id!r} must be FAMILY/SCENARIO, e.g. mpe/simple_spread_v3", field="env_id")
    if family in SMAC_FAMILIES:
        check_starcraft(scenario)
        family = "sc2"
    return f"{family}/{scenario}"


def check_starcraft(scenario: str) -> None:
    """SMAC maps need the StarCraft II binary, which no package registry provides."""
    home = Path(os.environ.get("SC2PATH") or Path.home() / "StarCraftII")
    if not (home / "Versions").is_dir():
        raise ConfigError(
            f"SMAC map {scenario!r} needs the StarCraft II binary, not found at {home} (install it "
            "from Blizzard and set SC2PATH; it is not on any package registry)",
            field="env_id",
        )


def ask_configs(python: str, args: list[str]) -> dict[str, Any]:
    """``python -m xuance_worker.configs ARGS`` in the worker's environment: its JSON answer (one that
    found no problem is remembered there, mosaic_core.ask_environment)."""
    from mosaic_core import ask_environment

    return ask_environment(python, "xuance_worker.configs", args, worker="xuance", timeout=60, remember=True)
