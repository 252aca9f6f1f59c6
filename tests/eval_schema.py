"""What a CleanRL evaluation's ``eval.json`` holds, to hold another worker's to it: the same keys
(per episode too) and the same protocol defaults (``mosaic evaluate``: docs/run-contract.md)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


def cleanrl_evaluation(folder: Path, episodes: int = 3) -> dict[str, Any]:
    """``mosaic evaluate`` of a tiny bundled-PPO CartPole run: its ``eval.json``."""
    from tests.conftest import run_cli

    runs = folder / "cleanrl-runs"
    trained = run_cli(
        [
            "run",
            "--worker",
            "cleanrl",
            "--algo",
            "ppo",
            "--env-id",
            "CartPole-v1",
            "--total-timesteps",
            "256",
            "--num-envs",
            "2",
            "--num-steps",
            "64",
            "--run-id",
            "reference",
            "--runs-dir",
            str(runs),
            "--quiet",
        ],
        cwd=folder,
    )
    assert trained.returncode == 0, trained.stderr[-3000:]
    done = run_cli(
        ["evaluate", "reference", "--episodes", str(episodes), "--runs-dir", str(runs), "--json"], cwd=folder
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout)


def assert_same_schema(result: dict[str, Any], reference: dict[str, Any], seed: int) -> None:
    """``result`` has the schema's keys as ``reference`` has them (a key beyond the schema's, a
    worker's own like CleanRL's ``gamma``, ``discounted_returns``, ``videos``, only as CleanRL names
    it), the same episode keys (``agents`` aside: multi-agent runs add it) and protocol defaults;
    its seeds are the training ``seed``'s evaluation seeds."""
    from mosaic_core.contract import eval_result

    schema = set(
        eval_result(
            worker="w",
            algo="a",
            env_id="e",
            checkpoint="c",
            global_step=0,
            returns=[0.0],
            lengths=[1],
            seeds=[0],
            deterministic=False,
        )
    )
    assert schema <= set(reference) and schema <= set(result), (schema - set(reference), schema - set(result))
    assert set(result) - schema <= set(reference) - schema, set(result) - set(reference)
    assert result["schema"] == reference["schema"]
    assert set(result["protocol"]) == set(reference["protocol"])
    for key in ("episodes", "deterministic", "normalization"):
        assert result["protocol"][key] == reference["protocol"][key], key
    assert result["protocol"]["first_seed"] == seed + 1_000_000  # never a training seed
    for episode in result["episodes"]:
        assert set(episode) - {"agents"} == set(reference["episodes"][0]), episode
    assert [e["seed"] for e in result["episodes"]] == [seed + 1_000_000 + i for i in range(len(result["episodes"]))]
