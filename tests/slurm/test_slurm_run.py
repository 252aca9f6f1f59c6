"""`mosaic run --launcher slurm` on a real one-node Slurm cluster (tests/slurm/conftest.py), what
is Slurm's own: the run as a job (its files, its options), --detach, no sbatch, the signal before
the time limit; no job, process or file left. (A run, a stop and its resume, bad options: the
launcher contract, test_slurm_contract.py.) Training: the bundled CleanRL ppo on CartPole (tiny budgets)."""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

from tests.conftest import BIN, run_cli

PPO = [
    "run",
    "--worker",
    "cleanrl",
    "--algo",
    "ppo",
    "--env-id",
    "CartPole-v1",
    "--total-timesteps",
    "512",
    "--extras",
    '{"num_envs": 1, "num_steps": 128}',
]


def events_of(stdout: str) -> list[dict]:
    return [json.loads(line) for line in stdout.splitlines() if line.strip()]


def processes_of(run_id: str) -> list[int]:
    """Processes whose command line names the run (the node's host, the training process)."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit() and int(entry) != os.getpid():
            try:
                cmdline = Path(f"/proc/{entry}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            except OSError:
                continue
            if run_id in cmdline:
                found.append(int(entry))
    return found


def test_a_run_executes_as_a_job_with_its_events_on_the_callers_stdout(slurm, no_jobs_left, mosaic, runs_root):
    done = mosaic(
        *PPO,
        "--json",
        "--launcher",
        "slurm",
        "--slurm-partition",
        "debug",
        "--slurm-time",
        "10:00",
        "--num-cpus",
        "1",
        timeout=600,
    )
    assert done.returncode == 0, done.stderr
    events = done.events
    names = [e["event"] for e in events]
    assert names[0] == "run_started" and names[-1] == "run_completed" and "metrics" in names
    assert [e["seq"] for e in events] == list(range(1, len(events) + 1))
    started = events[0]["payload"]
    assert started["slurm"]["cpus"] == "1" and started["node"].startswith(f"slurm job {started['slurm']['job_id']} on ")
    run_dir = runs_root / events[0]["run_id"]
    recorded = [json.loads(line) for line in (run_dir / "events.jsonl").read_text().splitlines()]
    assert recorded == events  # the caller printed exactly what the node recorded
    job_id = started["slurm"]["job_id"]
    assert (run_dir / "slurm" / f"job-{job_id}.out").exists() and (run_dir / "slurm" / f"job-{job_id}.err").exists()
    assert json.loads((run_dir / "manifest.json").read_text())["status"] == "completed"
    options = json.loads((run_dir / "slurm" / "job.json").read_text())["options"]
    assert "--requeue" in options and "--signal=B:USR1@120" in options and "--partition=debug" in options
    assert not processes_of(events[0]["run_id"])


def test_detach_submits_prints_the_job_and_returns(slurm, no_jobs_left, mosaic, workdir, runs_root):
    done = mosaic(*PPO, "--launcher", "slurm", "--detach", timeout=120)
    assert done.returncode == 0, done.stderr
    submitted = json.loads(done.stdout)
    run_id, job_id = submitted["run_id"], submitted["slurm_job_id"]
    assert job_id.isdigit() and f"Slurm job {job_id}" in done.stderr
    followed = run_cli(["logs", "-f", "--json", run_id], cwd=workdir, timeout=600)
    assert followed.returncode == 0, followed.stderr
    assert [e["event"] for e in followed.events][-1] == "run_completed"
    deadline = time.monotonic() + 30
    while slurm.jobs() and time.monotonic() < deadline:  # its epilog: the job leaves the queue
        time.sleep(0.2)


def test_no_sbatch_on_path_is_one_line(slurm, no_jobs_left, mosaic, runs_root):
    done = mosaic(*PPO, "--launcher", "slurm", env={"PATH": str(BIN)})
    assert done.returncode == 2, done.stderr
    lines = [line for line in done.stderr.splitlines() if not line.startswith("mosaic: note:")]
    assert lines == [
        "mosaic: error: the Slurm launcher needs `sbatch`, which is not on PATH (run on a Slurm login "
        "node, or put Slurm's client commands on PATH)"
    ]
    assert not runs_root.exists() or not any(runs_root.iterdir())


def test_the_signal_before_the_time_limit_stops_the_run_keeping_it(slurm, no_jobs_left, workdir, runs_root):
    """Slurm sends SIGUSR1 to the job's script GRACE seconds before its time limit (or a
    preemption): the run's host on the node stops the training process, which checkpoints, the
    attempt ends cancelled (resumable) and the job requeues itself; cancelled while it waits,
    the run stays as that attempt left it."""
    long_ppo = [*PPO[: PPO.index("--total-timesteps") + 1], "5000000", *PPO[PPO.index("--total-timesteps") + 2 :]]
    proc = subprocess.Popen(
        [
            str(BIN / "mosaic"),
            *long_ppo,
            "--json",
            "--launcher",
            "slurm",
            "--slurm-time",
            "30:00",
            "--slurm-grace",
            "60",
            "--grace-period",
            "20",
        ],
        cwd=workdir,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    lines = []
    try:
        for line in proc.stdout:
            lines.append(line)
            if json.loads(line)["event"] == "metrics":
                break
        job_id = json.loads(lines[0])["payload"]["slurm"]["job_id"]
        subprocess.run(["scancel", "--batch", "--signal=USR1", job_id], check=True, timeout=30)
        for line in proc.stdout:  # the caller follows the run past its first attempt's end
            lines.append(line)
            if json.loads(line)["event"] == "run_cancelled":
                break
        deadline = time.monotonic() + 60
        while slurm.jobs() and "PENDING" not in slurm.jobs()[0] and time.monotonic() < deadline:
            time.sleep(0.3)
        assert slurm.jobs() and "PENDING" in slurm.jobs()[0], slurm.jobs()  # it requeued itself
        subprocess.run(["scancel", job_id], check=True, timeout=30)  # the user gives up on the run
        rest, stderr = proc.communicate(timeout=180)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    events = events_of("".join(lines) + rest)
    assert events[-1]["event"] == "run_cancelled", (events[-1], stderr)
    assert "SIGUSR1" in events[-1]["payload"]["reason"]
    assert proc.returncode == 130
    run_id = events[0]["run_id"]
    assert list((runs_root / run_id).rglob("*.pt")) or list((runs_root / run_id).rglob("*.cleanrl_model")), (
        "the stopped run left no checkpoint"
    )
