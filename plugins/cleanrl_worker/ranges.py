"""The values CleanRL's ``Args`` fields can take, beyond their types.

Every float must be finite and every int fit in int64 (checked for any field); the fields
below have narrower ranges, known from what the scripts do with them (a count of 0 divides
by zero or loops forever, a negative frequency never fires, a seed outside numpy's range is
refused by ``np.random.seed``). A dry run checks script flags against them, naming the flag,
the value and the range. The run contract's keys a script reads (``checkpoint_frequency``,
``eval_episodes``) have the core's ranges (:data:`mosaic_core.contract.LOWEST`).
"""

from __future__ import annotations

import math

from mosaic_core import contract

INT64_MAX = 2**63 - 1
SEED_MAX = 2**32 - 1

COUNTS = (
    "num_envs",
    "num_steps",
    "num_minibatches",
    "update_epochs",
    "buffer_size",
    "batch_size",
    "train_frequency",
    "target_network_frequency",
    "policy_frequency",
    "n_atoms",
    "total_timesteps",
    "num_levels",
    "num_eval_envs",
)
NON_NEGATIVE = (
    "learning_starts",
    "eval_frequency",
    "ent_coef",
    "vf_coef",
    "clip_coef",
    "target_kl",
    "exploration_noise",
    "policy_noise",
    "noise_clip",
    "alpha",
    "max_grad_norm",
)
POSITIVE = ("learning_rate", "q_lr", "policy_lr")
UNIT_INTERVAL = ("gamma", "gae_lambda", "tau", "start_e", "end_e", "exploration_fraction")

RANGES: dict[str, tuple[float, float, str]] = {
    **{name: (low, INT64_MAX, f">= {low}") for name, low in contract.LOWEST.items()},  # the run contract's keys
    **{name: (1, INT64_MAX, ">= 1") for name in COUNTS},
    **{name: (0, math.inf, ">= 0") for name in NON_NEGATIVE},
    **{name: (math.ulp(0.0), math.inf, "> 0") for name in POSITIVE},
    **{name: (0.0, 1.0, "from 0 to 1") for name in UNIT_INTERVAL},
    "seed": (0, SEED_MAX, f"from 0 to {SEED_MAX} (numpy's seeding range)"),
}


def range_problem(name: str, kind: str, text: str) -> str | None:
    """Why ``text`` is not a usable value of field ``name`` of kind int/float, or None."""
    try:
        value = int(text) if kind == "int" else float(text)
    except ValueError:
        return None  # the type check reports it
    if kind == "float" and not math.isfinite(value):
        return f"must be a finite number, got {text}"
    if kind == "int" and not -INT64_MAX - 1 <= value <= INT64_MAX:
        return f"must fit in a 64-bit integer, got {text}"
    low, high, words = RANGES.get(name, (-math.inf, math.inf, ""))
    if not low <= value <= high:
        return f"must be {words}, got {text}"
    return None
