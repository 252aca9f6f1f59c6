"""Bad input to `mosaic compare` and `mosaic experiment run`: one line naming what is wrong, exit
code 2, no traceback, nothing written. Runs are made here as a runs root with config.json and real
TensorBoard event files (tensorboardX writes them, TensorBoard's reader reads them back)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import run_cli


def make_run(root: Path, run_id: str, seed: int, algo: str, env_id: str, level: float) -> None:
    from tensorboardX import SummaryWriter

    run_dir = root / run_id
    (run_dir / "logs").mkdir(parents=True)
    config = {
        "run_id": run_id,
        "worker": "cleanrl",
        "algo": algo,
        "env_id": env_id,
        "total_timesteps": 1000,
        "seed": seed,
        "extras": {"experiment": "exp"},
    }
    (run_dir / "config.json").write_text(json.dumps(config))
    (run_dir / "events.jsonl").write_text(
        json.dumps({"event": "run_completed", "run_id": run_id, "seq": 1, "timestamp": 1.0, "payload": {}}) + "\n"
    )
    writer = SummaryWriter(str(run_dir / "runs" / run_id))
    for step in range(50, 1001, 50):
        writer.add_scalar("charts/episodic_return", level + seed, step)
    writer.close()


@pytest.fixture(scope="module")
def root(tmp_path_factory):
    root = tmp_path_factory.mktemp("bad") / "runs"
    for seed in (1, 2):
        make_run(root, f"ppo-s{seed}", seed, "ppo", "CartPole-v1", 100.0)
        make_run(root, f"acro-s{seed}", seed, "ppo", "Acrobot-v1", -90.0)
    make_run(root, "dqn-s1", 1, "dqn", "CartPole-v1", 50.0)
    return root


def refused(result, *words):
    assert result.returncode == 2, (result.returncode, result.stderr)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in result.stderr, result.stderr
    assert all(word in lines[0] for word in words), lines[0]


def compare(root, *args):
    return run_cli(["compare", "--runs-dir", str(root), "--reps", "200", *args], cwd=root.parent)


def test_a_group_with_one_run(root):
    refused(compare(root, "ppo-s1", "ppo-s2", "dqn-s1"), "dqn CartPole-v1", "one run", "dqn-s1")


def test_envs_mixed_without_group_by(root):
    refused(
        compare(root, "ppo-s1", "ppo-s2", "acro-s1", "acro-s2"), "2 envs", "CartPole-v1", "Acrobot-v1", "--group-by"
    )
    both = compare(root, "ppo-s1", "ppo-s2", "acro-s1", "acro-s2", "--group-by", "algo")
    assert both.returncode == 0, both.stderr
    assert "== CartPole-v1 ==" in both.stdout and "== Acrobot-v1 ==" in both.stdout


def test_a_group_by_field_no_run_has(root):
    refused(compare(root, "ppo-s1", "ppo-s2", "--group-by", "wroker"), "--group-by wroker", "no run has", "worker")


def test_a_metric_no_run_has(root):
    refused(compare(root, "ppo-s1", "ppo-s2", "--metric", "charts/nothing"), "charts/nothing", "no run has it")


def test_neither_run_nor_experiment(root):
    refused(compare(root, "nosuch"), "'nosuch'", "neither a run nor an experiment")


def test_without_rliable_s_bootstrap_compare_says_which_extra(root):
    """A Python where ``arch`` cannot be imported (None in sys.modules, as after a failed import): the
    extra is named before anything is read."""
    import subprocess
    import sys

    code = "import sys; sys.modules['arch'] = None; from mosaic_core.cli.main import main; sys.exit(main(sys.argv[1:]))"
    args = ["compare", "--runs-dir", str(root), "ppo-s1", "ppo-s2"]
    result = subprocess.run([sys.executable, "-c", code, *args], cwd=root.parent, capture_output=True, text=True)
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 1 and len(lines) == 1 and "Traceback" not in result.stderr, result.stderr
    assert lines[0] == (
        "mosaic: error: mosaic compare needs rliable, which is not installed (No module named 'arch'); "
        "pip install 'mosaic-rl[compare]'"
    )


@pytest.mark.parametrize(
    "group,words",
    [
        ('worker = "nosuch"\nalgo = "ppo"\nenv = "CartPole-v1"', ("group 1", "unknown worker 'nosuch'")),
        ('worker = "cleanrl"\nalgo = "nosuch_algo"\nenv = "CartPole-v1"', ("group 1", "refused", "nosuch_algo")),
        (
            'worker = "cleanrl"\nalgo = "ppo"\nenv = "CartPole-v1"\nlearning_rate = 0.1',
            ("learning_rate", "unknown key"),
        ),
        (
            'worker = "cleanrl"\nalgo = "ppo"\nenv = "CartPole-v1"\noverrides = { nosuch_param = 1 }',
            ("group 1", "refused", "nosuch-param"),
        ),
    ],
)
def test_a_bad_spec_starts_nothing(tmp_path, group, words):
    (tmp_path / "spec.toml").write_text(f'name = "x"\nseeds = 2\ntotal_timesteps = 500\n[[group]]\n{group}\n')
    refused(run_cli(["experiment", "run", "spec.toml", "--runs-dir", str(tmp_path / "runs")], cwd=tmp_path), *words)
    assert not any((tmp_path / "runs").glob("x-*"))  # no run was started


def test_an_unknown_top_level_key(tmp_path):
    (tmp_path / "spec.toml").write_text(
        'name = "x"\nseed = 3\n[grid]\nworker = "cleanrl"\nalgo = "ppo"\nenv = "CartPole-v1"\n'
    )
    refused(run_cli(["experiment", "run", "spec.toml"], cwd=tmp_path), "spec.toml", "seed", "unknown key", "seeds")


SPEC = (
    'name = "x"\nseeds = 2\ntotal_timesteps = 500\n{top}[grid]\nworker = "cleanrl"\nalgo = "ppo"\nenv = "CartPole-v1"\n'
)


def test_parallel_below_one(tmp_path):
    (tmp_path / "spec.toml").write_text(SPEC.format(top=""))
    refused(run_cli(["experiment", "run", "spec.toml", "--parallel", "0"], cwd=tmp_path), "--parallel must be >= 1")
    (tmp_path / "spec.toml").write_text(SPEC.format(top="parallel = 0\n"))
    error = run_cli(["experiment", "run", "spec.toml"], cwd=tmp_path)
    assert error.returncode == 2 and error.stderr.startswith("mosaic: error: experiment spec spec.toml: parallel:")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["spec.toml"]


def card(root, *args):
    return run_cli(["runs", "card", *args, "--runs-dir", str(root)], cwd=root.parent)


def test_a_card_of_a_run_with_no_checkpoint(root):
    refused(card(root, "ppo-s1", "-o", "card"), "ppo-s1", "no checkpoint")
    assert not (root.parent / "card").exists()


def test_a_card_of_an_unknown_experiment(root):
    refused(card(root, "no-such-experiment", "-o", "card"), "'no-such-experiment'", "neither a run nor an experiment")
    assert not (root.parent / "card").exists()


def test_a_card_into_a_folder_that_exists(root, tmp_path):
    """A card folder is made by the card (mkdir): one that exists, empty or not, is refused."""
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "keep.txt").write_text("mine")
    (tmp_path / "empty").mkdir()
    refused(card(root, "exp", "-o", str(tmp_path / "full")), "exists already (name a new one)")
    refused(card(root, "exp", "-o", str(tmp_path / "empty")), "exists already (name a new one)")
    assert [p.name for p in (tmp_path / "full").iterdir()] == ["keep.txt"]
    assert not list((tmp_path / "empty").iterdir())
