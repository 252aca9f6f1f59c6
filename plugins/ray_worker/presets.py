"""``--preset tuned``: hyperparameters from RLlib's tuned examples, per algorithm and env id.

PPO on CartPole-v1: RLlib's ``examples/algorithms/ppo/cartpole_ppo.py`` (its target: an episode
return of 450 within 300,000 env steps)."""

from __future__ import annotations

from typing import Any

from mosaic_core import ConfigError

PRESETS: dict[str, dict[tuple[str, str], dict[str, Any]]] = {
    "tuned": {
        ("PPO", "CartPole-v1"): {
            "lr": 0.0003,
            "num_epochs": 6,
            "vf_loss_coeff": 0.01,
            "model_config": {"fcnet_hiddens": [32], "fcnet_activation": "linear", "vf_share_layers": True},
        },
    }
}


def preset_params(name: str, algo: str, env_id: str) -> dict[str, Any]:
    """The preset's RLlib options for ``algo`` on ``env_id``, or a ConfigError naming what exists."""
    table = PRESETS.get(name)
    if table is None:
        raise ConfigError(
            f"--preset {name!r} is not one of the rllib worker's presets: {', '.join(PRESETS)}", field="preset"
        )
    if (algo, env_id) not in table:
        have = ", ".join(f"{a} on {e}" for a, e in sorted(table)) or "none"
        raise ConfigError(
            f"no {name!r} preset for {algo} on {env_id}; the rllib worker has it for {have}", field="preset"
        )
    return dict(table[(algo, env_id)])
