"""The run contract's host half, one implementation for every worker (mosaic_core.contract): the
standard keys checked once, with one wording, before any worker's own checks (RLlib, XuanCe,
CleanRL and the example refuse the same bad keys in the same line, through `mosaic run --dry-run`,
with no worker environment), and `host_flags` read back by the training programs' parser."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

import pytest

from mosaic_core import contract
from mosaic_core.config import WorkerConfig

WORKERS = {
    "rllib": ("PPO", "CartPole-v1"),
    "xuance": ("mappo", "mpe/simple_spread_v3"),
    "cleanrl": ("ppo", "CartPole-v1"),
    "example": ("random", "CartPole-v1"),
}
# checkpoint_frequency 0 is valid for every worker: the line never names it.
BAD = {
    "checkpoint_frequency": 0,
    "eval_episodes": 0,
    "eval_seed": -1,
    "torch_threads": 1.5,
    "eval_deterministic": "yes",
    "save_replay_buffer": 1,
    "eval_capture_video": True,
}
SAID = (
    "extras.eval_episodes must be an integer >= 1, got 0; "
    "extras.eval_seed must be an integer >= 0, got -1; "
    "extras.torch_threads must be an integer >= 1, got 1.5; "
    "extras.save_replay_buffer must be true or false, got 1; "
    "extras.eval_deterministic must be true or false, got 'yes'; "
    "extras.eval_capture_video: a video is recorded in mode evaluate only"
)


def dry_run(tmp_path: Path, worker: str, extras: dict) -> subprocess.CompletedProcess[str]:
    algo, env_id = WORKERS[worker]
    config = tmp_path / f"{worker}.json"
    config.write_text(json.dumps({"algo": algo, "env_id": env_id, "total_timesteps": 1000, "extras": extras}))
    mosaic = str(Path(sys.executable).parent / "mosaic")
    argv = [mosaic, "run", "--worker", worker, "--config", str(config), "--runs-dir", str(tmp_path / "runs")]
    return subprocess.run([*argv, "--dry-run"], capture_output=True, text=True, timeout=120, cwd=tmp_path)


@pytest.mark.parametrize("worker", WORKERS)
def test_every_worker_refuses_the_same_bad_keys_in_the_same_line(worker, tmp_path):
    done = dry_run(tmp_path, worker, BAD)
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2 and len(lines) == 1 and "Traceback" not in done.stderr, done.stderr
    assert lines[0] == f"mosaic: error: invalid config in {tmp_path / f'{worker}.json'}: {SAID}", lines[0]
    assert not (tmp_path / "runs").exists()


@pytest.mark.parametrize("worker", WORKERS)
def test_a_mode_is_the_contracts_or_the_workers_own(worker, tmp_path):
    done = dry_run(tmp_path, worker, {"mode": "play"})
    own = ", interactive" if worker == "cleanrl" else ""
    said = (
        f"extras.mode must be one of train, resume, evaluate{own} (resume_training and policy_eval are read "
        "as resume and evaluate), got 'play'"
    )
    assert done.returncode == 2 and done.stderr.strip().endswith(said), done.stderr


def test_the_standard_keys_are_checked_once_with_checkpoint_frequency_zero_valid():
    assert contract.standard_key_problems({"checkpoint_frequency": 0, "mode": "train"}) == []
    assert contract.standard_key_problems({"mode": "interactive"}, own_modes=("interactive",)) == []
    assert contract.standard_key_problems({"mode": "resume", "policy_path": "old/run"}) == []  # the old name
    assert contract.standard_key_problems({"mode": "resume"}) == [
        "extras.checkpoint_path is required for mode 'resume' (a checkpoint, or a run directory: its newest)"
    ]
    assert contract.standard_key_problems({"torch_threads": True}) == [
        "extras.torch_threads must be an integer >= 1, got True"
    ]


def config_of(**extras) -> WorkerConfig:
    return WorkerConfig(run_id="r", algo="PPO", env_id="E-v0", total_timesteps=5000, seed=3, extras=extras)


def test_host_flags_are_what_the_training_programs_parser_reads_back():
    extras = {
        "checkpoint_frequency": 0,
        "eval_episodes": 4,
        "eval_seed": 9,
        "torch_threads": 2,
        "eval_deterministic": True,
        "eval_every_checkpoint": True,
        "save_replay_buffer": False,
    }
    flags = contract.host_flags(config_of(**extras), checkpoint="/runs/r/checkpoints/step_10")
    ns = contract.add_host_arguments(argparse.ArgumentParser()).parse_args(flags)
    assert (ns.algo, ns.mode, ns.total_timesteps, ns.seed, ns.checkpoint) == (
        "PPO",
        "train",
        5000,
        3,
        "/runs/r/checkpoints/step_10",
    )
    assert {key: getattr(ns, key) for key in extras} == extras
    assert ns.video is None

    evaluate = config_of(mode="evaluate", eval_every_checkpoint=True, eval_capture_video=True)
    ns = contract.add_host_arguments(argparse.ArgumentParser()).parse_args(contract.host_flags(evaluate))
    assert (ns.mode, ns.eval_every_checkpoint, ns.video) == ("evaluate", False, contract.VIDEO_FILE)  # a training flag


def test_an_unset_budget_and_thread_count_are_none_on_both_sides():
    """The one "is it set" rule: a budget the config does not have (resume, evaluate) is no flag, and
    reads back as None, as torch_threads does (then the run's thread budget)."""
    config = WorkerConfig(run_id="r", algo="PPO", env_id="E-v0", total_timesteps=None, extras={"mode": "evaluate"})
    flags = contract.host_flags(config)
    assert "--total-timesteps" not in flags and "--seed" not in flags
    ns = contract.add_host_arguments(argparse.ArgumentParser()).parse_args(flags)
    assert (ns.total_timesteps, ns.torch_threads, ns.save_replay_buffer, ns.checkpoint_frequency) == (
        None,
        None,
        None,
        0,
    )


@pytest.mark.parametrize(
    "bad", [["--total-timesteps", "0"], ["--checkpoint-frequency", "-1"], ["--torch-threads", "x"]]
)
def test_the_training_programs_parser_refuses_what_the_host_never_writes(bad, capsys):
    with pytest.raises(SystemExit) as ended:
        contract.add_host_arguments(argparse.ArgumentParser()).parse_args(["--algo", "PPO", *bad])
    assert ended.value.code == 2 and f"argument {bad[0]}: must be an integer >=" in capsys.readouterr().err


@pytest.mark.parametrize("module", ["ray_worker.train", "xuance_worker.train"])
def test_the_rllib_and_xuance_programs_read_the_host_flags(module):
    """Their parsers are add_host_arguments and their own flags (parsed here without Ray or XuanCe)."""
    import importlib

    train = importlib.import_module(module)
    config = config_of(checkpoint_frequency=0, eval_every_checkpoint=True, torch_threads=2)
    ns = train.parse_args([*contract.host_flags(config), "--env", "mpe/simple_spread_v3"])
    assert (ns.total_timesteps, ns.checkpoint_frequency, ns.eval_every_checkpoint, ns.torch_threads) == (
        5000,
        0,
        True,
        2,
    )
