"""Tuned presets (``--preset``), ``mosaic algos presets`` and ``mosaic algos show``, through the real CLI."""

from __future__ import annotations

import json
import subprocess
import sys

from cleanrl_worker.presets import all_presets, given_fields
from cleanrl_worker.registry import resolve
from cleanrl_worker.script_args import read_script_args

PENDULUM = ["run", "--worker", "cleanrl", "--algo", "ppo_continuous_action", "--env-id", "Pendulum-v1"]


def test_a_preset_is_applied_below_extras_and_command_line_flags(mosaic):
    result = mosaic(
        *PENDULUM, "--preset", "tuned", "--gamma", "0.95", "--extras", '{"num_envs": 2}', "--dry-run", "--emit-summary"
    )
    assert result.returncode == 0, result.stderr
    summary = json.loads(result.stdout)
    argv = summary["argv"]
    assert "--num-steps=1024" in argv and "--update-epochs=10" in argv and "--no-anneal-lr" in argv
    assert "--num-envs=2" in argv and "--num-envs=4" not in argv  # extras beat the preset
    assert argv[-3:] == ["--gamma", "0.95", "--save-model"] and "--gamma=0.9" not in argv  # so do typed flags
    assert summary["preset"]["applied"]["num_minibatches"] == 64
    assert summary["preset"]["overridden"] == ["gamma", "num_envs"]
    assert "hyperparams/ppo.yml" in summary["preset"]["source"]
    assert summary["config"]["total_timesteps"] == 100000  # the preset's budget (RL Zoo's n_timesteps)
    assert summary["config"]["extras"]["preset"] == "tuned"  # recorded: --from repeats it
    plain = mosaic(*PENDULUM, "--preset", "tuned", "--total-timesteps", "5000", "--dry-run")
    assert plain.returncode == 0 and "preset tuned for Pendulum-v1: num_envs=4" in plain.stderr


def test_a_missing_preset_is_one_line_naming_what_exists(mosaic, runs_root):
    env = mosaic(
        "run", "--worker", "cleanrl", "--algo", "ppo", "--env-id", "Pendulum-v1", "--preset", "tuned", "--dry-run"
    )
    assert env.returncode == 2 and len(env.stderr.strip().splitlines()) == 1
    assert "no 'tuned' preset for ppo on Pendulum-v1; ppo has it for Acrobot-v1, CartPole-v1" in env.stderr
    algo = mosaic("run", "--worker", "cleanrl", "--algo", "c51", "--env-id", "CartPole-v1", "--preset", "tuned")
    assert algo.returncode == 2 and "presets (tuned) exist for dqn, ppo, ppo_continuous_action" in algo.stderr
    name = mosaic(*PENDULUM, "--preset", "fast", "--extras", '{"preset": "tuned"}', "--dry-run")
    assert name.returncode == 2 and "--preset fast and extras.preset 'tuned' disagree" in name.stderr
    assert "Traceback" not in env.stderr + algo.stderr + name.stderr and not runs_root.exists()


def test_every_preset_names_its_source_and_only_fields_of_its_script():
    presets = all_presets()
    assert {(p.algo, p.env_id) for p in presets} >= {
        ("ppo", "CartPole-v1"),
        ("dqn", "CartPole-v1"),
        ("ppo_continuous_action", "Pendulum-v1"),
        ("sac_continuous_action", "Pendulum-v1"),
        ("td3_continuous_action", "Pendulum-v1"),
    }
    for preset in presets:
        fields = read_script_args(resolve(preset.algo).script).fields
        assert preset.source and set(preset.flags) <= set(fields), preset
    assert given_fields(["--num-envs=8", "--no-anneal-lr", "--gamma", "0.9"]) == {"num_envs", "anneal_lr", "gamma"}


def test_algos_presets_lists_them(mosaic):
    table = mosaic("algos", "presets", "ppo_continuous_action", env={"COLUMNS": "200"})
    assert table.returncode == 0 and "Pendulum-v1" in table.stdout and "num_minibatches=64" in table.stdout
    listed = json.loads(mosaic("algos", "presets", "--json").stdout)
    dqn = next(p for p in listed if (p["algo"], p["env_id"]) == ("dqn", "CartPole-v1"))
    assert dqn["name"] == "tuned" and dqn["flags"]["train_frequency"] == 4 and dqn["total_timesteps"] == 200000
    unknown = mosaic("algos", "presets", "c51")
    assert unknown.returncode == 2 and "no presets for algo 'c51'" in unknown.stderr


def test_algos_show_prints_the_scripts_flags_without_torch(mosaic):
    table = mosaic("algos", "show", "ppo", env={"COLUMNS": "200"})
    assert table.returncode == 0, table.stderr
    assert (
        "--learning-rate" in table.stdout
        and "0.00025" in table.stdout
        and "the learning rate of the optimizer" in table.stdout
    )
    assert "--anneal-lr / --no-anneal-lr" in table.stdout and "presets: tuned" in table.stdout
    shown = json.loads(mosaic("algos", "show", "dqn", "--json").stdout)
    flags = {f["name"]: f for f in shown["flags"]}
    assert flags["buffer_size"]["annotation"] == "int" and flags["buffer_size"]["default"] == 10000
    code = (
        "import sys; from mosaic_core.cli.main import main; rc = main(['algos', 'show', 'ppo', '--json']); "
        "assert 'torch' not in sys.modules, 'torch imported'; sys.exit(rc)"
    )
    quiet = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert quiet.returncode == 0, quiet.stderr
    missing = mosaic("algos", "show")
    assert missing.returncode == 2 and "mosaic algos show needs ALGO" in missing.stderr


def test_config_defaults_may_fill_extras_keys_the_user_left_out():
    from mosaic_core.config import build_config

    config = build_config(
        {"run_id": "r1", "algo": "ppo", "env_id": "CartPole-v1", "total_timesteps": 10},
        extras={"preset": "mine"},
        defaults=lambda merged: {"extras": {"preset": "tuned", "x": 1}},
    )
    assert config.extras == {"preset": "mine", "x": 1}  # the user's keys win
