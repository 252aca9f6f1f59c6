"""Reading a script's ``Args`` without importing it, and checking an argv the way tyro would."""

import json
import sys
import types
from pathlib import Path

import pytest
import tyro

from cleanrl_worker import registry
from cleanrl_worker.script_args import (
    COMPUTED,
    REQUIRED,
    NoArgsClassError,
    check_script_argv,
    read_script_args,
    validate_argv,
)
from mosaic_core.errors import UsageError

CHECKOUT = Path(__file__).resolve().parents[1] / "fixtures" / "cleanrl_checkout"

TYPED = """
raise RuntimeError("this script must never be imported by the Args reader")
"""
PURE = '''
import os
from dataclasses import dataclass, field
from typing import Literal, Optional, Union


@dataclass
class Optimizer:
    eps: float = 1e-5


@dataclass
class Base:
    seed: int = 1
    """seed of the experiment"""


@dataclass
class Args(Base):
    exp_name: str = os.path.basename(__file__)[: -len(".py")]
    """the name of this experiment"""
    cuda: bool = True
    env_id: str = "CartPole-v1"
    total_timesteps: int = 500000
    learning_rate: float = 2.5e-4
    target_kl: float = None
    max_steps: Optional[int] = None
    clip: "float | None" = 0.2
    width: Union[int, None] = 64
    hidden: list[int] = field(default_factory=lambda: [64, 64])
    tags: tuple[str, ...] = ()
    scale: float = -1.5
    schedule: Literal["linear", "cosine"] = "linear"
    required_thing: int = field(default=3)
    anneal: Optional[bool] = None
    optimizer: Optimizer = field(default_factory=Optimizer)
'''


@pytest.fixture
def pure(tmp_path):
    path = tmp_path / "pure_algo.py"
    path.write_text(PURE)
    return path


def tyro_accepts(path: Path, argv: list[str]) -> bool:
    module = types.ModuleType("pure_algo")
    module.__file__ = str(path)
    sys.modules["pure_algo"] = module
    try:
        exec(compile(path.read_text(), str(path), "exec"), module.__dict__)
        tyro.cli(module.Args, args=argv)
    except SystemExit:
        return False
    finally:
        del sys.modules["pure_algo"]
    return True


# ---------------------------------------------------------------------------- reading
def test_fixture_dqn_fields_defaults_and_help():
    args = read_script_args(CHECKOUT / "cleanrl" / "dqn.py")
    names = list(args.fields)
    assert names[:3] == ["exp_name", "seed", "torch_deterministic"] and names[-1] == "train_frequency"
    f = args.fields
    assert f["exp_name"].default is COMPUTED and f["exp_name"].default_text.startswith("os.path.basename(__file__)")
    assert (f["learning_rate"].kind, f["learning_rate"].default) == ("float", 2.5e-4)
    assert (f["total_timesteps"].annotation, f["total_timesteps"].default) == ("int", 500000)
    assert f["track"].kind == "bool" and f["track"].flag == "--track"
    assert f["wandb_entity"].optional and f["wandb_entity"].default is None
    assert f["buffer_size"].help == "the replay memory buffer size"
    assert f["target_network_frequency"].flag == "--target-network-frequency"
    json.dumps({n: x.to_dict() for n, x in f.items()})


def test_fixture_ppo_runtime_fields_and_optional_float():
    f = read_script_args(CHECKOUT / "cleanrl" / "ppo.py").fields
    assert f["target_kl"].kind == "float" and f["target_kl"].optional
    assert f["batch_size"].default == 0 and f["anneal_lr"].default is True


def test_annotations_bases_and_field_defaults(pure):
    f = read_script_args(pure).fields
    assert list(f)[0] == "seed"  # base-class fields first, as dataclasses order them
    assert (f["max_steps"].kind, f["max_steps"].optional) == ("int", True)
    assert (f["clip"].kind, f["clip"].optional) == ("float", True)
    assert (f["width"].kind, f["width"].optional) == ("int", True)
    assert (f["hidden"].kind, f["hidden"].item_kind, f["hidden"].default) == ("list", "int", [64, 64])
    assert (f["tags"].kind, f["tags"].default) == ("list", ())
    assert f["scale"].default == -1.5 and f["required_thing"].default == 3
    assert f["schedule"].choices == ("linear", "cosine")
    assert f["seed"].help == "seed of the experiment"


def test_the_script_is_never_imported(tmp_path):
    path = tmp_path / "explosive.py"
    path.write_text(TYPED + PURE)
    assert "learning_rate" in read_script_args(path).fields


def test_script_without_args_is_reported_clearly(tmp_path):
    path = tmp_path / "argparse_style.py"
    path.write_text("import argparse\n\ndef parse_args():\n    return argparse.ArgumentParser().parse_args()\n")
    with pytest.raises(NoArgsClassError) as info:
        read_script_args(path)
    assert "defines no `Args` class" in str(info.value) and str(path) in str(info.value)
    notes = check_script_argv(path, ["--anything", "1"])  # not checked, and it says so
    assert len(notes) == 1 and "cannot be checked" in notes[0]


def test_unreadable_scripts_are_usage_errors(tmp_path):
    bad = tmp_path / "broken.py"
    bad.write_text("class Args:\n    x: int = \n")
    with pytest.raises(UsageError, match="not valid Python at line 2"):
        read_script_args(bad)
    with pytest.raises(UsageError, match="cannot read script"):
        read_script_args(tmp_path / "missing.py")


def test_required_fields_and_args_nested_in_a_block(tmp_path):
    path = tmp_path / "nested.py"
    path.write_text("if True:\n    class Args:\n        total_timesteps: int\n")
    assert read_script_args(path).fields["total_timesteps"].default is REQUIRED


# ---------------------------------------------------------------------------- validating
def test_problems_name_the_flag():
    args = read_script_args(CHECKOUT / "cleanrl" / "dqn.py")
    problems = validate_argv(
        [
            "--lerning-rate",
            "0.1",
            "--total-timesteps",
            "abc",
            "--track",
            "False",
            "--no-num-envs",
            "--gamma",
            "--seed",
            "1",
            "2",
        ],
        args,
    )
    assert problems == [
        "unknown flag --lerning-rate (did you mean --learning-rate?)",
        "--total-timesteps expects an integer, got 'abc'",
        "--track is a bool flag and takes no value (write --track or --no-track), got '--track False'",
        "unknown flag --no-num-envs (did you mean --num-envs?)",
        "--gamma needs a value",
        "--seed takes one value, got 2: 1 2",
    ]
    assert validate_argv(["--track=False"], args) == [
        "--track is a bool flag and takes no value (write --track or --no-track), got '--track=False'"
    ]
    assert validate_argv(["stray"], args) == ["unexpected argument 'stray' (no flag before it takes a value)"]


def test_valid_argv_passes():
    args = read_script_args(CHECKOUT / "cleanrl" / "ppo.py")
    argv = [
        "--env-id",
        "CartPole-v1",
        "--total-timesteps",
        "1_000",
        "--seed=1",
        "--no-anneal-lr",
        "--track",
        "--target-kl",
        "None",
        "--learning-rate",
        "1e-3",
        "--wandb-entity",
        "None",
        "--exp_name",
        "x",
    ]
    assert validate_argv(argv, args) == []
    assert validate_argv(["--seed=-1", "--learning-rate", "-1e-3"], args, ranges=False) == []  # tyro's own rules
    assert validate_argv(["--seed=-1", "--learning-rate", "-1e-3"], args) == [
        "--seed must be from 0 to 4294967295 (numpy's seeding range), got -1",
        "--learning-rate must be > 0, got -1e-3",
    ]


# Each argv is checked by us and by tyro itself against the same Args: the verdicts must agree.
AGREEMENT = [
    [],
    ["--seed", "3"],
    ["--seed", "x"],
    ["--seed"],
    ["--seed", "1", "2"],
    ["--seed=-2"],
    ["--seed", "-2"],
    ["--cuda"],
    ["--no-cuda"],
    ["--cuda", "True"],
    ["--cuda=False"],
    ["--no-seed"],
    ["--learning-rate", "inf"],
    ["--learning-rate", "1e-3"],
    ["--learning-rate", "fast"],
    ["--target-kl", "None"],
    ["--total-timesteps", "None"],
    ["--max-steps", "None"],
    ["--max-steps", "4"],
    ["--clip", "None"],
    ["--width", "None"],
    ["--hidden"],
    ["--hidden", "1", "2"],
    ["--hidden", "1", "x"],
    ["--tags", "a", "b"],
    ["--schedule", "cosine"],
    ["--schedule", "step"],
    ["--exp-name", "--x"],
    ["--exp-name=--x"],
    ["--env_id", "Acrobot-v1"],
    ["--envid", "x"],
    ["--anneal", "True"],
    ["--anneal"],
    ["--no-anneal"],
    ["--anneal", "None"],
    ["positional"],
    ["--scale", "-3"],
    ["--hidden", "-1", "-2"],
    ["--optimizer.eps", "0.1"],
    ["--help"],
    ["-h"],
]


@pytest.mark.parametrize("argv", AGREEMENT, ids=[" ".join(a) or "empty" for a in AGREEMENT])
def test_verdicts_agree_with_tyro(pure, argv):
    ours = validate_argv(argv, read_script_args(pure), ranges=False)  # ranges are stricter than tyro on purpose
    assert (ours == []) == tyro_accepts(pure, argv), ours


def test_check_script_argv_raises_one_line_usage_error():
    with pytest.raises(UsageError) as info:
        check_script_argv(CHECKOUT / "cleanrl" / "dqn.py", ["--lerning-rate", "1", "--seed", "x"])
    message = str(info.value)
    assert message.startswith("flags rejected by dqn.py's Args: unknown flag --lerning-rate")
    assert "--seed expects an integer" in message and info.value.exit_code == 2
    assert check_script_argv(CHECKOUT / "cleanrl" / "dqn.py", ["--seed", "2"]) == []


def test_bundled_scripts_when_present():
    names = registry.bundled_names()
    if not names:
        pytest.skip("no bundled algorithms yet")
    for name in names:
        args = read_script_args(registry.BUNDLED_DIR / f"{name}.py")
        assert {"exp_name", "seed", "env_id", "total_timesteps", "track", "cuda"} <= set(args.fields), name
        base = ["--env-id", "CartPole-v1", "--total-timesteps", "100", "--seed", "1", "--no-cuda"]
        assert validate_argv(base, args) == [], name
        assert validate_argv(["--total-timesteps", "abc"], args) == ["--total-timesteps expects an integer, got 'abc'"]


# ---------------------------------------------------------------------------- through mosaic run
def run_args(*extra):
    return ["run", "--worker", "cleanrl", "--env-id", "CartPole-v1", "--total-timesteps", "300", *extra]


def test_dry_run_rejects_an_unknown_flag_with_a_suggestion(mosaic, runs_root):
    result = mosaic(
        *run_args("--algo", "dqn", "--dry-run", "--extras", '{"lerning_rate": 0.1}'),
        env={registry.HOME_VAR: str(CHECKOUT)},
    )
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert "unknown flag --lerning-rate (did you mean --learning-rate?)" in result.stderr
    assert not runs_root.exists()


def test_dry_run_summary_for_a_checkout_script(mosaic):
    extras = {"algo_params": {"learning_starts": 50, "cuda": False}, "notes": "reserved, not a flag"}
    result = mosaic(
        *run_args("--algo", "dqn", "--dry-run", "--emit-summary", "--extras", json.dumps(extras)),
        env={registry.HOME_VAR: str(CHECKOUT)},
    )
    assert result.returncode == 0, result.stderr
    summary = json.loads(result.stdout)
    assert summary["algorithm"]["source"] == "checkout"
    assert summary["algorithm"]["checkout_root"] == str(CHECKOUT.resolve())
    assert summary["argv"][-3:] == [
        "--learning-starts=50",
        "--no-cuda",
        "--save-model",
    ]  # upstream's own flag, on by default


def test_dry_run_of_a_script_without_args_is_not_blocked(mosaic, workdir):
    (workdir / "plain.py").write_text("print('hello')\n")
    result = mosaic(*run_args("--algo", "plain.py", "--dry-run"))
    assert result.returncode == 0, result.stderr


def test_checkout_script_trains_through_mosaic_run(mosaic, runs_root):
    """The fixture's dqn imports cleanrl_utils: the checkout root must reach the child's sys.path."""
    result = mosaic(
        *run_args(
            "--algo",
            "dqn",
            "--run-id",
            "checkout-dqn",
            "--quiet",
            "--extras",
            '{"learning_starts": 50, "cleanrl_home": "%s"}' % CHECKOUT,
        )
    )
    events = result.events
    assert events[-1]["event"] == "run_completed", (events[-1], result.stderr[-2000:])
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    tb_dirs = list((runs_root / "checkout-dqn" / "runs").iterdir())
    assert len(tb_dirs) == 1 and tb_dirs[0].name.startswith("CartPole-v1__dqn__1__")
    accumulator = EventAccumulator(str(tb_dirs[0]))
    accumulator.Reload()
    returns = accumulator.Scalars("charts/episodic_return")
    assert returns and all(r.value > 0 for r in returns)
