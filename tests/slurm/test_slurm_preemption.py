"""Preemption and time limits on a real one-node Slurm cluster (tests/slurm/conftest.py): a job
requeued mid-run (``scontrol requeue``, as a preemption does), one at its time limit (SIGUSR1 the
grace period before it; the job requeues itself) and one preempted twice each resume the run
through the run contract and finish it, with one history: ``mosaic run --launcher slurm`` follows
every attempt and exits 0 with ``run_completed``. The bundled CleanRL ppo on CartPole (small
budgets); it checkpoints when stopped (SIGTERM, SIGUSR1). The time-limit test waits a minute or so
for Slurm: its run is the example worker's, paced so that it is still running then without using
the CPU meanwhile. No job, process or file left.

A requeued job is eligible only about two minutes later (``EligibleTime``); the tests make it
eligible at once (``scontrol update jobid=N StartTime=now``), as an idle cluster would soon."""

from __future__ import annotations

import json
import os
import subprocess
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from mosaic_core.events import metric_steps, one_history
from tests.conftest import BIN
from tests.slurm.test_slurm_run import processes_of

WAIT_S = 300.0


SLURM_JOB = ["--json", "--launcher", "slurm", "--num-cpus", "1", "--grace-period", "20"]


def ppo(total: int) -> list[str]:
    return [
        "run",
        "--worker",
        "cleanrl",
        "--algo",
        "ppo",
        "--env-id",
        "CartPole-v1",
        "--total-timesteps",
        str(total),
        "--extras",
        '{"num_envs": 1, "num_steps": 128}',
        *SLURM_JOB,
    ]


# The time-limit test's policy (the example worker runs a policy file): its first attempt plays a
# step every 5 ms (still running when Slurm's time limit comes, a minute or two later, at almost no CPU),
# the resumed attempt at full speed.
PACED_POLICY = """import sys, time

FIRST_ATTEMPT = sys.argv[sys.argv.index("--mode") + 1] != "resume"


def act(observation, action_space):
    if FIRST_ATTEMPT:
        time.sleep(0.005)
    return action_space.sample()
"""


class Caller:
    """``mosaic run … --launcher slurm --json`` in the background, its events collected as they come."""

    def __init__(self, argv: list[str], cwd: Path):
        self.proc = subprocess.Popen(
            [str(BIN / "mosaic"), *argv],
            cwd=cwd,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
        self.events: list[dict[str, Any]] = []
        self.stderr = ""
        self.changed = threading.Condition()
        self.readers = [
            threading.Thread(target=self._read_events, daemon=True),
            threading.Thread(target=self._read_stderr, daemon=True),
        ]
        for reader in self.readers:
            reader.start()

    def _read_events(self) -> None:
        for line in self.proc.stdout:
            with self.changed:
                self.events.append(json.loads(line))
                self.changed.notify_all()
        with self.changed:
            self.changed.notify_all()

    def _read_stderr(self) -> None:
        self.stderr = self.proc.stderr.read()

    def wait_for(self, wanted: Callable[[dict[str, Any]], bool], after: int = 0) -> int:
        """The index of the first event past ``after`` that is ``wanted``, waiting for it."""
        deadline = time.monotonic() + WAIT_S
        with self.changed:
            while True:
                found = [i for i, event in enumerate(self.events) if i >= after and wanted(event)]
                if found:
                    return found[0]
                if self.proc.poll() is not None and not self.readers[0].is_alive():
                    raise AssertionError(
                        f"the caller ended ({self.proc.returncode}) first: {self.events[-3:]} {self.stderr[-2000:]}"
                    )
                assert time.monotonic() < deadline, f"no such event within {WAIT_S:g} s: {self.events[-3:]}"
                self.changed.wait(1.0)

    def finish(self) -> int:
        code = self.proc.wait(timeout=WAIT_S)
        for reader in self.readers:
            reader.join(timeout=30)
        return code

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


def event(name: str) -> Callable[[dict[str, Any]], bool]:
    return lambda record: record["event"] == name


def metrics_past(step: int) -> Callable[[dict[str, Any]], bool]:
    return lambda record: record["event"] == "metrics" and (metric_steps([record]) or [-1])[0] > step


def job_state(slurm, job_id: str) -> str:
    done = subprocess.run(
        ["squeue", "-h", "-j", job_id, "-o", "%T"], capture_output=True, text=True, env={**os.environ, **slurm.env()}
    )
    return done.stdout.strip()


def elapsed_s(slurm, job_id: str) -> int:
    """How long the job has run (squeue's %M: M:SS, H:MM:SS or D-HH:MM:SS)."""
    done = subprocess.run(
        ["squeue", "-h", "-j", job_id, "-o", "%M"], capture_output=True, text=True, env={**os.environ, **slurm.env()}
    )
    days, _, clock = done.stdout.strip().rpartition("-")
    seconds = 0
    for part in clock.split(":"):
        seconds = seconds * 60 + int(part)
    return seconds + int(days or 0) * 86400


def release(slurm, job_id: str, *settings: str) -> None:
    """The requeued job, once pending again and its last attempt gone from the node (a job that
    requeued itself is pending before its script ends; started again on the node before that,
    Slurm refuses it: "Job credential revoked"), made eligible now (and given ``settings``)."""
    deadline = time.monotonic() + WAIT_S
    while job_state(slurm, job_id) != "PENDING" or not slurm.idle():
        assert time.monotonic() < deadline, f"job {job_id} was not requeued: {job_state(slurm, job_id)!r}"
        time.sleep(0.3)
    # slurmd refuses a job started in the same second its last credential was revoked (whole
    # seconds: "Job credential revoked"); Slurm's own two-minute wait avoids it, ours waits past it
    time.sleep(2.0)
    slurm.scontrol("update", f"jobid={job_id}", "StartTime=now", *settings)


def assert_one_history(events: list[dict[str, Any]], total: int, resumes: int) -> None:
    """One history: every step counted once, the steps never going back past a resume, the budget reached."""
    names = [e["event"] for e in events]
    assert names[0] == "run_started" and names[-1] == "run_completed", names
    assert names.count("run_resumed") == resumes and names.count("run_cancelled") == resumes, names
    assert [e["seq"] for e in events] == list(range(1, len(events) + 1))  # one log, numbered on
    for index in [i for i, name in enumerate(names) if name == "run_resumed"]:
        from_step = events[index]["payload"]["from_step"]
        stopped = [e for e in events[:index] if e["event"] == "run_cancelled"][-1]["payload"]
        assert stopped["resumable"] and stopped["from_step"] == from_step > 0  # the stopped attempt's checkpoint
        assert all(step > from_step for step in metric_steps(events[index:])), "a step went back past the resume"
    steps = metric_steps(one_history(events))
    assert all(a <= b for a, b in zip(steps, steps[1:])), steps
    assert steps[-1] == total, steps[-3:]


def assert_nothing_left(slurm, run_id: str, run_dir: Path) -> None:
    deadline = time.monotonic() + 60
    while (slurm.jobs() or processes_of(run_id)) and time.monotonic() < deadline:
        time.sleep(0.3)
    assert not processes_of(run_id)
    analytics = json.loads((run_dir / "manifest.json").read_text())
    assert analytics["status"] == "completed"


def test_a_job_requeued_mid_run_resumes_it_to_the_end(slurm, no_jobs_left, workdir, runs_root):
    total = 12800
    caller = Caller([*ppo(total), "--slurm-time", "30:00"], workdir)
    try:
        caller.wait_for(metrics_past(1000))
        job_id = caller.events[0]["payload"]["slurm"]["job_id"]
        slurm.scontrol("requeue", job_id)  # what a preemption does to a requeueable job
        cancelled = caller.wait_for(event("run_cancelled"))
        release(slurm, job_id)
        caller.wait_for(event("run_resumed"), after=cancelled)
        code = caller.finish()
    finally:
        caller.close()
    assert code == 0, caller.stderr
    events = caller.events
    assert_one_history(events, total, resumes=1)
    run_id = events[0]["run_id"]
    recorded = [json.loads(line) for line in (runs_root / run_id / "events.jsonl").read_text().splitlines()]
    assert recorded == events  # the caller printed every attempt's events, as recorded
    assert_nothing_left(slurm, run_id, runs_root / run_id)


def test_a_job_at_its_time_limit_checkpoints_requeues_itself_and_finishes(slurm, no_jobs_left, workdir, runs_root):
    """With ``--slurm-grace 30``, Slurm sends SIGUSR1 to the job's script 30 to 60 s before its
    time limit (it checks every 30 s); the run stops keeping a checkpoint (``run_cancelled``
    naming SIGUSR1), and the job, which Slurm does not requeue at a time limit, requeues itself;
    the next attempt resumes the run. Once the run trains, the test shortens the job's limit to
    end 30 to 90 s later (a limit of whole minutes), and gives the requeued job ten minutes."""
    total = 50000  # the first attempt plays 200 steps a second: at most 20,000 by its SIGUSR1
    policy = workdir / "paced.py"
    policy.write_text(PACED_POLICY)
    paced = ["run", "--worker", "example", "--algo", str(policy), "--env-id", "CartPole-v1",
             "--total-timesteps", str(total), *SLURM_JOB]  # fmt: skip
    caller = Caller([*paced, "--slurm-time", "10:00", "--slurm-grace", "30"], workdir)
    try:
        caller.wait_for(metrics_past(1000))
        job_id = caller.events[0]["payload"]["slurm"]["job_id"]
        minutes = (elapsed_s(slurm, job_id) + 90) // 60
        slurm.scontrol("update", f"jobid={job_id}", f"TimeLimit={minutes}")
        cancelled = caller.wait_for(event("run_cancelled"))
        assert "SIGUSR1" in caller.events[cancelled]["payload"]["reason"], caller.events[cancelled]
        release(slurm, job_id, "TimeLimit=10:00")
        caller.wait_for(event("run_resumed"), after=cancelled)
        code = caller.finish()
    finally:
        caller.close()
    assert code == 0, caller.stderr
    assert_one_history(caller.events, total, resumes=1)
    run_id = caller.events[0]["run_id"]
    assert_nothing_left(slurm, run_id, runs_root / run_id)


def test_a_run_preempted_twice_finishes_with_every_step_counted_once(slurm, no_jobs_left, workdir, runs_root):
    total = 19200
    caller = Caller([*ppo(total), "--slurm-time", "30:00"], workdir)
    try:
        job_id, seen = None, 0
        for _attempt in range(2):
            resumed_from = caller.events[seen]["payload"].get("from_step", 0) if seen else 0
            seen = caller.wait_for(metrics_past(resumed_from + 1000), after=seen)
            job_id = job_id or caller.events[0]["payload"]["slurm"]["job_id"]
            slurm.scontrol("requeue", job_id)
            cancelled = caller.wait_for(event("run_cancelled"), after=seen)
            release(slurm, job_id)
            seen = caller.wait_for(event("run_resumed"), after=cancelled)
        code = caller.finish()
    finally:
        caller.close()
    assert code == 0, caller.stderr
    assert_one_history(caller.events, total, resumes=2)
    run_id = caller.events[0]["run_id"]
    assert_nothing_left(slurm, run_id, runs_root / run_id)
