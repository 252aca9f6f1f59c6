"""The sweep plugin's `optuna` manifest section for a sweep's run, and the cancel note the
supervisor puts in `run_cancelled` (unit level; the end-to-end path is in test_sweep_run)."""

from __future__ import annotations

from mosaic_core.runs import RunDirectory, read_cancel_note
from mosaic_sweep.extras import manifest_section as optuna_section
from mosaic_sweep.extras import validate

TRIAL = {
    "optuna_study": "s",
    "optuna_trial": 4,
    "optuna_params": {"learning_rate": 0.01},
    "optuna_seed": 2,
    "optuna_storage": "postgresql+psycopg://me:pw123@db:5432/opt",
}


def test_trial_keys_make_the_section_with_the_password_redacted(tmp_path):
    directory = RunDirectory.for_run(tmp_path, "r1").create()
    section = optuna_section(directory, TRIAL, "completed")
    assert section == {
        "study": "s",
        "trial": 4,
        "params": {"learning_rate": 0.01},
        "seed": 2,
        "storage": "postgresql+psycopg://me:***@db:5432/opt",
    }


def test_a_pruned_run_carries_the_reason(tmp_path):
    directory = RunDirectory.for_run(tmp_path, "r1").create()
    directory.cancel_note.write_text("pruned by the sweep: study s trial 4, MedianPruner at step 512\nignored\n")
    assert read_cancel_note(directory) == "pruned by the sweep: study s trial 4, MedianPruner at step 512"
    section = optuna_section(directory, TRIAL, "cancelled")
    assert section["pruned"] is True and section["cancel_reason"].endswith("at step 512")
    assert "pruned" not in optuna_section(directory, TRIAL, "completed")


def test_no_optuna_keys_no_section(tmp_path):
    assert optuna_section(RunDirectory.for_run(tmp_path, "r1").create(), {"notes": "x"}, "completed") is None


def test_trial_keys_are_validated():
    assert validate(TRIAL) == []
    problems = validate({"optuna_trial": -1, "optuna_params": [1], "optuna_study": 3})
    assert problems == [
        "extras.optuna_study: must be a string, got 3",
        "extras.optuna_trial: must be an integer >= 0, got -1",
        "extras.optuna_params: must be an object, got [1]",
    ]
