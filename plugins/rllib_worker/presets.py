"""``--preset tuned``: hyperparameters from RLlib 2.60's tuned examples
(``rllib/tuned_examples/<algo>/...``), per algorithm and env id."""

from __future__ import annotations

from typing import Any

from mosaic_core.errors import ConfigError

PRESETS: dict[str, dict[tuple[str, str], dict[str, Any]]] = {"tuned": {}}


def preset_params(name: str, algo: str, env_id: str) -> dict[str, Any]:
    """The preset's RLlib options for ``algo`` on ``env_id``, or a ConfigError naming what exists."""
    table = PRESETS.get(name)
    if table is None:
        raise ConfigError(f"--preset {name!r} is not one of the rllib worker's presets: {', '.join(PRESETS)}",
                          field="preset")
    if (algo, env_id) not in table:
        have = ", ".join(f"{a} on {e}" for a, e in sorted(table)) or "none"
        raise ConfigError(f"no {name!r} preset for {algo} on {env_id}; the rllib worker has it for {have}",
                          field="preset")
    return dict(table[(algo, env_id)])
