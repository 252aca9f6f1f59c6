"""A daemon SIGKILLed at any moment of its runs' lives (before, during, right after a run's start,
during its end) and restarted each time: every run is recorded once, with the status its own
events say, and no process of a killed daemon's run outlives it. Real ``mosaic daemon`` and
``mosaic run`` processes (the example worker: a random policy, no torch)."""

from __future__ import annotations

import json
import os
import random
import signal
import time
from pathlib import Path

import pytest

from mosaic_core.events import TERMINAL, read_events
from mosaic_core.trainer import client
from mosaic_core.trainer import trainer_pb2 as pb
from mosaic_core.trainer.recovery import RESTART_REASON

from .conftest import wait_final, wait_for

pytestmark = pytest.mark.slow
RUNS = 12


def _processes_naming(marker: str) -> list[int]:
    """Live processes whose command line names ``marker`` (a daemon's state dir)."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as fh:
                argv = fh.read()
            with open(f"/proc/{entry}/stat", "rb") as fh:
                zombie = fh.read().rsplit(b")", 1)[1].split()[0] == b"Z"
        except OSError:
            continue
        if marker.encode() in argv and not zombie:
            found.append(int(entry))
    return found


def test_a_daemon_killed_at_random_moments_loses_no_run_and_leaves_no_process(daemon_process, tmp_path):
    seed = int(os.environ.get("MOSAIC_CHAOS_SEED", "28"))
    rng = random.Random(seed)
    state = tmp_path / "state"
    submitted = []
    for index in range(RUNS):
        daemon = daemon_process("--state-dir", str(state), "--grace-period", "2", "--max-concurrent", "2", mosaic=True)
        # Short runs that may end before the kill; the kill falls anywhere in the first two seconds.
        config = {
            "worker": "example",
            "algo": "random",
            "env_id": "CartPole-v1",
            "total_timesteps": rng.choice([50, 400, 100_000]),
        }
        submitted.append(client.submit(daemon.target, json.dumps(config)).run_id)
        time.sleep(rng.choice([0.0, rng.uniform(0.0, 0.2), rng.uniform(0.2, 2.0)]))
        os.kill(daemon.pid, signal.SIGKILL)
        daemon.proc.wait()
        # The killed daemon's runs stop themselves (parent-death signal); nothing of them lingers.
        wait_for(
            lambda: not _processes_naming(str(state)),
            timeout=60,
            what=f"the runs of killed daemon #{index} (seed {seed}) to stop",
        )
    last = daemon_process("--state-dir", str(state), "--grace-period", "2", mosaic=True)
    records = client.list_runs(last.target)
    assert sorted(r.run_id for r in records) == sorted(submitted)  # each once
    for run_id in submitted:
        final = wait_final(last.target, run_id, timeout=120)
        events = read_events(Path(final.run_dir) / "events.jsonl")
        ends = [e["event"] for e in events if e["event"] in TERMINAL]
        assert len(ends) <= 1, (run_id, ends)
        if ends:  # the run's own end is its record
            assert final.terminal_event == ends[0], (seed, run_id, final, [e["event"] for e in events])
            assert final.status == (pb.RUN_STATUS_FAULT if ends[0] == "run_failed" else pb.RUN_STATUS_TERM)
        else:  # it never wrote one: it may not have started, and is never left running
            assert (final.status, final.terminal_event) == (pb.RUN_STATUS_FAULT, "run_failed"), (seed, run_id, final)
            assert final.failure_reason.startswith(RESTART_REASON) or "exited" in final.failure_reason, final
    assert last.stop() == 0
    assert not _processes_naming(str(state))
