"""Bad input to `mosaic sweep run`: one line naming the key or URL, exit 2, nothing written.
And the spec parser's own rules, in process."""

from __future__ import annotations

import json

import pytest

from mosaic_core.errors import UsageError
from mosaic_sweep.spec import load_spec, parse_spec
from mosaic_sweep.storage import resolve
from tests.sweep.conftest import TINY, sweep, write_spec

BASE = {"algo": "ppo", "env_id": "CartPole-v1", "total_timesteps": 1024}


def bad(text_extra: str = "", params: str = "", replace: tuple[str, str] | None = None) -> str:
    text = TINY.format(extra=text_extra, params=params)
    return text.replace(*replace) if replace else text


@pytest.mark.parametrize(
    "text, storage, message",
    [
        (bad("learning_rat = 3"), None, "learning_rat: unknown key"),
        (bad(replace=("high = 1e-2", "high = 1e-4")), None, "params.learning_rate: empty or inverted range"),
        (bad(replace=("high = 1e-2", "high = 1e-5")), None, "params.learning_rate: empty or inverted range"),
        (bad(replace=('type = "random"', 'type = "rand"')), None, "sampler.type: unknown sampler 'rand'"),
        (bad(replace=('type = "none"', 'type = "medain"')), None, "pruner.type: unknown pruner 'medain' (known:"),
        (
            bad(replace=("seed = 0", "seed = 0\nn_startup = 3")),
            None,
            "sampler.n_startup: not an option of RandomSampler",
        ),
        (bad(replace=("last_n = 5", 'last_n = 5\ngoal = "max"')), None, "objective.goal: unknown key"),
        (
            bad(replace=('episodic_return"', 'episodic_retrun"')),
            None,
            "objective.metric: 'charts/episodic_retrun' is never logged by ppo.py",
        ),
        (bad(params='[params.learnin_rat]\ntype = "int"\nlow = 1\nhigh = 3'), None, "unknown flag --learnin-rat"),
        (
            bad(params='[params.clip]\ntype = "float"\nlow = 0.1\nhigh = 0.3\nwhen = { gae = true }'),
            None,
            "params.clip.when.gae: names no parameter defined before this one",
        ),
        (
            bad(),
            "postgresql://sweeper:hunter2secret@127.0.0.1:9/studies",
            "storage postgresql://sweeper:***@127.0.0.1:9",
        ),
        (bad(), "sqlite:////proc/mosaic-sweeps/s.db", "storage sqlite:////proc/mosaic-sweeps/s.db: cannot create"),
        (bad(), "mongodb://x/y", "storage mongodb://x/y: use sqlite:///FILE, journal:FILE or postgresql"),
    ],
)
def test_bad_spec_or_storage_is_one_line_exit_2_and_nothing_written(tmp_path, text, storage, message):
    spec = write_spec(tmp_path, text=text)
    result = sweep(["run", str(spec), *(["--storage", storage] if storage else [])], cwd=tmp_path)
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and message in lines[0], result.stderr
    assert "hunter2secret" not in result.stderr + result.stdout
    assert sorted(p.name for p in tmp_path.iterdir()) == ["tiny.toml"]  # no var/, no database, no run


def test_a_file_that_is_not_a_database_is_refused_and_left_alone(tmp_path):
    spec = write_spec(tmp_path)
    (tmp_path / "notes.db").write_text("my notes, not a database\n")
    result = sweep(["run", str(spec), "--storage", "notes.db"], cwd=tmp_path)
    assert result.returncode == 2 and "notes.db is not an SQLite database" in result.stderr
    assert (tmp_path / "notes.db").read_text() == "my notes, not a database\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.db", "tiny.toml"]


@pytest.mark.parametrize(
    "args, message",
    [
        (["--max-trials", "0"], "--max-trials must be >= 1"),
        (["--seeds", "0"], "--seeds must be >= 1"),
        (["--study-name", "a b"], "--study-name: must be 1-64 letters"),
        (["--parallel", "0"], "--parallel must be >= 1"),
    ],
)
def test_bad_overrides(tmp_path, args, message):
    result = sweep(["run", str(write_spec(tmp_path)), *args], cwd=tmp_path)
    assert result.returncode == 2 and message in result.stderr and len(result.stderr.strip().splitlines()) == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == ["tiny.toml"]


def test_a_missing_or_unparsable_spec(tmp_path):
    assert "does not exist" in sweep(["run", "nope.toml"], cwd=tmp_path).stderr
    broken = tmp_path / "broken.toml"
    broken.write_text("algo = \n")
    result = sweep(["run", str(broken)], cwd=tmp_path)
    assert result.returncode == 2 and "broken.toml is not valid TOML" in result.stderr


def test_status_of_an_unknown_study(tmp_path):
    result = sweep(["status", "nothing-here"], cwd=tmp_path)
    assert result.returncode == 2 and "var/sweeps/nothing-here.db does not exist" in result.stderr
    assert list(tmp_path.iterdir()) == []


def test_the_example_specs_are_valid():
    from tests.conftest import REPO

    spec = load_spec(REPO / "examples/sweep/ppo_cartpole.toml")
    assert spec.study_name == "ppo-cartpole" and spec.seeds == (1, 2) and not spec.grid
    assert [p.name for p in spec.params] == ["learning_rate", "num_steps", "anneal_lr", "clip_coef"]
    assert spec.params[3].when == (("anneal_lr", True),)
    grid = load_spec(REPO / "examples/sweep/grid_benchmark.toml")
    assert grid.grid and grid.dimensions() == {"env_id": ["CartPole-v1", "Acrobot-v1"]}


def test_spec_round_trips_and_overrides():
    spec = parse_spec({**BASE, "seeds": [3, 5], "params": {"lr": {"type": "float", "low": 0.1, "high": 0.2}}})
    assert parse_spec(spec.to_dict()) == spec
    assert spec.with_overrides(seeds=3).seeds == (3, 4, 5)
    assert spec.with_overrides(total_timesteps=7, max_trials=2).total_timesteps == 7


@pytest.mark.parametrize(
    "data, message",
    [
        ({"algo": "ppo", "total_timesteps": 9, "env_ids": ["A-v1", "A-v1"]}, "env_ids: lists an env id twice"),
        ({**BASE, "env_ids": ["A-v1"]}, "env_ids: give env_id or env_ids, not both"),
        ({**BASE, "seeds": [1, 1]}, "seeds: must be a count >= 1 or a list of distinct seeds"),
        ({**BASE, "extras": {"optuna_trial": 3}}, "extras.optuna_trial: optuna_* keys are set by the sweep"),
        (
            {**BASE, "algo_params": {"lr": 1}, "params": {"lr": {"type": "int", "low": 1, "high": 2}}},
            "params.lr: is also fixed in algo_params",
        ),
        (
            {**BASE, "sampler": {"type": "grid"}, "params": {"lr": {"type": "float", "low": 0.1, "high": 0.2}}},
            "grid mode needs categorical choices or an int range",
        ),
        ({**BASE, "params": {"lr": {"type": "float", "low": 0, "high": 1, "log": True}}}, "a log range needs low > 0"),
        (
            {**BASE, "params": {"c": {"type": "categorical", "choices": []}}},
            "params.c.choices: must be a non-empty list",
        ),
    ],
)
def test_spec_rules(data, message):
    with pytest.raises(UsageError, match=message.replace("(", r"\(").replace("*", r"\*")):
        parse_spec(data)


def test_a_spec_without_a_worker_gets_the_one_mosaic_run_would_choose(monkeypatch):
    monkeypatch.delenv("MOSAIC_DEFAULT_WORKER", raising=False)
    spec = {"algo": "dqn", "env_id": "CartPole-v1", "total_timesteps": 9}
    assert parse_spec(spec).worker == "cleanrl"  # the one installed worker with dqn
    assert parse_spec({**spec, "worker": "example"}).worker == "example"
    monkeypatch.setenv("MOSAIC_DEFAULT_WORKER", "example")
    assert parse_spec(spec).worker == "example"
    monkeypatch.delenv("MOSAIC_DEFAULT_WORKER")
    with pytest.raises(
        UsageError,
        match=r"^sweep spec <spec>: worker: no installed worker that can run here runs "
        r"algo 'dqnn'; did you mean dqn \(cleanrl\)",
    ):
        parse_spec({**spec, "algo": "dqnn"})


def test_storage_urls():
    assert resolve(None, "s").url == "sqlite:///var/sweeps/s.db"
    assert resolve("journal:/tmp/x.journal", "s").kind == "journal"
    assert resolve("runs.journal", "s").kind == "journal"
    shown = resolve("postgres://me:pw@db.local:5432/opt", "s").shown
    assert shown == "postgresql://me:***@db.local:5432/opt"


@pytest.mark.slow  # three real runs
def test_a_sweep_process_stops_after_three_failed_trials_in_a_row(tmp_path):
    """Runs that crash (a tiny CleanRL-style script asked to raise) fail their trials, which
    do not use up the budget; the sweep process gives up after three in a row, naming the last error."""
    from tests.conftest import REPO

    script = REPO / "tests/analytics/tiny_cleanrl.py"
    spec = write_spec(
        tmp_path,
        text=f"""
algo = "{script}"
env_id = "CartPole-v1"
total_timesteps = 200
max_trials = 10
[algo_params]
writer = "tensorboardx"
crash_at = 0
[pruner]
type = "none"
[params.step_delay]
type = "float"
low = 0.0
high = 0.001
""",
    )
    result = sweep(["run", str(spec)], cwd=tmp_path)
    assert result.returncode == 1, result.stderr
    assert (
        "mosaic: error: 3 trials in a row failed; stopping this sweep process. Last: run tiny-t2-s1 (seed 1) failed: "
        "RuntimeError: crash requested at step 0"
    ) in result.stderr
    status = sweep(["status", "tiny", "--json"], cwd=tmp_path)
    trials = json.loads(status.stdout)["trials"]
    assert [t["state"] for t in trials] == ["fail"] * 3 and all("crash requested" in t["note"] for t in trials)
