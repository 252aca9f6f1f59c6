"""``mosaic experiment run SPEC --target HOST:PORT``: each (group, seed) is submitted to a trainer
daemon (``SubmitRun`` with the run's id, the config a ``mosaic run`` of it would have), at most
``parallel`` at a time, each followed until the daemon records its end.

Resumable as locally, from the daemon's records and the runs' own directories: a completed seed
is not submitted again; a cancelled one with a checkpoint is submitted again with its run id,
which the daemon resumes (``run_resumed`` in its events); a failed one, or one with no
checkpoint, runs as a new attempt ``<run id>-a<N>``. A seed still queued or running on the daemon
(its experiment command was killed) is followed, not submitted twice. A signal to this command
cancels the runs it submitted, through the daemon, so they stay resumable.
"""

from __future__ import annotations

import json
import signal
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mosaic_core import MosaicError
from mosaic_experiments.runner import attempts, resumable, run_extras, say
from mosaic_experiments.spec import Experiment, GroupSpec

POLL_S = 0.5
ENDED = ("FAULT", "TERM")
GONE = {"status": "FAULT", "terminal_event": None, "exit_code": None, "run_dir": None}  # no daemon answered


@dataclass(frozen=True)
class Daemon:
    target: str
    token: str | None


@dataclass(frozen=True)
class Seed:
    group: GroupSpec
    seed: int
    run_id: str
    how: str  # "new" (submitted), "resume" (submitted again: the daemon resumes it) or "follow" (already there)


def records(daemon: Daemon) -> dict[str, dict[str, Any]]:
    from mosaic_core.trainer.client import list_runs, record_to_dict

    return {r.run_id: record_to_dict(r) for r in list_runs(daemon.target, token=daemon.token)}


def plan(exp: Experiment, known: dict[str, dict[str, Any]]) -> tuple[list[Seed], list[str]]:
    """What is left (each seed's run id and how it runs) and the run ids completed already."""

    def state(run_id: str) -> str | None:
        record = known.get(run_id)
        if record is None:
            return None
        if record["status"] not in ENDED:
            return "follow"
        if record["terminal_event"] == "run_completed" and record["exit_code"] in (0, None):
            return "done"
        cancelled = record["status"] == "TERM" and record["run_dir"]
        return "resume" if cancelled and resumable(Path(record["run_dir"])) else "again"

    todo, done = [], []
    for group, seed, run_id, what in attempts(exp, state):
        if what == "done":
            done.append(run_id)
        else:
            todo.append(Seed(group, seed, run_id, what))
    return todo, done


def config_json(exp: Experiment, item: Seed) -> str:
    """The run's worker config, as `mosaic submit` takes it."""
    group = item.group
    return json.dumps(
        {
            "worker": group.worker,
            "algo": group.algo,
            "env_id": group.env,
            "total_timesteps": group.total_timesteps,
            "seed": item.seed,
            "extras": run_extras(exp, group),
        }
    )


class DaemonPool:
    """Submits and follows the seeds, at most ``parallel`` at a time; ``stop()`` (a signal)
    submits no more and cancels those in flight through the daemon."""

    def __init__(self, exp: Experiment, daemon: Daemon):
        self.exp, self.daemon = exp, daemon
        self.live: set[str] = set()
        self.lock = threading.Lock()
        self.stopping = False
        self.runs_root: Path | None = None
        self.polling = threading.Lock()
        self.asked_at = -float("inf")  # when the cached records were asked for
        self.cache: dict[str, dict[str, Any]] = {}

    def one(self, item: Seed) -> tuple[str, int]:
        from mosaic_core.trainer import client

        with self.lock:
            if self.stopping:
                return item.run_id, 130
            if item.how != "follow":
                try:
                    client.submit(self.daemon.target, config_json(self.exp, item), item.run_id, token=self.daemon.token)
                except MosaicError as exc:
                    say(f"{item.run_id}: not submitted: {exc}")
                    return item.run_id, 1
            self.live.add(item.run_id)
            since = time.monotonic()
        verb = {"new": "submitted", "resume": "resumed", "follow": "following"}[item.how]
        say(f"{verb} {item.run_id} ({item.group.label}, seed {item.seed}) on the daemon at {self.daemon.target}")
        record = self._wait(item.run_id, since)
        with self.lock:
            self.live.discard(item.run_id)
        if record["run_dir"]:
            self.runs_root = Path(record["run_dir"]).parent
        completed = record["terminal_event"] == "run_completed" and record["exit_code"] in (0, None)
        status = "completed" if completed else (record["terminal_event"] or "failed").removeprefix("run_")
        why = f" ({record['failure_reason'][:200]})" if not completed and record["failure_reason"] else ""
        say(f"{item.run_id}: {status}{why}")
        return item.run_id, 0 if completed else 1

    def _wait(self, run_id: str, since: float) -> dict[str, Any]:
        """The run's record once the daemon has recorded its end, from records asked for after
        ``since`` (its submission: a resubmitted run's earlier end is not its end). A daemon that
        stops answering is asked again, as it may restart, until this command is stopped."""
        silent = False
        while True:
            try:
                record = self._known(since).get(run_id)
            except MosaicError as exc:
                if self.stopping:
                    return {**GONE, "failure_reason": str(exc)}
                if not silent:
                    say(f"{run_id}: {exc}; asking again")
                silent, record = True, None
            if record is not None and record["status"] in ENDED:
                return record
            time.sleep(POLL_S)

    def _known(self, since: float) -> dict[str, dict[str, Any]]:
        """The daemon's records asked for after ``since``, at most once per :data:`POLL_S` for all
        the threads."""
        with self.polling:
            now = time.monotonic()
            if self.asked_at <= since or now - self.asked_at >= POLL_S:
                self.cache, self.asked_at = records(self.daemon), now
            return self.cache

    def stop(self, signum: int, _frame: object) -> None:
        with self.lock:
            self.stopping = True
            live = sorted(self.live)
        threading.Thread(target=self._cancel, args=(live,), daemon=True).start()

    def _cancel(self, run_ids: list[str]) -> None:
        from mosaic_core.trainer import client

        for run_id in run_ids:
            try:
                client.cancel(self.daemon.target, run_id, token=self.daemon.token)
            except MosaicError as exc:
                say(f"{run_id}: could not cancel it: {exc}")


def run(exp: Experiment, daemon: Daemon, check: Any) -> int:
    """Every seed not completed yet, through the daemon; ``check()``: the spec's preflight."""
    todo, done = plan(exp, records(daemon))
    if todo:
        check()
    total = len(exp.groups) * len(exp.seeds)
    say(
        f"experiment {exp.name}: {len(exp.groups)} groups × {len(exp.seeds)} seeds; {len(done)} of {total} "
        f"runs completed already, {len(todo)} to run on the daemon at {daemon.target}, {exp.parallel} at a time"
    )
    pool = DaemonPool(exp, daemon)
    if todo:
        previous = {sig: signal.signal(sig, pool.stop) for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)}
        try:
            with ThreadPoolExecutor(max_workers=exp.parallel) as executor:
                codes = [code for _run_id, code in executor.map(pool.one, todo)]
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)
    else:
        codes = []
    failed = sum(code != 0 for code in codes)
    if todo:
        say(
            f"experiment {exp.name}: {len(codes) - failed} runs completed, {failed} not"
            + ("; run the same command again to run those" if failed else "")
            + f"; compare them: mosaic compare {exp.name}"
            + (f" --runs-dir {pool.runs_root}" if pool.runs_root else "")
        )
    if pool.stopping:
        return 130
    return 1 if failed else 0
