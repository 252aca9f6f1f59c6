"""A worker and a plugin nobody here wrote, through the host's pipeline: the example package's
``example`` worker (a random policy in a plain gymnasium loop) and its ``thresh_level`` plugin,
run through ``mosaic run`` and through the daemon, with FastLane frames, metric events and the
manifest coming from plugins that know nothing of either."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import BIN, run_cli

RUN = ["run", "--worker", "example", "--env-id", "CartPole-v1"]


def test_the_example_worker_gets_frames_metrics_events_and_a_manifest(workdir, runs_root):
    from mosaic_fastlane import FastLaneReader

    extras = {"fastlane": True, "thresh_level": 5, "metrics_interval_s": 0.05}
    proc = subprocess.Popen(
        [
            str(BIN / "mosaic"),
            *RUN,
            "--total-timesteps",
            "60000",
            "--run-id",
            "ex1",
            "--heartbeat-interval",
            "0.3",
            "--extras",
            json.dumps(extras),
        ],
        cwd=workdir,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    frame = None
    try:
        deadline = time.monotonic() + 60
        while frame is None and time.monotonic() < deadline and proc.poll() is None:
            try:
                with FastLaneReader("ex1") as reader:
                    frame = reader.wait(timeout=5)
            except Exception:  # the segment appears once the run has started
                time.sleep(0.05)
        out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, err
    assert frame is not None and frame.pixels.ndim == 3 and frame.pixels.shape[2] in (3, 4)  # CartPole's rendering
    events = [json.loads(line) for line in out.splitlines()]
    names = [e["event"] for e in events]
    assert names[0] == "run_started" and names[-1] == "run_completed" and names.count("run_completed") == 1
    assert events[0]["payload"]["worker"] == "example" and events[0]["payload"]["policy"] == "random"
    metrics = [e["payload"] for e in events if e["event"] == "metrics"]
    assert metrics and any(isinstance(m.get("episodic_return"), float) for m in metrics)
    assert any(e["event"] == "note" and "thresh_level 5" in e["payload"]["text"] for e in events)
    beats = [e["payload"] for e in events if e["event"] == "heartbeat"]
    assert beats and all("thresh_level" in b for b in beats)
    manifest = json.loads((runs_root / "ex1" / "manifest.json").read_text())
    assert manifest["worker"] == "example" and manifest["status"] == "completed"
    assert manifest["thresh_level"]["reached_at_step"] > 0 and manifest["metrics"]
    assert manifest["fastlane"]["frames_published"] > 0
    assert manifest["plugins"]["hook_failures"] == [] and "example" in manifest["plugins"]["active"]
    assert not list(Path("/dev/shm").glob("*ex1*"))  # the host removed the segment


def test_a_plugins_own_key_never_reaches_a_script_and_its_owner_is_listed(mosaic):
    dry = mosaic(
        "run",
        "--worker",
        "cleanrl",
        "--algo",
        "ppo",
        "--env-id",
        "CartPole-v1",
        "--total-timesteps",
        "100",
        "--dry-run",
        "--emit-summary",
        "--extras",
        '{"thresh_level": 3, "learning_rate": 0.01}',
    )
    assert dry.returncode == 0, dry.stderr
    summary = json.loads(dry.stdout)
    assert "--learning-rate=0.01" in summary["argv"] and not any("thresh" in a for a in summary["argv"])
    assert summary["worker_extras"] == ["learning_rate"]
    listing = mosaic("plugins", "--extras", "--json")
    owners = {row["key"]: row["plugin"] for row in json.loads(listing.stdout)}
    assert owners["thresh_level"] == "example" and owners["fastlane_*"] == "fastlane" and owners["schema_id"] == "host"


def test_the_example_worker_refuses_what_it_cannot_use(mosaic):
    unknown = mosaic(*RUN, "--total-timesteps", "10", "--extras", '{"learning_rate": 1}')
    assert unknown.returncode == 2 and "Traceback" not in unknown.stderr
    assert "extras.learning_rate: no installed plugin owns this key" in unknown.stderr
    bad = mosaic(*RUN, "--total-timesteps", "10", "--algo", "ppo", "--log-every", "0")
    assert bad.returncode == 2 and "not one the example worker runs (known: first, random)" in bad.stderr
    assert "--log-every" in bad.stderr
    dry = mosaic(*RUN, "--total-timesteps", "10", "--dry-run")
    assert dry.returncode == 0 and "dry run ok: example: random policy on CartPole-v1" in dry.stderr


def test_the_daemon_runs_the_example_worker(daemon_process, tmp_path):
    from mosaic_core.events import read_events
    from mosaic_core.trainer import client
    from mosaic_core.trainer import trainer_pb2 as pb
    from tests.trainer.conftest import wait_final

    daemon = daemon_process("--state-dir", str(tmp_path / "state"), mosaic=True)
    workers = {w.name for w in client.list_workers(daemon.target, token=daemon.token)}
    assert {"cleanrl", "example"} <= workers
    config = {"worker": "example", "env_id": "CartPole-v1", "total_timesteps": 3000, "extras": {"thresh_level": 1}}
    run_id = client.submit(daemon.target, json.dumps(config), token=daemon.token).run_id
    final = wait_final(daemon.target, run_id, timeout=120, token=daemon.token)
    assert (final.status, final.terminal_event) == (pb.RUN_STATUS_TERM, "run_completed"), final.failure_reason
    events = read_events(Path(final.run_dir) / "events.jsonl")
    assert events[0]["payload"]["worker"] == "example" and events[0]["payload"]["grpc"]["accepted_version"]
    manifest = json.loads((Path(final.run_dir) / "manifest.json").read_text())
    assert manifest["worker"] == "example" and "thresh_level" in manifest
    with pytest.raises(Exception, match="no installed plugin owns|not one the example worker runs"):
        client.submit(daemon.target, json.dumps({**config, "algo": "ppo"}), token=daemon.token)


@pytest.fixture
def daemon_process(tmp_path):
    from tests.trainer.conftest import DaemonProcess

    started = []

    def start(*args: str, mosaic: bool = True):
        process = DaemonProcess([str(BIN / "mosaic"), "daemon", "--listen", "127.0.0.1:0", *args], tmp_path)
        started.append(process)
        return process

    yield start
    for process in started:
        process.stop()


def test_console_scripts_are_the_same_pipeline(workdir):
    for argv in (["cleanrl-worker"], [sys.executable, "-m", "cleanrl_worker.cli"]):
        exe = [str(BIN / argv[0])] if len(argv) == 1 else argv
        result = subprocess.run(
            [
                *exe,
                "--algo",
                "ppo",
                "--env-id",
                "CartPole-v1",
                "--total-timesteps",
                "10",
                "--dry-run",
                "--emit-summary",
            ],
            cwd=workdir,
            capture_output=True,
            text=True,
        )
        assert result.returncode == 0, result.stderr
        assert json.loads(result.stdout)["worker"] == "cleanrl"
    assert run_cli(["cleanrl-worker", "--total-timesteps", "nope"], cwd=workdir).returncode == 2


BAD_WORKERS = """
from mosaic_core.capabilities import WorkerCapabilities, WorkerMetadata
from mosaic_core.types import ChildEvent
from mosaic_core.worker import Worker

CAPS = WorkerCapabilities(worker_type="bad", supported_paradigms=("sequential",), env_families=("gymnasium",),
                          action_spaces=("discrete",), observation_spaces=("vector",))

def no_plan():
    return WorkerMetadata(name="noplan", version="1", description="d", capabilities=CAPS, worker="bad_workers:NoPlan")

def raises():
    return WorkerMetadata(name="raiser", version="1", description="d", capabilities=CAPS, worker="bad_workers:Raiser")

def wrong_launch():
    return WorkerMetadata(name="wronglaunch", version="1", description="d", capabilities=CAPS,
                          worker="bad_workers:WrongLaunch")

def bad_event():
    return WorkerMetadata(name="badevent", version="1", description="d", capabilities=CAPS, worker="bad_workers:BadEvent")

def bad_path():
    return WorkerMetadata(name="badpath", version="1", description="d", capabilities=CAPS, worker="bad_workers:BadPath")

class NoPlan:  # duck typing is not a worker: one model, the Worker base class
    def plan(self, config, run):
        raise AssertionError("never called")

class Raiser(Worker):
    def plan(self, config, run):
        raise KeyError("boom")

class WrongLaunch(Worker):
    def plan(self, config, run):
        return ["python", "-c", "pass"]

class BadEvent(Worker):
    def child_events(self):
        return [ChildEvent("Not An Event")]

class BadPath(Worker):
    def code_paths(self, data):
        return ["/just/a/string.py"]

from mosaic_core import hookimpl

@hookimpl
def mosaic_workers():
    return [no_plan(), raises(), wrong_launch(), bad_event(), bad_path()]
"""


@pytest.mark.parametrize(
    "name, needle",
    [
        (
            "noplan",
            "worker 'noplan' (mosaic-bad 1.0): bad_workers:NoPlan is a NoPlan, not a mosaic_core.worker.Worker "
            "subclass",
        ),
        (
            "badevent",
            "worker 'badevent' (mosaic-bad 1.0): child_events() failed: ValueError: ChildEvent.name must be a "
            "lower-case identifier, got 'Not An Event'",
        ),
        (
            "badpath",
            "worker 'badpath' (mosaic-bad 1.0): code_paths(data) must return a list of mosaic_core.types.CodePath, "
            "got ['/just/a/string.py']",
        ),
        ("raiser", "worker 'raiser' (mosaic-bad 1.0) failed to plan the run: KeyError: 'boom'"),
        (
            "wronglaunch",
            "worker 'wronglaunch' (mosaic-bad) returned list from plan(); expected mosaic_core.types.Launch",
        ),
    ],
)
def test_a_broken_worker_is_one_line_naming_it(mosaic, tmp_path, name, needle):
    from tests.core.distributions import make_distribution

    site = make_distribution(
        tmp_path / "site",
        "mosaic-bad",
        {"mosaic.plugins": {"bad": "bad_workers"}},
        {"bad_workers": BAD_WORKERS},
    )
    result = mosaic(
        "run",
        "--worker",
        name,
        "--algo",
        "x",
        "--env-id",
        "CartPole-v1",
        "--total-timesteps",
        "5",
        env={"PYTHONPATH": str(site)},
    )
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert result.stderr.strip().splitlines() == [f"mosaic: error: {needle}"]


def test_a_worker_declaring_a_code_path_badly_is_one_line_naming_it(tmp_path):
    """Code paths are asked for where a daemon checks them: a bad declaration names the worker."""
    from mosaic_core.errors import UsageError
    from mosaic_core.trainer.submission import ScriptPolicy, parse_submission
    from mosaic_core.workers import discover_workers
    from tests.core.distributions import make_distribution

    site = make_distribution(
        tmp_path / "site",
        "mosaic-bad",
        {"mosaic.plugins": {"bad": "bad_workers"}},
        {"bad_workers": BAD_WORKERS},
    )
    sys.path.insert(0, str(site))
    try:
        import importlib

        from mosaic_core.plugins import load_plugin_host

        importlib.invalidate_caches()
        workers = discover_workers(load_plugin_host())  # a host that sees the site just added
        config = json.dumps({"worker": "badpath", "algo": "x", "env_id": "CartPole-v1", "total_timesteps": 5})
        with pytest.raises(UsageError) as info:
            parse_submission(config, "", workers, 0, runs_dir=tmp_path / "runs", scripts=ScriptPolicy())
    finally:
        sys.path.remove(str(site))
        sys.modules.pop("bad_workers", None)
    assert str(info.value).startswith(
        "worker 'badpath' (mosaic-bad 1.0): code_paths(data) must return a list of mosaic_core.types.CodePath"
    )
