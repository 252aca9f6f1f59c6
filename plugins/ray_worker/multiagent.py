"""Multi-agent runs of the RLlib worker, as the host sees them (import-light: no ray, torch or pettingzoo).

A PettingZoo env is ``FAMILY/NAME``, as the XuanCe worker spells it (``mpe/simple_spread_v3``,
``classic/tictactoe_v3``, ``classic/connect_four_v3``): parallel envs (every agent acts each step)
and turn-based (AEC) ones, whose legal moves come as an action mask. Who plays which agent is
``extras.policies`` or ``extras.self_play`` (:func:`setup`); agent ids are checked in the worker's
environment, which knows the env's agents (:mod:`ray_worker.configs`).
"""

from __future__ import annotations

from typing import Any

from mosaic_core import ConfigError

FAMILIES = ("mpe", "classic", "butterfly", "sisl")  # PettingZoo 1.24's env packages
POLICIES = "policies"
SELF_PLAY = "self_play"
SHARED, SEPARATE = "shared", "separate"  # one policy for every agent; one per agent (named by its id)
SELF_PLAY_DEFAULTS = {"pool_size": 5, "snapshot_every": 5}  # past policies kept; iterations between snapshots


def is_multiagent(env_id: str) -> bool:
    """Whether ``env_id`` names a PettingZoo env (``FAMILY/NAME``, FAMILY one of :data:`FAMILIES`)."""
    family, slash, name = env_id.partition("/")
    return bool(slash) and family in FAMILIES and bool(name) and "/" not in name


def setup(extras: dict[str, Any]) -> dict[str, Any]:
    """``{"policies": ..., "self_play": {...}}`` of a run's extras, their shapes checked (a
    ConfigError naming the key); ``{}`` when it gives neither. Agent ids are checked later, in
    the worker's environment."""
    policies, self_play = extras.get(POLICIES), extras.get(SELF_PLAY)
    if policies is not None and self_play not in (None, False):
        raise ConfigError(
            "extras.policies and extras.self_play are both given: self-play maps the agents itself "
            "(main against its past snapshots); give one",
            field="extras.policies",
        )
    found: dict[str, Any] = {}
    if policies is not None:
        found[POLICIES] = _policies(policies)
    if self_play not in (None, False):
        found[SELF_PLAY] = _self_play(self_play)
    return found


def _policies(value: Any) -> Any:
    if value in (SHARED, SEPARATE):
        return value
    if isinstance(value, dict) and value and all(isinstance(k, str) and k for k in value):
        bad = [k for k, v in value.items() if not isinstance(v, str) or not v.isidentifier()]
        if not bad:
            return dict(value)
        raise ConfigError(
            f"extras.policies.{bad[0]} must be a policy name (letters, digits, _), got {value[bad[0]]!r}",
            field=f"extras.policies.{bad[0]}",
        )
    raise ConfigError(
        f'extras.policies must be "shared", "separate" or an object AGENT_ID: POLICY_NAME, got {value!r}',
        field="extras.policies",
    )


def _self_play(value: Any) -> dict[str, int]:
    if value is True:
        return dict(SELF_PLAY_DEFAULTS)
    if not isinstance(value, dict):
        raise ConfigError(
            f"extras.self_play must be true or an object (pool_size, snapshot_every), got {value!r}",
            field="extras.self_play",
        )
    unknown = sorted(set(value) - set(SELF_PLAY_DEFAULTS))
    if unknown:
        raise ConfigError(
            f"extras.self_play.{unknown[0]} is not a self-play key (pool_size, snapshot_every)",
            field=f"extras.self_play.{unknown[0]}",
        )
    found = {**SELF_PLAY_DEFAULTS, **value}
    for key, number in found.items():
        if not isinstance(number, int) or isinstance(number, bool) or number < 1:
            raise ConfigError(
                f"extras.self_play.{key} must be a whole number of at least 1, got {number!r}",
                field=f"extras.self_play.{key}",
            )
    return found


def single_agent_problem(extras: dict[str, Any], env_id: str) -> str | None:
    """A multi-agent key given for a single-agent env, in one sentence (None: none is)."""
    for key in (POLICIES, SELF_PLAY):
        if extras.get(key) not in (None, False):
            return (
                f"extras.{key} is for multi-agent PettingZoo envs (FAMILY/NAME, e.g. classic/tictactoe_v3); "
                f"{env_id} is a single-agent env"
            )
    return None
