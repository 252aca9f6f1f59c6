"""XuanCe's YAML configs, read without importing XuanCe (no torch): which algorithm/env pairs have a
config, and whether extras name keys of that config.

Runs in the worker's environment, where XuanCe is installed: the host's plan calls
``python -m xuance_worker.configs check ...`` there (one short subprocess, ~0.1 s: the dry run and
the real run refuse a bad config before anything starts), and the training program imports it.
A config is XuanCe's ``basic.yaml`` updated by ``<algo>/<family>/<scenario>.yaml``, as XuanCe's own
``get_arguments`` merges them; extras update that. The worker brings configs of its own for what XuanCe
ships none for (:data:`OWN_CONFIGS`: IPPO and MAPPO on PettingZoo's board games, ``classic/tictactoe_v3``,
``classic/connect_four_v3``, whose env is :mod:`xuance_worker.boardgames`); they are listed beside
XuanCe's and found first.
"""

from __future__ import annotations

import argparse
import difflib
import importlib.util
import json
import sys
from pathlib import Path
from typing import Any

# The worker's own configs, laid out as XuanCe's (<algo>/<family>/<scenario>.yaml).
OWN_CONFIGS = Path(__file__).resolve().parent / "xuance_configs"
# Keys the worker sets itself: each has a MOSAIC way to say it.
RESERVED = {
    "running_steps": "use --total-timesteps",
    "seed": "use --seed",
    "log_dir": "TensorBoard files go to the run directory",
    "model_dir": "checkpoints go to the run directory",
    "logger": "XuanCe logs to TensorBoard here; W&B tracking is the host's (extras.wandb_*)",
    "dl_toolbox": "the worker runs XuanCe's PyTorch implementations",
    "distributed_training": "one training process per run",
    "agent": "use --algo",
    "env_name": "use --env-id FAMILY/SCENARIO",
    "env_id": "use --env-id FAMILY/SCENARIO",
}
# Python packages (besides pettingzoo) that a family's envs need in the worker's environment.
FAMILY_PACKAGES = {"football": "gfootball", "robotic_warehouse": "rware", "sc2": "smac"}
# Config folders XuanCe 1.4.4 ships without an env class to run them.
NO_ENV = {"magent2": "XuanCe 1.4.4 ships magent2 configs but no magent2 env"}
GYM_FAMILIES = {"robotic_warehouse": "rware-"}  # families whose scenarios are gymnasium ids their package registers
# Scenarios whose agents observe different sizes (an adversary beside the agents): XuanCe's configs
# for them share one policy (use_parameter_sharing), which cannot take them, so the worker turns
# sharing off; XuanCe 1.4.4's on-policy buffer stacks every agent's observations and fails anyway.
HETEROGENEOUS = ("mpe/simple_push_v3", "mpe/simple_adversary_v3")
ON_POLICY = ("mappo", "ippo", "coma")
# XuanCe's on-policy agents derive their minibatch size (``batch_size = buffer_size // n_minibatch``)
# and have no batch_size key; one given is that size (the training program sets it on the agent).
MINIBATCH = "batch_size"


def configs_root() -> Path:
    """``xuance/configs`` of the installed XuanCe, found without importing it."""
    spec = importlib.util.find_spec("xuance")
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError("xuance is not installed in this environment")
    return Path(list(spec.submodule_search_locations)[0]) / "configs"


def pairs(root: Path, algos: list[str]) -> dict[str, list[str]]:
    """``{algo: ["family/scenario", ...]}``: the multi-agent configs XuanCe ships for ``algos``, and the worker's."""
    found = {}
    for algo in algos:
        files = [*(root / algo).glob("*/*.yaml"), *(OWN_CONFIGS / algo).glob("*/*.yaml")]
        found[algo] = sorted({f"{path.parent.name}/{path.stem}" for path in files})
    return found


def config_file(root: Path, algo: str, env: str) -> Path:
    """The algorithm's config for ``env`` (``family/scenario``): the worker's own, else XuanCe's."""
    own = OWN_CONFIGS / algo / f"{env}.yaml"
    return own if own.is_file() else root / algo / f"{env}.yaml"


def _registered(prefix: str) -> list[str]:
    import gymnasium

    return sorted(name for name in gymnasium.registry if name.startswith(prefix))


def unusable(algo: str, env: str) -> str | None:
    """Why XuanCe cannot run ``algo`` on ``env`` (``family/scenario``) here; None: it can."""
    family, scenario = env.split("/", 1)
    if env in HETEROGENEOUS and algo in ON_POLICY:
        return (
            f"its agents observe different sizes, and XuanCe 1.4.4's on-policy buffer ({algo}) stacks them "
            "into one array and fails; MADDPG trains it"
        )
    if family in NO_ENV:
        return NO_ENV[family]
    package = FAMILY_PACKAGES.get(family)
    if package and importlib.util.find_spec(package) is None:
        return (
            f"env family {family!r} needs the {package!r} package, which the xuance worker's environment does not have"
        )
    if family in GYM_FAMILIES and package is not None:
        importlib.import_module(package)  # registers its ids
        known = _registered(GYM_FAMILIES[family])
        if scenario not in known:
            close = difflib.get_close_matches(scenario, known, n=1)
            return f"XuanCe's config names {scenario!r}, which the installed {package!r} does not register" + (
                f" (it has {close[0]})" if close else ""
            )
    return None


def usable_pairs(root: Path, algos: list[str]) -> dict[str, list[str]]:
    """:func:`pairs` less those this environment cannot run."""
    return {algo: [env for env in envs if unusable(algo, env) is None] for algo, envs in pairs(root, algos).items()}


def _load_yaml(path: Path) -> dict[str, Any]:
    import yaml

    with open(path, encoding="utf-8") as handle:
        data = yaml.safe_load(handle)
    return data if isinstance(data, dict) else {}


def merged(root: Path, algo: str, env: str) -> dict[str, Any]:
    """``basic.yaml`` updated by the algorithm's config for ``env`` (``family/scenario``)."""
    return {**_load_yaml(root / "basic.yaml"), **_load_yaml(config_file(root, algo, env))}


def problems(root: Path, algo: str, env: str, overrides: dict[str, Any]) -> list[str]:
    """Why ``algo`` on ``env`` with ``overrides`` cannot run, each a sentence naming the key."""
    known = pairs(root, [algo])[algo]
    if env not in known:
        family = env.split("/", 1)[0]
        same = [pair for pair in known if pair.startswith(family + "/")]
        listed = ", ".join(same or known) or "none"
        return [f"XuanCe has no {algo} config for {env}; {algo} has configs for: {listed}"]
    why = unusable(algo, env)
    found = [] if why is None else [f"{env}: {why}"]
    config = merged(root, algo, env)
    for key in sorted(overrides):
        if key in RESERVED:
            found.append(f"extras.{key} is set by the worker ({RESERVED[key]})")
        elif key == MINIBATCH and algo in ON_POLICY:
            found += minibatch_problems({**config, **overrides})
        elif key not in config:
            close = difflib.get_close_matches(key, list(config), n=1, cutoff=0.6)
            hint = f"did you mean {close[0]}?" if close else f"see xuance/configs/{algo}/{env}.yaml"
            found.append(f"extras.{key} is not a key of XuanCe's {algo} config for {env}; {hint}")
    return found


def minibatch_problems(config: dict[str, Any]) -> list[str]:
    """A ``batch_size`` for an on-policy agent: a positive integer, at most its ``buffer_size``
    (the transitions one update takes)."""
    size, buffer = config[MINIBATCH], config.get("buffer_size")
    if isinstance(size, bool) or not isinstance(size, int) or size <= 0:
        return [f"extras.{MINIBATCH} must be a positive integer (a minibatch's transitions), got {size!r}"]
    if isinstance(buffer, int) and size > buffer:
        return [f"extras.{MINIBATCH} {size} is more than buffer_size {buffer}, the transitions one update takes"]
    return []


def worker_defaults(env: str) -> dict[str, Any]:
    """Config keys the worker sets for ``env`` unless the extras do."""
    return {"use_parameter_sharing": False} if env in HETEROGENEOUS else {}


def summary(root: Path, algo: str, env: str, overrides: dict[str, Any]) -> dict[str, Any]:
    """What the plan needs to know of the effective config (its width, policy, runner)."""
    config = {**merged(root, algo, env), **worker_defaults(env), **overrides}
    return {
        key: config.get(key)
        for key in ("agent", "env_name", "parallels", "vectorize", "policy", "runner", "continuous_action", "learner")
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m xuance_worker.configs")
    parser.add_argument("command", choices=("check", "list"))
    parser.add_argument("--algo", action="append", default=[])
    parser.add_argument("--env", default="")
    parser.add_argument("--overrides", default="{}", help="a JSON object of config keys")
    ns = parser.parse_args(argv)
    root = configs_root()
    if ns.command == "list":
        print(json.dumps({"pairs": usable_pairs(root, ns.algo)}))
        return 0
    algo, overrides = ns.algo[0], json.loads(ns.overrides)
    found = problems(root, algo, ns.env, overrides)
    print(json.dumps({"problems": found, "summary": {} if found else summary(root, algo, ns.env, overrides)}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
