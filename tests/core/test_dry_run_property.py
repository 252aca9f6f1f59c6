"""Property: whatever config file, extras and argv a user gives, a dry run through the CLI entry
either succeeds or raises one of the project's usage/config errors (exit 2), and writes nothing
outside its scratch directory (a dry run writes nothing at all)."""

from __future__ import annotations

import json
import os
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mosaic_core.cli.errors import run_cli_command
from mosaic_core.pipeline import run_worker

KEYS = ["learning_rate", "num_envs", "gamma", "seed", "mode", "fastlane", "fastlane_slot", "fastlane_video_mode",
        "wandb_project", "wandb_projekt", "track_wandb", "tensorboard_dir", "curriculum_schedule", "algo_params",
        "eval_episodes", "checkpoint_path", "policy_path", "notes", "metrics_interval_s", "thresh_level", "x",
        "schema_id", "mosaic_x", "cleanrl_home", "total_timesteps", "anneal_lr", "capture_video"]
JSON = st.recursive(st.none() | st.booleans() | st.integers(-2**70, 2**70) | st.floats() | st.text(max_size=12),
                    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3),
                    max_leaves=8)
EXTRAS = st.dictionaries(st.sampled_from(KEYS) | st.text(max_size=10), JSON, max_size=5)
FLAG_VALUES = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"), max_size=12)
HOST_FLAGS = ["--algo", "--env-id", "--total-timesteps", "--seed", "--run-id", "--heartbeat-interval",
              "--grace-period", "--worker-id", "--num-envs", "--learning-rate", "--from"]
ARGV = st.lists(st.tuples(st.sampled_from(HOST_FLAGS), FLAG_VALUES).map(list), max_size=4).map(
    lambda pairs: [item for pair in pairs for item in pair])
CONFIG = st.one_of(st.binary(max_size=60), JSON.map(lambda v: json.dumps(v).encode()),
                   st.fixed_dictionaries({"algo": st.sampled_from(["ppo", "dqn", "nope", "x.py", ""]),
                                          "env_id": st.sampled_from(["CartPole-v1", "", "Nope-v0"]),
                                          "total_timesteps": JSON}).map(lambda v: json.dumps(v).encode()))


def _snapshot(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*")}


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(config=st.none() | CONFIG, extras=st.none() | EXTRAS, argv=ARGV)
def test_a_dry_run_never_fails_with_anything_but_a_usage_error(tmp_path_factory, config, extras, argv):
    scratch = tmp_path_factory.mktemp("dry")
    args = ["--algo", "ppo", "--env-id", "CartPole-v1", *argv, "--dry-run", "--runs-dir", str(scratch / "runs")]
    if config is not None:
        (scratch / "config.json").write_bytes(config)
        args += ["--config", str(scratch / "config.json")]
    if extras is not None:
        args += ["--extras", json.dumps(extras)]
    before = _snapshot(scratch)
    cwd = os.getcwd()
    os.chdir(scratch)
    try:
        try:
            code = run_cli_command(lambda: run_worker("cleanrl", args), verbose=False)
        except SystemExit as exc:  # argparse's usage errors
            code = exc.code
    finally:
        os.chdir(cwd)
    assert code in (0, 2), (args, code)
    assert _snapshot(scratch) == before  # a dry run writes nothing
