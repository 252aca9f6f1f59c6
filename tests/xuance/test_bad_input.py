"""What the XuanCe worker refuses: one line on stderr, exit 2, no traceback, no run directory."""

import json
import subprocess

import pytest
from conftest import run_args

STAGES = [{"env_id": "mpe/simple_spread_v3", "steps": 1000}, {"env_id": "mpe/simple_push_v3"}]
CASES = {
    "single-agent": ("mappo", "CartPole-v1", {}, "is a single-agent env id"),
    "no config": ("qmix", "mpe/simple_push_v3", {}, "qmix has configs for: mpe/simple_spread_v3"),
    "unknown key": ("mappo", "mpe/simple_spread_v3", {"learnin_rate": 1e-3}, "did you mean learning_rate?"),
    "reserved key": ("mappo", "mpe/simple_spread_v3", {"running_steps": 5}, "use --total-timesteps"),
    "smac": ("qmix", "sc2/3m", {}, "needs the StarCraft II binary"),
    "old rware id": ("qmix", "robotic_warehouse/rware-tiny-2ag-v1", {}, "(it has rware-tiny-2ag-v2)"),
    "mixed observations": ("mappo", "mpe/simple_push_v3", {}, "XuanCe 1.4.4's on-policy buffer (mappo)"),
    "no env class": ("iql", "magent2/adversarial_pursuit_v4", {}, "ships magent2 configs but no magent2 env"),
    "unknown algo": ("ppo", "mpe/simple_spread_v3", {}, "not one the xuance worker runs"),
    "curriculum": (
        "mappo",
        "mpe/simple_spread_v3",
        {"curriculum_schedule": STAGES},
        "the xuance worker cannot switch envs",
    ),
    "bad mode": (
        "mappo",
        "mpe/simple_spread_v3",
        {"mode": "play"},
        "extras.mode must be one of train, resume, evaluate",
    ),
    "no checkpoint": (
        "mappo",
        "mpe/simple_spread_v3",
        {"mode": "resume", "checkpoint_path": "/nonexistent"},
        "no XuanCe checkpoint (checkpoints/step_{step}) at /nonexistent",
    ),
    "zero episodes": (
        "mappo",
        "mpe/simple_spread_v3",
        {"mode": "evaluate", "checkpoint_path": "/x", "eval_episodes": 0},
        "extras.eval_episodes must be an integer >= 1, got 0",
    ),
    "video in training": (
        "mappo",
        "mpe/simple_spread_v3",
        {"eval_capture_video": True},
        "extras.eval_capture_video: a video is recorded in mode evaluate only",
    ),
    "replay buffer": (
        "qmix",
        "mpe/simple_spread_v3",
        {"save_replay_buffer": True},
        "does not keep XuanCe's replay buffers",
    ),
}


@pytest.mark.parametrize("case", CASES)
def test_refused_in_one_line(case, xuance_env, tmp_path, monkeypatch):
    algo, env_id, extras, words = CASES[case]
    if case == "smac":
        monkeypatch.setenv("HOME", str(tmp_path))  # no ~/StarCraftII
        xuance_env = {**xuance_env, "HOME": str(tmp_path)}
        xuance_env.pop("SC2PATH", None)
    done = subprocess.run(
        run_args("bad", tmp_path / "runs", algo, extras=extras, env_id=env_id),
        env=xuance_env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and words in lines[0] and "Traceback" not in done.stderr, done.stderr
    assert not (tmp_path / "runs" / "bad").exists()


def test_an_algorithm_in_another_case_is_the_workers_own(xuance_env, tmp_path):
    done = subprocess.run(
        run_args("up", tmp_path / "runs", "MAPPO", more=("--dry-run", "--emit-summary")),
        env=xuance_env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout)
    assert (
        summary["config"]["algo"] == "mappo" and summary["command"][summary["command"].index("--algo") + 1] == "mappo"
    )
