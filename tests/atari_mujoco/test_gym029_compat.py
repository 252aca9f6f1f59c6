"""0.29-era scripts (our fixtures, 0.29's info layout only) through `mosaic run`, on both lanes:
natively on gymnasium 0.29.1, through the worker's compatibility layer on 1.x."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from .conftest import GYMNASIUM_1, clean_environ, completed, finish, mosaic_command, scalars, start

SCRIPTS = Path(__file__).resolve().parents[1] / "fixtures" / "gym029_scripts"
BUNDLED_PPO = Path(__file__).resolve().parents[2] / "plugins" / "cleanrl_worker" / "algorithms" / "ppo.py"
only_gymnasium_1 = pytest.mark.skipif(not GYMNASIUM_1, reason="about gymnasium 1.x: 0.29.1 has these semantics itself")


@pytest.fixture(scope="module")
def fixture_runs(tmp_path_factory):
    workdir = tmp_path_factory.mktemp("gym029")
    procs = {
        "onpolicy": start(
            workdir, *mosaic_command("onpolicy", str(SCRIPTS / "onpolicy_029.py"), "CartPole-v1", 2000, {})
        ),
        "offpolicy": start(
            workdir, *mosaic_command("offpolicy", str(SCRIPTS / "offpolicy_029.py"), "Pendulum-v1", 1000, {})
        ),
    }
    try:
        return workdir / "var/trainer/runs", {name: completed(proc, timeout=240) for name, proc in procs.items()}
    finally:
        for proc in procs.values():
            if proc.poll() is None:
                proc.kill()
                finish(proc)


def test_an_on_policy_029_script_logs_episodic_returns(fixture_runs):
    runs_root, _ = fixture_runs
    returns = scalars(runs_root / "onpolicy")["charts/episodic_return"]
    assert len(returns) >= 10 and all(5 <= r <= 500 for _, r in returns)  # CartPole with random actions


def test_an_off_policy_029_script_reads_final_observation_and_logs_returns(fixture_runs):
    runs_root, _ = fixture_runs
    values = scalars(runs_root / "offpolicy")
    assert len(values["charts/episodic_return"]) == 4  # 2 envs x 500 steps, Pendulum truncates at 200
    assert values["charts/transitions"] == [(1000, 1000.0)]  # same-step autoreset: every transition is real


def dry_run_notes(tmp_path: Path, algo: str, extras: dict) -> list[str]:
    proc = subprocess.run(
        mosaic_command("notes", algo, "CartPole-v1", 1000, extras, "--dry-run", "--emit-summary"),
        cwd=tmp_path,
        env=clean_environ(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)["notes"]


@only_gymnasium_1
def test_the_dry_run_says_a_script_gets_029_semantics(tmp_path):
    (note,) = [n for n in dry_run_notes(tmp_path, str(SCRIPTS / "onpolicy_029.py"), {}) if "0.29" in n]
    assert "same-step autoreset" in note and "gym_compat=false" in note
    assert not [n for n in dry_run_notes(tmp_path, "ppo", {}) if "0.29" in n]  # ours handle 1.x themselves
    assert not [
        n for n in dry_run_notes(tmp_path, str(SCRIPTS / "onpolicy_029.py"), {"gym_compat": False}) if "0.29" in n
    ]


@only_gymnasium_1
def test_turned_off_a_029_script_fails_on_gymnasium_1(tmp_path):
    proc = start(
        tmp_path, *mosaic_command("off", str(SCRIPTS / "offpolicy_029.py"), "Pendulum-v1", 1000, {"gym_compat": False})
    )
    events, _ = finish(proc, timeout=240)
    assert events[-1]["event"] == "run_failed"
    failure = json.dumps(events[-1]["payload"])  # the training process's stderr tail
    assert "TransformObservation" in failure and "observation_space" in failure, failure


def test_on_gymnasium_0_29_nothing_is_noted(tmp_path):
    if GYMNASIUM_1:
        pytest.skip("about gymnasium 0.29.1")
    assert not [n for n in dry_run_notes(tmp_path, str(SCRIPTS / "onpolicy_029.py"), {}) if "0.29" in n]
