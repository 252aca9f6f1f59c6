"""A sweep process: takes trials from the study until the budget is covered, one at a time.

* Budget: ``--max-trials`` (the grid's size in grid mode) counted across every sweep process of the
  study, as trials complete, pruned, running, or failed by a seed. Before asking Optuna for a
  trial a process counts them; with a file storage it holds an ``flock`` on
  ``<file>.sweep-lock`` from the count until Optuna has created the trial, so local processes
  never overshoot (on PostgreSQL, machines counting at the same instant can overshoot by one
  each).
* Dead processes: RDB storages (SQLite, PostgreSQL) get Optuna's heartbeats; a trial whose
  process stopped beating is failed and re-queued with the same parameters
  (``RetryFailedTrialCallback``) by the next process that starts a trial. Optuna 5's journal
  storage has no heartbeats: there a process re-queues the running trials of processes on its own
  host whose process is gone.
* SIGTERM/SIGINT/SIGHUP: the running seed's ``mosaic run`` is cancelled (its whole process
  group, by the run host), the trial is marked failed (``interrupted``), the process exits 130.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from mosaic_core import MosaicError
from mosaic_sweep.spec import SweepSpec
from mosaic_sweep.storage import FileLock, StorageURL, retry_callback
from mosaic_sweep.study import grid_size
from mosaic_sweep.trial import SeedFailed, Stopper, SweepStopped, TrialObjective, _say, trial_process

MAX_FAILURES_IN_A_ROW = 3


def budget(spec: SweepSpec) -> int:
    return min(spec.max_trials, grid_size(spec)) if spec.grid else spec.max_trials


def counted(study: Any) -> int:
    """Trials that use up the budget: complete, pruned, running, or failed by a seed (not
    the ones failed because their process died or was stopped: those are re-run)."""
    from optuna.trial import TrialState

    total = 0
    for trial in study.get_trials(deepcopy=False):
        if trial.state in (TrialState.COMPLETE, TrialState.PRUNED, TrialState.RUNNING):
            total += 1
        elif trial.state == TrialState.FAIL and "seed_failure" in trial.user_attrs:
            total += 1
    return total


def reap_dead_local_trials(study: Any, max_retries: int) -> None:
    """Journal storage: fail and re-queue RUNNING trials of dead sweep processes on this host."""
    from optuna.trial import TrialState

    host = socket.gethostname()
    retry = retry_callback(max_retries)
    for trial in study.get_trials(deepcopy=False, states=(TrialState.RUNNING,)):
        label = trial_process(trial)
        name, _, pid = label.rpartition(":")
        if name != host or not pid.isdigit() or _alive(int(pid)):
            continue
        if study._storage.set_trial_state_values(trial._trial_id, state=TrialState.FAIL):
            retry(study, study._storage.get_trial(trial._trial_id))
            _say(f"trial {trial.number}: its sweep process {label} is gone; re-queued")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            return handle.read().rsplit(b")", 1)[1].split()[0] != b"Z"
    except OSError:
        return False


@contextlib.contextmanager
def _signals(stopper: Stopper) -> Iterator[None]:
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {}
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        previous[sig] = signal.signal(
            sig, lambda signum, _f: stopper.request(f"received {signal.Signals(signum).name}")
        )
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def take_trials(
    spec: SweepSpec,
    study: Any,
    location: StorageURL,
    runs_root: Path,
    launcher_argv: list[str] | None = None,
    own_trials: int | None = None,
) -> int:
    """Run trials until the budget is covered (or ``own_trials`` of this process's: a job array's
    task runs one); 0 when done, 130 when stopped by a signal. ``launcher_argv``: where each
    seed's ``mosaic run`` executes (``LauncherChoice.argv()``)."""
    import optuna

    stopper, lock = Stopper(), FileLock(location)
    objective = TrialObjective(
        spec, runs_root, location.shown, stopper, before_trial=lock.release, launcher_argv=launcher_argv
    )
    limit, failures = budget(spec), 0
    with _signals(stopper):
        while stopper.reason is None:
            lock.acquire()
            try:
                if location.kind == "journal":
                    reap_dead_local_trials(study, spec.max_retries)
                else:
                    optuna.storages.fail_stale_trials(study)
                if counted(study) >= limit:
                    break
                before = objective.last_error
                study.optimize(objective, n_trials=1, catch=(SeedFailed,))
                own_trials = None if own_trials is None else own_trials - 1
                if own_trials == 0:
                    break
            except SweepStopped:
                break
            finally:
                lock.release()
            failures = failures + 1 if objective.last_error is not before else 0
            if failures >= MAX_FAILURES_IN_A_ROW:
                raise MosaicError(
                    f"{failures} trials in a row failed; stopping this sweep process. Last: {objective.last_error}"
                )
    if stopper.reason is not None:
        _say(f"sweep process {os.getpid()} stopped ({stopper.reason}); its running seed was cancelled")
        return 130
    return 0
