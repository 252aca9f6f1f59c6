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

KEYS = [
    "learning_rate",
    "num_envs",
    "gamma",
    "seed",
    "mode",
    "fastlane",
    "fastlane_slot",
    "fastlane_video_mode",
    "wandb_project",
    "wandb_projekt",
    "track_wandb",
    "tensorboard_dir",
    "curriculum_schedule",
    "algo_params",
    "eval_episodes",
    "checkpoint_path",
    "policy_path",
    "notes",
    "metrics_interval_s",
    "thresh_level",
    "x",
    "schema_id",
    "mosaic_x",
    "cleanrl_home",
    "total_timesteps",
    "anneal_lr",
    "capture_video",
]
JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**70), 2**70) | st.floats() | st.text(max_size=12),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3),
    max_leaves=8,
)
EXTRAS = st.dictionaries(st.sampled_from(KEYS) | st.text(max_size=10), JSON, max_size=5)
FLAG_VALUES = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"), max_size=12)
HOST_FLAGS = [
    "--algo",
    "--env-id",
    "--total-timesteps",
    "--seed",
    "--run-id",
    "--heartbeat-interval",
    "--grace-period",
    "--worker-id",
    "--num-envs",
    "--learning-rate",
    "--from",
]
ARGV = st.lists(st.tuples(st.sampled_from(HOST_FLAGS), FLAG_VALUES).map(list), max_size=4).map(
    lambda pairs: [item for pair in pairs for item in pair]
)
CONFIG = st.one_of(
    st.binary(max_size=60),
    JSON.map(lambda v: json.dumps(v).encode()),
    st.fixed_dictionaries(
        {
            "algo": st.sampled_from(["ppo", "dqn", "nope", "x.py", ""]),
            "env_id": st.sampled_from(["CartPole-v1", "", "Nope-v0"]),
            "total_timesteps": JSON,
        }
    ).map(lambda v: json.dumps(v).encode()),
)


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


# ------------------------------------------------------------------ every field at its extremes
ODD_CHARACTERS = st.sampled_from(
    [
        "\n",
        "\r",
        "\t",
        "\x1b[31m",
        "\x07",
        "\x7f",
        "\x85",
        "\u2028",
        "\u202e",
        "\ufeff",
        "\ud800",
        "\x00",
        "/",
        "\\",
        ":",
        ",",
        "*",
        "$(id)",
        "%s",
        "{}",
        "'",
        '"',
        " ",
        "é",
        "名前",
        "🙂",
    ]
)
ODD_STRINGS = st.one_of(
    st.integers(200, 20_000).map(lambda n: "a" * n),  # very long: past a file name's 255 bytes, past a page
    st.sampled_from(
        [
            "",
            ".",
            "..",
            "../x",
            "/",
            "/etc/passwd",
            "a/b",
            "~",
            "-",
            "--help",
            "-x",
            "--seed=3",
            "con",
            "NUL",
            " ",
            "x" * 255,
            "x" * 256,
            "CartPole-v1\n",
            "ppo\x00",
        ]
    ),  # ids no file can have
    st.lists(ODD_CHARACTERS | st.text(max_size=4), min_size=1, max_size=4).map("".join),
)
ODD_NUMBERS = st.one_of(
    st.sampled_from(
        [
            0,
            -1,
            1,
            2**31,
            2**63 - 1,
            2**63,
            2**64,
            10**30,
            -(10**30),
            10**400,
            1e308,
            -1e308,
            5e-324,
            1e-300,
            0.5,
            -0.0,
            True,
            False,
        ]
    ),
    st.integers(),
    st.floats(allow_nan=False, allow_infinity=False),
)
ODD = st.one_of(
    ODD_STRINGS,
    ODD_NUMBERS,
    st.none(),
    st.lists(ODD_STRINGS | ODD_NUMBERS, max_size=2),
    st.dictionaries(ODD_STRINGS, ODD_NUMBERS, max_size=2),
)
FIELDS = ("run_id", "algo", "env_id", "total_timesteps", "seed", "worker_id")
BASE = {"algo": "ppo", "env_id": "CartPole-v1", "total_timesteps": 1000}
ODD_CONFIG = st.fixed_dictionaries(
    {},
    optional={
        **{name: ODD for name in FIELDS},
        "extras": st.dictionaries(ODD_STRINGS | st.sampled_from(KEYS), ODD, min_size=1, max_size=3),
    },
).filter(bool)


def _as_flag(value) -> str | None:
    """``value`` as a command-line flag's text (None: no argv can carry it)."""
    text = value if isinstance(value, str) else json.dumps(value)
    return None if "\x00" in text or any(0xD800 <= ord(c) <= 0xDFFF for c in text) else text


def _cli(scratch, args):
    """(exit code, stderr lines) of ``mosaic run --worker cleanrl ARGS`` in-process, cwd ``scratch``."""
    cwd = os.getcwd()
    os.chdir(scratch)
    try:
        try:
            return run_cli_command(lambda: run_worker("cleanrl", args), verbose=False)
        except SystemExit as exc:  # argparse's usage errors
            return exc.code
    finally:
        os.chdir(cwd)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(odd=ODD_CONFIG, by_flags=st.booleans())
def test_any_field_at_its_extremes_is_one_line_and_exit_2_never_an_internal_error(
    tmp_path_factory, capsys, odd, by_flags
):
    from mosaic_core.errors import UsageError
    from mosaic_core.trainer.store import DuplicateRun
    from mosaic_core.trainer.submission import PreconditionError, parse_submission
    from mosaic_core.workers import discover_workers

    scratch = tmp_path_factory.mktemp("odd")
    args = ["--runs-dir", str(scratch / "runs")]
    config = {**BASE, **odd}
    if by_flags and all(_as_flag(v) is not None for v in odd.values()):
        for name, value in config.items():
            args += (
                [f"--{name.replace('_', '-')}", _as_flag(value)]
                if name != "extras"
                else ["--extras", json.dumps(value)]
            )
    else:
        (scratch / "config.json").write_text(json.dumps(config), encoding="utf-8")
        args += ["--config", str(scratch / "config.json")]
    capsys.readouterr()
    code = _cli(scratch, [*args, "--dry-run"])
    err = capsys.readouterr().err
    assert "internal error" not in err and "Traceback" not in err, err[:2000]
    assert code in (0, 2), (code, err[:2000])
    if code == 0:
        return
    lines = err.splitlines()
    assert len(lines) == 1 or (lines and lines[0].startswith("usage:") and len(lines) == 2), err[:2000]
    assert lines[-1].startswith(("mosaic: error:", "mosaic run --worker cleanrl: error:")), err[:2000]
    assert _cli(scratch, args) == 2  # a real run is refused as the dry run was, in the same words
    assert capsys.readouterr().err == err and not (scratch / "runs").exists()  # and leaves nothing behind
    try:  # the daemon's SubmitRun: the same refusal (INVALID_ARGUMENT, FAILED_PRECONDITION, ALREADY_EXISTS)
        parse_submission(json.dumps(config), "", discover_workers(), 0, runs_dir=scratch / "runs")
    except (UsageError, PreconditionError, DuplicateRun) as exc:
        assert "\n" not in str(exc), str(exc)[:2000]
