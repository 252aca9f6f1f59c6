"""``worker_id`` / ``--worker-id``, MOSAIC's names (the seeds'), and ``program_id`` / ``--program-id``,
the names they had for a while here: the latter keep working and say, in one line, the name that
replaced them; MOSAIC's say nothing."""

from __future__ import annotations

import json

from tests.conftest import run_cli

RUN = ["run", "--worker", "example", "--algo", "random", "--env-id", "CartPole-v1", "--total-timesteps", "64"]
NOTICE = "mosaic: --program-id is deprecated; use --worker-id"


def _summary(stdout: str) -> dict:
    return json.loads(stdout)


def test_worker_id_flag_and_its_later_spelling(tmp_path):
    new = run_cli([*RUN, "--worker-id", "box-1", "--dry-run", "--emit-summary"], cwd=tmp_path)
    assert new.returncode == 0 and new.stderr == "", new.stderr
    assert _summary(new.stdout)["config"]["worker_id"] == "box-1"
    old = run_cli([*RUN, "--program-id", "box-1", "--dry-run", "--emit-summary"], cwd=tmp_path)
    assert old.returncode == 0 and old.stderr.splitlines() == [NOTICE], old.stderr
    assert _summary(old.stdout)["config"] == {
        **_summary(new.stdout)["config"],
        "run_id": _summary(old.stdout)["run_id"],
    }
    assert list(tmp_path.iterdir()) == []  # a dry run writes nothing


def test_a_config_file_with_the_program_id_key_runs_and_records_worker_id(tmp_path):
    config = tmp_path / "old.json"
    config.write_text(json.dumps({"program_id": "box-2", "run_id": "old-key"}))
    done = run_cli([*RUN, "--config", str(config), "--runs-dir", str(tmp_path / "runs")], cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stderr.splitlines()[0] == f"mosaic: program_id in {config} is deprecated; use worker_id"
    recorded = json.loads((tmp_path / "runs/old-key/config.json").read_text())
    assert recorded["worker_id"] == "box-2" and "program_id" not in recorded


def test_the_old_key_never_hides_the_new_one_and_a_bad_value_is_one_line(tmp_path):
    config = tmp_path / "both.json"
    config.write_text(json.dumps({"program_id": "old", "worker_id": "new"}))
    both = run_cli([*RUN, "--config", str(config), "--dry-run", "--emit-summary"], cwd=tmp_path)
    assert both.returncode == 0 and _summary(both.stdout)["config"]["worker_id"] == "new"
    config.write_text(json.dumps({"program_id": 7}))
    bad = run_cli([*RUN, "--config", str(config), "--dry-run"], cwd=tmp_path)
    assert bad.returncode == 2 and "Traceback" not in bad.stderr
    notice, error = bad.stderr.splitlines()  # the old name's line, then the error naming the field
    assert notice.endswith("is deprecated; use worker_id") and "worker_id must be a string or null, got 7" in error
