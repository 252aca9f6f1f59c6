"""Curriculum runs end to end through `mosaic run`: real child processes, side channel,
stage file, lifecycle events, TensorBoard files read back with TensorBoard's own reader."""

from __future__ import annotations

import json
from pathlib import Path

import gymnasium
import pytest

TINY = Path(__file__).with_name("tiny_rollout.py")
CARTPOLES = [
    {"env_id": "CartPole-v1", "steps": 1000},
    {"env_id": "CartPole-v0", "until": "episodes>=30"},
    {"env_id": "CartPole-v1"},
]
GYMNASIUM_1 = int(gymnasium.__version__.split(".")[0]) >= 1
PRESET_FIRST = {"doorkey": "MiniGrid-DoorKey-5x5-v0", "babyai_goto": "BabyAI-GoToRedBallNoDists-v0"}


def run_curriculum(mosaic, algo, schedule, total, run_id, *extra_args, **extras):
    """``mosaic run`` with ``schedule``; the script's --env-id is the first stage's."""
    env_id = schedule[0]["env_id"] if isinstance(schedule, list) else PRESET_FIRST[schedule]
    result = mosaic(
        "run",
        "--worker",
        "cleanrl",
        "--algo",
        str(algo),
        "--env-id",
        env_id,
        "--total-timesteps",
        str(total),
        "--run-id",
        run_id,
        "--quiet",
        *extra_args,  # the closing evaluation is not counted
        "--extras",
        json.dumps({"curriculum_schedule": schedule, **extras}),
    )
    assert result.returncode == 0, result.stderr
    return result


def stage_events(result):
    return [e["payload"] for e in result.events if e["event"] == "curriculum_stage"]


def stage_curve(run_dir):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    events = EventAccumulator(str(run_dir / "runs" / "curriculum"))
    events.Reload()
    return [(e.step, int(e.value)) for e in events.Scalars("curriculum/stage")]


def check_switches(result, run_dir, total, conditions):
    """What every curriculum run must show, whatever the script and vector env."""
    names = [e["event"] for e in result.events]
    assert names[-1] == "run_completed" and names.count("run_completed") == 1
    events = stage_events(result)
    assert [e["stage"] for e in events] == list(range(len(conditions)))
    assert [e["condition"] for e in events] == conditions
    manifest = json.loads((run_dir / "manifest.json").read_text())["curriculum"]
    assert manifest["stage"] == len(conditions) - 1
    assert manifest["transitions"] == events[1:]
    steps, episodes = (sum(p[k] for p in manifest["progress"]) for k in ("steps", "episodes"))
    if GYMNASIUM_1:  # a vector step that autoresets an env is no env.step: at most one per episode
        assert total - episodes <= steps <= total
    else:
        assert steps == total  # every env step counted once
    assert manifest["progress"][-1]["steps"] > 0  # the last stage was really played
    curve = stage_curve(run_dir)
    assert [stage for _, stage in curve] == [e["stage"] for e in events]
    assert [step for step, _ in curve] == sorted(step for step, _ in curve)
    for (step, _), event in zip(curve[1:], events[1:]):
        assert step >= event["total_steps"]  # written on the script's axis, after the decision
    assert not (run_dir / "curriculum.stage").exists()
    return events


@pytest.mark.parametrize(
    "params",
    [
        {},  # SyncVectorEnv, torch.utils.tensorboard
        {"async_envs": True, "tensorboardx": True},  # AsyncVectorEnv (forked env processes), tensorboardX
        {"async_envs": True, "spawn": True},  # spawned env processes re-install MOSAIC through sitecustomize
    ],
    ids=["sync", "async-fork", "async-spawn"],
)
# The host decides a stage on a heartbeat (0.3 s) while the script trains on: on a loaded machine
# 4,096 steps could pass before the second switch is decided, so the script waits for each switch
# once its condition holds (tiny_rollout.py --hold-steps, --hold-episodes).
def test_a_tiny_script_switches_stages_in_every_sub_env(mosaic, runs_root, params):
    if params.get("tensorboardx"):
        pytest.importorskip("tensorboardX")
    held = {**params, "hold_steps": 1000, "hold_episodes": 30}  # CARTPOLES' conditions
    result = run_curriculum(mosaic, TINY, CARTPOLES, 4096, "tiny", "--heartbeat-interval", "0.3", algo_params=held)
    run_dir = runs_root / "tiny"
    events = check_switches(result, run_dir, 4096, ["start", "steps>=1000", "episodes>=30"])
    assert events[1]["stage_steps"] >= 1000 and events[2]["stage_episodes"] >= 30
    assert events[0]["until"] == "steps>=1000" and events[2]["until"] is None
    # What the script itself saw: every sub-env on v1, then every one on v0, then back on v1.
    lines = [json.loads(line) for line in (run_dir / "logs" / "cleanrl.stdout.log").read_text().splitlines()]
    seen = [(line["global_step"], set(line["env_ids"])) for line in lines]
    first_v0 = next(step for step, ids in seen if "CartPole-v0" in ids)
    assert first_v0 > 1000  # no env left stage 0 before its condition held
    assert any(ids == {"CartPole-v0"} for _, ids in seen)
    assert seen[0][1] == seen[-1][1] == {"CartPole-v1"}
    beats = [e["payload"] for e in result.events if e["event"] == "heartbeat"]
    assert all(b["curriculum"]["stage"] in (0, 1, 2) for b in beats)


def test_a_script_whose_envs_bypass_gym_make_follows_the_stages_through_env_switch(mosaic, runs_root):
    """EnvPool's way: the script makes its envs itself and asks mosaic_core.child.env_switch()."""
    schedule = [{"env_id": "CartPole-v1", "steps": 400}, {"env_id": "CartPole-v0"}]
    result = run_curriculum(mosaic, TINY.with_name("tiny_bypass.py"), schedule, 2000, "bypass")
    events = stage_events(result)
    assert [e["stage"] for e in events] == [0, 1] and events[1]["condition"] == "steps>=400"
    lines = [
        json.loads(line) for line in (runs_root / "bypass" / "logs" / "cleanrl.stdout.log").read_text().splitlines()
    ]
    played = [(line["global_step"], line["stage"], line["max_steps"]) for line in lines]
    assert played[0][1:] == (0, 500) and played[-1][1:] == (1, 200)  # CartPole-v1, then v0's time limit
    assert min(step for step, stage, _ in played if stage == 1) > 400  # not before the condition held
    manifest = json.loads((runs_root / "bypass" / "manifest.json").read_text())["curriculum"]
    assert manifest["stage"] == 1 and sum(p["steps"] for p in manifest["progress"]) == 2000


def test_the_bundled_ppo_switches_minigrid_stages(mosaic, runs_root):
    pytest.importorskip("minigrid")
    schedule = [
        {"env_id": "MiniGrid-Empty-5x5-v0", "steps": 500},
        {"env_id": "MiniGrid-DoorKey-5x5-v0", "steps": 400},
        {"env_id": "MiniGrid-Empty-6x6-v0"},
    ]
    result = run_curriculum(mosaic, "ppo", schedule, 1536, "ppo-minigrid", algo_params={"num_envs": 2, "num_steps": 64})
    check_switches(result, runs_root / "ppo-minigrid", 1536, ["start", "steps>=500", "steps>=400"])


def test_a_preset_runs_with_the_bundled_ppo(mosaic, runs_root):
    pytest.importorskip("minigrid")
    result = run_curriculum(mosaic, "ppo", "babyai_goto", 512, "preset", algo_params={"num_envs": 2, "num_steps": 128})
    assert stage_events(result) == [
        {
            "stage": 0,
            "env_id": "BabyAI-GoToRedBallNoDists-v0",
            "condition": "start",
            "stages": 4,
            "until": "episode_return>=0.8|steps>=200000",
        }
    ]
    manifest = json.loads((runs_root / "preset" / "manifest.json").read_text())["curriculum"]
    assert manifest["preset"] == "babyai_goto"
    assert manifest["progress"][0]["steps"] + (manifest["progress"][0]["episodes"] if GYMNASIUM_1 else 0) >= 512


@pytest.mark.parametrize("preset", sorted(PRESET_FIRST))
def test_presets_pass_the_dry_run(mosaic, runs_root, preset):
    pytest.importorskip("minigrid")
    result = mosaic(
        "run",
        "--worker",
        "cleanrl",
        "--algo",
        "ppo",
        "--env-id",
        PRESET_FIRST[preset],
        "--total-timesteps",
        "1000",
        "--dry-run",
        "--extras",
        json.dumps({"curriculum_schedule": preset}),
    )
    assert result.returncode == 0, result.stderr
    assert not runs_root.exists()


@pytest.mark.parametrize(
    "schedule, env_id, message",
    [
        (
            [{"env_id": "CartPole-v1", "steps": 100}, {"env_id": "Acrobot-v1"}],
            "CartPole-v1",
            "extras.curriculum_schedule[1] (Acrobot-v1): observation space differs from stage 0 (CartPole-v1): "
            "Box(shape=(6,), dtype=float32) vs Box(shape=(4,), dtype=float32); extras.curriculum_schedule[1] (Acrobot-v1): "
            "action space differs from stage 0 (CartPole-v1): Discrete(3) vs Discrete(2)",
        ),
        ("doorkeys", "CartPole-v1", "extras.curriculum_schedule: unknown preset 'doorkeys'"),
        ([], "CartPole-v1", "extras.curriculum_schedule: the list of stages is empty"),
        (
            [{"env_id": "CartPole-v1", "until": "steps=>5"}],
            "CartPole-v1",
            "extras.curriculum_schedule[0].until: 'steps=>5' is not 'metric>=value'",
        ),
        (
            [{"env_id": "CartPole-v1"}, ["CartPole-v0"]],
            "CartPole-v1",
            "extras.curriculum_schedule[1]: a stage must be an object",
        ),
        (
            [{"env_id": "CartPole-v0", "steps": 5}, {"env_id": "CartPole-v1"}],
            "CartPole-v1",
            "env_id 'CartPole-v1' differs from the first stage of extras.curriculum_schedule ('CartPole-v0')",
        ),
    ],
    ids=["incompatible-spaces", "unknown-preset", "empty", "bad-condition", "non-object-stage", "env-id"],
)
def test_bad_schedules_are_rejected_at_dry_run(mosaic, runs_root, schedule, env_id, message):
    result = mosaic(
        "run",
        "--worker",
        "cleanrl",
        "--algo",
        "ppo",
        "--env-id",
        env_id,
        "--total-timesteps",
        "1000",
        "--dry-run",
        "--extras",
        json.dumps({"curriculum_schedule": schedule}),
    )
    assert result.returncode == 2
    assert message in result.stderr
    assert "Traceback" not in result.stderr and len(result.stderr.strip().splitlines()) == 1
    assert result.stdout == ""
    assert not runs_root.exists()


def test_a_schedule_alone_sets_the_env_id(mosaic):
    """Without --env-id, a curriculum run starts in its first stage's env (mosaic_config_defaults)."""
    import json as _json

    result = mosaic(
        "run",
        "--worker",
        "cleanrl",
        "--algo",
        "ppo",
        "--total-timesteps",
        "1000",
        "--dry-run",
        "--emit-summary",
        "--extras",
        _json.dumps({"curriculum_schedule": [{"env_id": "CartPole-v1", "steps": 500}, {"env_id": "CartPole-v0"}]}),
    )
    assert result.returncode == 0, result.stderr
    assert _json.loads(result.stdout)["argv"][:1] == ["--env-id=CartPole-v1"]


@pytest.mark.parametrize("worker", ["rllib", "xuance"])
def test_a_worker_that_cannot_switch_envs_refuses_a_schedule_in_one_line(mosaic, runs_root, worker):
    """Its capabilities say supports_env_switching=False; the host refuses the switching key (no
    worker names the curriculum's key), before any environment or plugin builds a stage env."""
    result = mosaic(
        "run",
        "--worker",
        worker,
        "--algo",
        {"rllib": "PPO", "xuance": "mappo"}[worker],  # an algorithm of the worker's: the schedule is the one problem
        "--env-id",
        "CartPole-v1",
        "--dry-run",
        "--extras",
        json.dumps({"curriculum_schedule": CARTPOLES}),
    )
    assert result.returncode == 2 and result.stdout == ""
    (line,) = result.stderr.strip().splitlines()
    assert (
        f"extras.curriculum_schedule (plugin curriculum) asks for env switches during the run, and the {worker} "
        "worker cannot switch envs"
        in line
        and "Traceback" not in result.stderr
    )
    assert not runs_root.exists() or not any(runs_root.iterdir())
