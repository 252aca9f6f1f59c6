"""A run that names no worker goes to the one installed worker that runs what it asks for
(mosaic_core.choice), and when several do, one line names them, what each offers, and the run's
other problems. The second worker is a real installed distribution (on PYTHONPATH): the example
worker's class under another name, not marked as an example, with a ``PPO`` of its own."""

from __future__ import annotations

import json
import shlex
import subprocess

import pytest

from mosaic_core.choice import choose_worker
from mosaic_core.errors import UsageError
from mosaic_core.plugins import load_plugin_host
from mosaic_core.workers import discover_workers
from tests.conftest import BIN
from tests.core.distributions import make_distribution

TWIN = """
from mosaic_core import hookimpl
from mosaic_core.capabilities import WorkerCapabilities, WorkerMetadata
from mosaic_example_plugin.worker import ExampleWorker


class Twin(ExampleWorker):
    def algorithm_names(self, data):
        return ["PPO", "random"]


METADATA = WorkerMetadata(
    name="twin", version="1.0", description="the example worker under another name, with a PPO of its own",
    capabilities=WorkerCapabilities(supported_paradigms=("sequential",), env_families=("gymnasium", "mpe"),
                                    action_spaces=("discrete",), observation_spaces=("vector",)),
    worker="twin_worker:Twin")


@hookimpl
def mosaic_workers():
    return [METADATA]
"""


@pytest.fixture
def rule(tmp_path):
    """The environment of a user with CleanRL and the twin installed, no worker environment
    built, and no $MOSAIC_DEFAULT_WORKER."""
    site = make_distribution(
        tmp_path / "site", "mosaic-twin", {"mosaic.plugins": {"twin": "twin_worker"}}, {"twin_worker": TWIN}
    )
    return {"MOSAIC_DEFAULT_WORKER": "", "MOSAIC_VENVS": str(tmp_path / "venvs"), "PYTHONPATH": str(site)}


def chosen(mosaic, rule, *args, **more):
    done = mosaic(
        "run",
        *args,
        "--env",
        "CartPole-v1",
        "--total-timesteps",
        "100",
        "--dry-run",
        "--emit-summary",
        env={**rule, **more},
    )
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout)
    return summary["worker"], summary["config"]["algo"]


def test_the_worker_that_has_the_algorithm_runs_it(mosaic, rule):
    assert chosen(mosaic, rule, "--algo", "dqn") == ("cleanrl", "dqn")  # only CleanRL has dqn
    assert chosen(mosaic, rule, "--algo", "ppo") == ("cleanrl", "ppo")  # spelt as CleanRL spells it
    assert chosen(mosaic, rule, "--algo", "PPO") == ("twin", "PPO")  # spelt as the twin spells it
    assert chosen(mosaic, rule, "--algo", "DQN") == ("cleanrl", "dqn")  # another case, one worker has it
    assert chosen(mosaic, rule, "--algo", "Ppo", MOSAIC_DEFAULT_WORKER="twin") == ("twin", "PPO")
    assert chosen(mosaic, rule, "--algo", "Ppo", "--worker", "cleanrl") == ("cleanrl", "ppo")


def test_several_workers_are_named_with_what_they_offer_and_the_other_problems(mosaic, rule, workdir):
    done = mosaic(
        "run",
        "--algo",
        "Ppo",
        "--env",
        "CartPole-v1",
        "--seed",
        "-1",
        "--grace-period",
        "0",
        "--extras",
        '{"fastlane_vidoe_mode": "grid"',
        "--dry-run",
        env=rule,
    )
    assert done.returncode == 2 and "Traceback" not in done.stderr
    [line] = done.stderr.splitlines()
    assert line.startswith(
        "mosaic: error: name the worker: algo 'Ppo' on CartPole-v1 fits 2 installed workers: "
        "cleanrl (its ppo; envs: gymnasium, atari, procgen, mujoco, …); twin (its PPO; envs: "
        "gymnasium, mpe); give --worker NAME or set $MOSAIC_DEFAULT_WORKER; and: "
    ), line
    assert "and: --extras is not valid JSON" in line and "and: --grace-period must be a positive number" in line
    others = mosaic(
        "run",
        "--algo",
        "Ppo",
        "--env",
        "CartPole-v1",
        "--seed",
        "-1",
        "--run-id",
        "a/b",
        "--extras",
        '{"fastlane_vidoe_mode": "grid"}',
        "--dry-run",
        env=rule,
    )
    assert "; and: run_id must be 1-128 letters" in others.stderr
    typo = mosaic(
        "run",
        "--algo",
        "Ppo",
        "--env",
        "CartPole-v1",
        "--extras",
        '{"fastlane_vidoe_mode": "grid"}',
        "--dry-run",
        env=rule,
    )
    assert (
        "; and: extras.fastlane_vidoe_mode: unknown key in the fastlane_* settings of fastlane; did you mean "
        "fastlane_video_mode?" in typo.stderr
    )
    assert not (workdir / "var").exists()  # nothing left behind


def test_an_env_id_typo_is_reported_beside_the_ambiguous_choice(mosaic, rule, workdir):
    done = mosaic("run", "--algo", "Ppo", "--env", "CartPol-v1", "--dry-run", env=rule)
    assert done.returncode == 2 and "Traceback" not in done.stderr
    [line] = done.stderr.splitlines()
    assert line.startswith("mosaic: error: name the worker: algo 'Ppo' on CartPol-v1 fits 2 installed workers: "), line
    assert line.endswith("; and: env_id 'CartPol-v1' is not a registered environment; did you mean CartPole-v1?"), line
    # An id gymnasium has nothing close to may be a worker's own env: not called a typo.
    own = mosaic("run", "--algo", "Ppo", "--env", "Warehouse-Robots-v0", "--dry-run", env=rule)
    assert own.returncode == 2 and "env_id" not in own.stderr and "fits 2 installed workers" in own.stderr
    # Another version of a known env (a worker's own gymnasium may have it): not a typo either.
    version = mosaic("run", "--algo", "Ppo", "--env", "CartPole-v9", "--dry-run", env=rule)
    assert version.returncode == 2 and "env_id" not in version.stderr
    assert not (workdir / "var").exists()


def test_an_env_family_settles_a_tie_and_an_unknown_algorithm_says_did_you_mean(mosaic, rule):
    done = mosaic(
        "run",
        "--algo",
        "Ppo",
        "--env",
        "mpe/simple_spread_v3",
        "--total-timesteps",
        "9",
        "--dry-run",
        "--emit-summary",
        env=rule,
    )
    assert done.returncode == 0 and json.loads(done.stdout)["worker"] == "twin", done.stderr
    typo = mosaic("run", "--algo", "dqnn", "--env", "CartPole-v1", "--dry-run", env=rule)
    assert typo.returncode == 2 and typo.stderr.startswith(
        "mosaic: error: no installed worker that can run here runs algo 'dqnn'; did you mean dqn (cleanrl)?"
    )
    example = mosaic("run", "--algo", "first", "--env", "CartPole-v1", "--dry-run", env=rule)
    assert "example has it (an example worker, chosen only by name: give --worker example)" in example.stderr


def test_a_config_names_its_worker_and_a_pipe_is_read_once(mosaic, rule, workdir, tmp_path):
    recorded = tmp_path / "config.json"
    recorded.write_text(
        json.dumps({"worker": "twin", "algo": "random", "env_id": "CartPole-v1", "total_timesteps": 50})
    )
    assert chosen(mosaic, rule, "--config", str(recorded))[0] == "twin"
    # The algorithm only in a pipe the shell opened: read to choose the worker, and the run has it.
    config = json.dumps({"algo": "dqn", "env_id": "CartPole-v1", "total_timesteps": 64})
    command = (
        f"{shlex.quote(str(BIN / 'mosaic'))} run --config <(printf %s {shlex.quote(config)}) --dry-run --emit-summary"
    )
    done = subprocess.run(
        ["bash", "-c", command],
        cwd=workdir,
        env={**__import__("os").environ, **rule},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout)
    assert (summary["worker"], summary["config"]["algo"], summary["config"]["total_timesteps"]) == (
        "cleanrl",
        "dqn",
        64,
    )


def test_the_rule_in_process_and_for_a_daemon_submission(monkeypatch, tmp_path, rule):
    from mosaic_core.trainer.submission import ScriptPolicy, parse_submission

    monkeypatch.setenv("MOSAIC_DEFAULT_WORKER", "")
    monkeypatch.setenv("MOSAIC_VENVS", rule["MOSAIC_VENVS"])
    monkeypatch.syspath_prepend(rule["PYTHONPATH"])
    items = discover_workers(load_plugin_host())  # a host that sees the twin just put on the path
    assert choose_worker(items, {"algo": "PPO"}) == "twin" and choose_worker(items, {"algo": "ppo"}) == "cleanrl"
    with pytest.raises(UsageError, match="fits 2 installed workers"):
        choose_worker(items, {"algo": "pPo", "env_id": "CartPole-v1"})
    config = json.dumps({"algo": "PPO", "env_id": "CartPole-v1", "total_timesteps": 10})
    submission = parse_submission(config, "", items, 0, runs_dir=tmp_path / "runs", scripts=ScriptPolicy())
    assert submission.worker == "twin"
