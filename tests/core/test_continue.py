"""Continuing a run is obvious and safe (issue 48): a stopped run's closing summary ends with the
command that resumes it and the step it resumes from; ``mosaic resume RUN --total-timesteps N``
extends a completed run (one history, the schedules of a run of N steps); a stop after the last
step ends the run completed; and what cannot continue the run (another worker, algorithm or env,
a budget shorter than what it has trained, a checkpoint of another library version, a cut-off
event log) is one line, exit code 2, nothing changed. Real runs through the `mosaic` CLI."""

from __future__ import annotations

import json
import os
import pty
import signal
import subprocess
import time
from importlib.metadata import version
from pathlib import Path

import pytest

from mosaic_core.events import metric_steps, one_history, read_events
from mosaic_core.testing.contract_suite import WorkerContractSuite
from tests.conftest import BIN, HOST_VARS
from tests.core.test_terminal import ANSI

PPO = {"num_envs": 2, "num_steps": 128, "cuda": False}  # 256 env steps per iteration


class Runs(WorkerContractSuite):
    worker = "cleanrl"
    algo = "ppo"
    env_id = "CartPole-v1"
    seed = 3
    extras = PPO


@pytest.fixture
def suite(tmp_path):
    runs = Runs()
    runs.folder, runs.runs_root = tmp_path, tmp_path / "runs"
    return runs


def scalars(run_dir: Path, tag: str) -> list[tuple[int, float]]:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    (folder,) = {p.parent for p in (run_dir / "runs").rglob("events.out.tfevents.*")}
    accumulator = EventAccumulator(str(folder), size_guidance={"scalars": 0})
    accumulator.Reload()
    return [(e.step, e.value) for e in accumulator.Scalars(tag)]


def files_of(run_dir: Path) -> dict[Path, bytes]:
    return {p: p.read_bytes() for p in sorted(run_dir.rglob("*")) if p.is_file()}


def test_a_completed_run_is_extended_with_one_history(suite):
    suite.total_timesteps = 2048
    first = suite.cli(*suite.run_args("ext"))
    assert first.returncode == 0, first.stderr[-3000:]

    more = suite.cli("resume", "ext", "--total-timesteps", "4096", "--runs-dir", str(suite.runs_root), "--json")
    assert more.returncode == 0, more.stderr[-3000:]
    assert "mosaic: resuming run ext from step 2048 (step_2048.cleanrl_model; resume 1, to step 4096)" in more.stderr
    events = suite.events("ext")
    assert [e["payload"] for e in events if e["event"] == "run_resumed"] == [
        {
            "from_step": 2048,
            "checkpoint": str(suite.run_dir("ext") / "checkpoints" / "step_2048.cleanrl_model"),
            "attempt": 1,
            "total_timesteps": 4096,
        }
    ]
    assert [e["payload"]["total_timesteps"] for e in events if e["event"] == "run_started"] == [2048, 4096]
    assert events[-1]["event"] == "run_completed"
    steps = metric_steps(one_history(events))
    assert all(a <= b for a, b in zip(steps, steps[1:])) and max(steps) == 4096, steps
    returns = [step for step, _ in scalars(suite.run_dir("ext"), "charts/episodic_return")]
    assert returns == sorted(returns) and returns[-1] > 2048  # one TensorBoard history, on past the first budget
    # The schedules are a 4,096-step run's from the checkpoint on: PPO's annealed learning rate at the first
    # iteration after it (the 9th of 16) is half the initial one, as it is in a run given 4,096 steps at once.
    rates = dict(scalars(suite.run_dir("ext"), "charts/learning_rate"))
    assert rates[2048 + 256] == pytest.approx(rates[256] * (1 - 8 / 16))

    listed = suite.cli("runs", "--runs-dir", str(suite.runs_root), "--json")
    (run,) = json.loads(listed.stdout)
    assert (run["status"], run["attempts"], run["global_step"], run["total_timesteps"]) == ("completed", 2, 4096, 4096)
    # Its budget is now 4,096: resuming it again needs more than that.
    before = files_of(suite.run_dir("ext"))
    suite.one_line(suite.cli("resume", "ext", "--runs-dir", str(suite.runs_root)), "completed", "more than 4,096")
    again = suite.cli("resume", "ext", "--total-timesteps", "4096", "--runs-dir", str(suite.runs_root))
    suite.one_line(again, "completed", "--restart")
    assert files_of(suite.run_dir("ext")) == before


def test_what_cannot_continue_a_run_is_one_line_and_changes_nothing(suite):
    import torch

    suite.total_timesteps = 8192
    code, err = suite.stop_at(suite.start(*suite.run_args("kept")), "kept", 2048)
    assert code == 130, err[-2000:]
    run_dir = suite.run_dir("kept")
    from_step = suite.events("kept")[-1]["payload"]["from_step"]
    root = ("--runs-dir", str(suite.runs_root))
    again = suite.run_args("kept")

    def refused(args, *words):
        before = files_of(run_dir)
        suite.one_line(suite.cli(*args), *words)
        assert files_of(run_dir) == before

    refused(("resume", "kept", "--total-timesteps", "512", *root), "--total-timesteps 512 is fewer than", "trained")
    refused([a if a != "CartPole-v1" else "Acrobot-v1" for a in again], "env_id 'CartPole-v1', not 'Acrobot-v1'")
    refused([a if a != "cleanrl" else "example" for a in again], "worker 'cleanrl', not 'example'")

    newest = run_dir / "checkpoints" / f"step_{from_step}.cleanrl_model"
    saved = newest.read_bytes()
    checkpoint = torch.load(newest, weights_only=True)
    checkpoint["versions"]["gymnasium"] = "0.28.1"  # as if saved where another gymnasium was installed
    torch.save(checkpoint, newest)
    refused(("resume", "kept", *root), f"was saved with gymnasium 0.28.1, this environment has {version('gymnasium')}")
    newest.write_bytes(saved)

    log = run_dir / "events.jsonl"
    whole = log.read_bytes()
    log.write_bytes(whole[:-40])  # its last event cut off
    refused(("resume", "kept", *root), "events.jsonl is cut off", "--restart")
    lines = whole.splitlines(keepends=True)
    log.write_bytes(b"".join(lines[:3] + lines[4:]))  # an event taken out
    refused(("resume", "kept", *root), "events.jsonl is truncated or edited (event 4 has seq 5)")
    log.write_bytes(whole)

    resumed = suite.cli("resume", "kept", *root, "--json", "--quiet")  # whole again, it goes on
    assert resumed.returncode == 0 and suite.events("kept")[-1]["event"] == "run_completed", resumed.stderr[-2000:]


def test_a_stop_in_the_last_step_ends_the_run_completed(mosaic, workdir, runs_root):
    """A scheduler's signal that lands in the run's last step (the policy sends it to the host at its
    300th action): the run did its whole budget, so it ends completed, the stop said, not a cancel
    that nothing is left to resume."""
    policy = workdir / "signalling_policy.py"
    policy.write_text(
        "import os, signal\n"
        "acted = 0\n"
        "def act(observation, action_space):\n"
        "    global acted\n"
        "    acted += 1\n"
        "    if acted == 300:\n"
        "        os.kill(os.getppid(), signal.SIGTERM)  # the host: it passes the stop on\n"
        "    return action_space.sample()\n"
    )
    done = mosaic(
        "run", "--worker", "example", "--algo", str(policy), "--env-id", "CartPole-v1",
        "--total-timesteps", "300", "--run-id", "last", "--json", "--quiet",
    )  # fmt: skip
    end = read_events(runs_root / "last" / "events.jsonl")[-1]
    assert done.returncode == 0 and end["event"] == "run_completed", (done.stderr[-2000:], end)
    assert end["payload"]["stopped"] == "received SIGTERM, after its last step: the run did its whole budget", end


def _stopped_in_a_terminal(args: list[str], cwd: Path, events: Path, ready: str = "metrics") -> tuple[int, str]:
    """``mosaic ARGS`` on a pseudo-terminal, Ctrl-C'd (SIGINT) once its events have a ``ready`` event."""
    primary, secondary = pty.openpty()
    env = {k: v for k, v in os.environ.items() if k not in HOST_VARS}
    env.update({"COLUMNS": "120", "LINES": "24", "TERM": "xterm"})
    proc = subprocess.Popen(
        [str(BIN / "mosaic"), *args], cwd=cwd, stdin=subprocess.DEVNULL, stdout=secondary, stderr=secondary, env=env
    )
    os.close(secondary)
    chunks: list[bytes] = []
    signalled, deadline = False, time.monotonic() + 240
    os.set_blocking(primary, False)
    while time.monotonic() < deadline and proc.poll() is None:
        try:
            chunks.append(os.read(primary, 65536))
        except BlockingIOError:
            time.sleep(0.1)
        except OSError:
            break
        if not signalled and events.is_file() and any(e["event"] == ready for e in read_events(events)):
            proc.send_signal(signal.SIGINT)
            signalled = True
    code = proc.wait(timeout=60)
    os.set_blocking(primary, True)
    while True:
        try:
            data = os.read(primary, 65536)
        except OSError:
            break
        if not data:
            break
        chunks.append(data)
    os.close(primary)
    return code, ANSI.sub("", b"".join(chunks).decode("utf-8", "replace"))


def test_the_summary_of_a_stopped_run_ends_with_how_to_continue_it(workdir, runs_root):
    args = ["run", "--worker", "cleanrl", "--algo", "ppo", "--env-id", "CartPole-v1", "--total-timesteps", "500000"]
    args += ["--run-id", "halt", "--extras", json.dumps({**PPO, "metrics_interval_s": 0.5})]
    code, out = _stopped_in_a_terminal(args, workdir, runs_root / "halt" / "events.jsonl")
    end = read_events(runs_root / "halt" / "events.jsonl")[-1]
    assert code == 130 and end["event"] == "run_cancelled", out[-3000:]
    step = end["payload"]["from_step"]
    lines = [line for line in out.splitlines() if line.strip()]
    assert lines[-1] == f"  continue it: mosaic resume halt  (from step {step:,}, checkpoint step_{step}.cleanrl_model)"
    assert "run halt cancelled in" in out  # the summary it closes


def test_the_summary_says_why_a_stopped_run_cannot_be_continued(workdir, runs_root):
    script = workdir / "waits.py"  # a script of the user's: the host keeps no checkpoints of it
    script.write_text("import time\nwhile True:\n    time.sleep(0.05)\n")
    args = ["run", "--worker", "cleanrl", "--algo", str(script), "--env-id", "CartPole-v1", "--run-id", "bare"]
    events = runs_root / "bare" / "events.jsonl"
    args += ["--total-timesteps", "100", "--heartbeat-interval", "0.2"]
    code, out = _stopped_in_a_terminal(args, workdir, events, ready="heartbeat")
    lines = [line for line in out.splitlines() if line.strip()]
    assert code == 130 and read_events(events)[-1]["event"] == "run_cancelled", out[-3000:]
    assert lines[-1] == (
        f"  not resumable: worker 'cleanrl' keeps no checkpoints of algo {str(script)!r} to resume from; "
        "`mosaic run --run-id bare --restart` starts it over"
    )


def test_a_schedulers_sigusr1_to_mosaic_run_stops_the_run_resumable(suite):
    """SIGUSR1 (what a scheduler sends before a time limit or a preemption) to `mosaic run` itself:
    a stop like Ctrl-C, the run cancelled with its end on record and resumable."""
    suite.total_timesteps = 50_000
    process = suite.start(*suite.run_args("usr1"))
    deadline = time.monotonic() + suite.timeout
    while time.monotonic() < deadline and process.poll() is None:
        if suite.run_dir("usr1").is_dir() and metric_steps(suite.events("usr1")):
            break
        time.sleep(0.05)
    process.send_signal(signal.SIGUSR1)
    _out, err = process.communicate(timeout=suite.timeout)
    end = suite.events("usr1")[-1]
    assert process.returncode == 130 and end["event"] == "run_cancelled", (end, err[-2000:])
    assert end["payload"]["reason"] == "received SIGUSR1 (the scheduler's time limit or a preemption is near)"
    assert end["payload"]["resumable"] is True and end["payload"]["from_step"] > 0, end["payload"]
