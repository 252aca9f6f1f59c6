"""Issue 30, part 3: a sweep does not trust its study. As another local user (uid 65534) would
attack: a study directory it can write (refused, naming the path and its owner), enqueued
trials with values outside the spec (the trial fails with the reason, nothing trains), a forged
best trial whose recorded config names the attacker's script (``sweep best --config`` writes the
spec's algo, never the stored one) and a ``.sweep-lock`` link (never followed)."""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path

import pytest

from tests.conftest import run_cli
from tests.trainer.second_user import needs_second_user, run_as_nobody

from .conftest import load, optuna, sweep, write_spec

FORGE = r"""
import os, sys, optuna
folder, storage = sys.argv[1], sys.argv[2]
os.makedirs(folder)
os.chmod(folder, 0o777)
study = optuna.create_study(study_name="tiny", storage=storage, direction="maximize")
study.enqueue_trial({"learning_rate": 0.9})
print("planted")
"""


@pytest.fixture
def shared() -> Path:
    path = Path(tempfile.mkdtemp(prefix="mosaic-shared-"))
    path.chmod(0o1777)
    yield path
    shutil.rmtree(path, ignore_errors=True)


@needs_second_user
def test_a_study_another_user_can_write_is_refused(shared, tmp_path):
    folder = shared / "studies"
    storage = f"sqlite:///{folder / 'tiny.db'}"
    planted = run_as_nobody([os.sys.executable, "-c", FORGE, str(folder), storage])
    assert planted.returncode == 0 and "planted" in planted.stdout, planted.stderr
    spec = write_spec(tmp_path)
    for args in (
        ["run", str(spec), "--storage", storage, "--max-trials", "1"],
        ["best", "tiny", "--storage", storage],
        ["status", "tiny", "--storage", storage],
    ):
        result = sweep(args, cwd=tmp_path)
        lines = [line for line in result.stderr.splitlines() if line.strip()]
        assert result.returncode == 2 and len(lines) == 1, result.stderr
        assert str(folder) in lines[0] and "nobody" in lines[0], lines[0]
    assert not (tmp_path / "var" / "trainer" / "runs").exists()  # nothing trained
    assert sorted(p.name for p in folder.iterdir()) == ["tiny.db"]  # nothing written there by the owner


def _study_of(spec: Path, storage: str):
    """The study as `mosaic sweep run` creates it (its spec stored with it)."""
    from mosaic_sweep import storage as storages
    from mosaic_sweep.spec import load_spec
    from mosaic_sweep.study import open_study

    parsed = load_spec(spec)
    handle = storages.open_storage(storages.resolve(storage, parsed.study_name))
    return open_study(parsed, handle, create=True, shown_url=storage)


def test_parameters_from_storage_are_checked_against_the_spec(tmp_path):
    spec = write_spec(tmp_path)
    storage = f"sqlite:///{tmp_path / 'tiny.db'}"
    study = _study_of(spec, storage)
    study.enqueue_trial({"learning_rate": 0.9})  # what a poisoned storage holds: outside [1e-4, 1e-2]
    result = sweep(["run", str(spec), "--storage", storage, "--max-trials", "1"], cwd=tmp_path)
    assert "learning_rate=0.9 is outside the spec's range" in result.stderr, result.stderr
    trials = load("tiny", storage).trials
    assert [t.state.name for t in trials] == ["FAIL"]
    assert "refused parameters from the study's storage" in trials[0].user_attrs["seed_failure"]
    assert not (tmp_path / "var" / "trainer" / "runs").exists()  # nothing trained


def test_best_config_is_the_spec_with_the_best_parameters_only(tmp_path):
    spec = write_spec(tmp_path)
    storage = f"sqlite:///{tmp_path / 'tiny.db'}"
    study = _study_of(spec, storage)
    evil = {
        "worker": "cleanrl",
        "algo": "/tmp/evil.py",
        "env_id": "CartPole-v1",
        "total_timesteps": 10**9,
        "seeds": [1],
        "extras": {"algo_params": {"learning_rate": 0.001}, "cleanrl_home": "/tmp"},
    }
    distributions = {"learning_rate": optuna.distributions.FloatDistribution(1e-4, 1e-2, log=True)}
    study.add_trial(
        optuna.trial.create_trial(
            params={"learning_rate": 0.001}, distributions=distributions, value=500.0, user_attrs={"config": evil}
        )
    )
    result = sweep(["best", "tiny", "--storage", storage, "--config", "best.json"], cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    config = json.loads((tmp_path / "best.json").read_text())
    assert config == {
        "algo": "ppo",
        "env_id": "CartPole-v1",
        "total_timesteps": 1024,
        "seed": 1,
        "extras": {"algo_params": {"learning_rate": 0.001}},
    }
    # A best trial whose stored values leave the spec is not written at all.
    study.add_trial(
        optuna.trial.create_trial(
            params={"learning_rate": 0.9},
            value=900.0,
            distributions={"learning_rate": optuna.distributions.FloatDistribution(1e-4, 1.0, log=True)},
        )
    )
    result = sweep(["best", "tiny", "--storage", storage, "--config", "worse.json"], cwd=tmp_path)
    assert result.returncode == 1 and "learning_rate=0.9 is outside the spec's range" in result.stderr
    assert not (tmp_path / "worse.json").exists()
    assert run_cli(["run", "--worker", "cleanrl", "--config", "best.json", "--dry-run"], cwd=tmp_path).returncode == 0


def test_the_sweep_lock_never_follows_a_link(tmp_path):
    private = tmp_path / "private"
    private.mkdir(mode=0o700)
    spec = write_spec(tmp_path)
    studies = tmp_path / "studies"
    studies.mkdir(mode=0o700)
    os.symlink(private / "created-through-the-link", studies / "tiny.db.sweep-lock")
    result = sweep(
        ["run", str(spec), "--storage", f"sqlite:///{studies / 'tiny.db'}", "--max-trials", "1"], cwd=tmp_path
    )
    assert result.returncode == 2 and "sweep lock" in result.stderr and "never followed" in result.stderr, result.stderr
    assert list(private.iterdir()) == []  # nothing was created where the link points
