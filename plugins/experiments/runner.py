"""``mosaic experiment run``: each (group, seed) is one ``mosaic run`` subprocess, at most
``parallel`` at a time, the way the sweep runs its seeds (where each runs, ``--launcher`` and
its options given here, is passed on on each run's command line: ``LauncherChoice.argv``; through a
trainer daemon instead: :mod:`mosaic_experiments.on_daemon`).

Resumable: a seed whose run completed is not run again. One that was interrupted (cancelled,
lost, stopped with this command) and has a checkpoint resumes through the run contract: the
same ``mosaic run --run-id`` again, which the host continues from its newest checkpoint
(``run_resumed`` in its events). One that failed, or left no checkpoint, runs again as a new
attempt ``<run id>-a<N>``; the old run stays on record. Every run carries ``extras.experiment``
and ``extras.experiment_group``.
Before anything runs, every group is put through ``mosaic run --dry-run`` (the worker's own
validation of the worker, algorithm, env and overrides), so a bad spec starts nothing.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from mosaic_core import UsageError
from mosaic_core.procs import mosaic_command, with_parent_death_signal
from mosaic_core.runstore.summary import summarize
from mosaic_core.toolkit import extras_for_child
from mosaic_experiments.spec import Experiment, GroupSpec

GRACE_S = 5.0
DRY_RUN_TIMEOUT_S = 120


def command(
    exp: Experiment,
    group: GroupSpec,
    seed: int,
    run_id: str,
    root: Path,
    dry_run: bool = False,
    launcher: tuple[str, ...] = (),
) -> list[str]:
    """A seed's ``mosaic run``; ``launcher``: where it runs (``--launcher slurm …``; a dry run is here)."""
    argv = [
        *mosaic_command(),
        "run",
        "--worker",
        group.worker,
        "--algo",
        group.algo,
        "--env-id",
        group.env,
        "--total-timesteps",
        str(group.total_timesteps),
        "--seed",
        str(seed),
        "--run-id",
        run_id,
        "--runs-dir",
        str(root),
        "--extras",
        json.dumps(extras_for_child(run_extras(exp, group))[0]),
    ]
    if dry_run:
        return [*argv, "--dry-run", "--emit-summary", "--launcher", "local"]
    return [*argv, "--quiet", "--grace-period", str(GRACE_S), *launcher]


def environment(exp: Experiment, group: GroupSpec, base: dict[str, str]) -> dict[str, str]:
    """``base`` and the group's secret extras (``wandb_api_key``…), which reach a seed's ``mosaic
    run`` in its environment as ``mosaic run`` takes them, never on its command line."""
    return {**base, **extras_for_child(run_extras(exp, group))[1]}


def run_extras(exp: Experiment, group: GroupSpec) -> dict[str, Any]:
    """A run's extras: the group's, its overrides as ``algo_params``, the experiment's tags."""
    extras = {
        **group.extras,
        "algo_params": {**group.extras.get("algo_params", {}), **group.overrides},
        "experiment": exp.name,
        "experiment_group": group.label,
    }
    if not extras["algo_params"]:
        del extras["algo_params"]
    return extras


def preflight(exp: Experiment, root: Path) -> None:
    """The worker's own check of each group (``mosaic run --dry-run``); one line naming the first refused."""
    from mosaic_core.toolkit import find_worker

    for index, group in enumerate(exp.groups):
        try:
            find_worker(group.worker)
        except UsageError as exc:
            raise UsageError(f"experiment spec {exp.source}: group {index + 1}: {exc}") from None
        done = subprocess.run(
            command(exp, group, exp.seeds[0], f"{exp.name}-preflight", root, dry_run=True),
            env=environment(exp, group, dict(os.environ)),
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=DRY_RUN_TIMEOUT_S,
        )
        if done.returncode != 0:
            lines = [line for line in done.stderr.splitlines() if line.strip()]
            why = lines[-1].removeprefix("mosaic: error: ") if lines else f"exit code {done.returncode}"
            raise UsageError(
                f"experiment spec {exp.source}: group {index + 1} ({group.label}) is refused by `mosaic run`: {why}"
            )


def attempts(exp: Experiment, state: Callable[[str], str | None]) -> Iterator[tuple[GroupSpec, int, str, str]]:
    """Each seed's (group, seed, run id, what to do). ``state(run_id)`` says what its run asks
    for: ``done``, ``resume``, ``follow`` (it is still running), ``again`` (a new attempt
    ``<run id>-a<N>``, the next id asked in turn) or None (no such run yet: ``new``)."""
    for group in exp.groups:
        for seed in exp.seeds:
            base = exp.run_id(group, seed)
            attempt, run_id = 1, base
            while (what := state(run_id)) == "again":
                attempt += 1
                run_id = f"{base}-a{attempt}"
            yield group, seed, run_id, what or "new"


def plan(exp: Experiment, root: Path) -> tuple[list[tuple[GroupSpec, int, str]], list[str]]:
    """What is left to run ((group, seed, run id) each: an existing run id is resumed) and the
    run ids already completed: the owner's own runs only (an imported, untrusted run under a
    seed's id is neither done nor resumed; the seed runs as a new attempt)."""
    from mosaic_core.runstore.trust import untrusted_run

    def state(run_id: str) -> str | None:
        if not (root / run_id).exists():
            return None
        if untrusted_run(root / run_id) is not None:  # an archive's run under a seed's id is not the owner's seed
            say(
                f"{run_id} was imported and is untrusted: never one of this experiment's seeds; it runs as a new attempt"
            )
            return "again"
        status = summarize(root / run_id, with_score=False).status
        if status == "completed":
            return "done"
        return "resume" if status != "failed" and resumable(root / run_id) else "again"

    todo, done = [], []
    for group, seed, run_id, what in attempts(exp, state):
        if what == "done":
            done.append(run_id)
        else:
            todo.append((group, seed, run_id))
    return todo, done


def resumable(run_dir: Path) -> bool:
    """A recorded run (our own directory, not a link, not imported) with a checkpoint to continue from."""
    from mosaic_core import MosaicError
    from mosaic_core.runstore.trust import untrusted_run
    from mosaic_experiments.checkpoints import newest

    try:
        if not run_dir.is_dir() or run_dir.is_symlink() or untrusted_run(run_dir) is not None:
            return False
        return newest(run_dir) is not None
    except MosaicError:  # a config the host refuses: a new attempt
        return False


class Pool:
    """Runs the commands, at most ``parallel`` at a time; ``stop()`` (a signal) cancels them all."""

    def __init__(self, exp: Experiment, root: Path, launcher: tuple[str, ...]):
        self.exp, self.root, self.launcher = exp, root, launcher
        self.procs: dict[str, subprocess.Popen[bytes]] = {}
        self.lock = threading.Lock()
        self.stopping = False

    def one(self, item: tuple[GroupSpec, int, str]) -> tuple[str, int]:
        group, seed, run_id = item
        with self.lock:
            if self.stopping:
                return run_id, 130
            resuming = (self.root / run_id).is_dir()
            from mosaic_core import SHARE_VAR, share

            env = {**os.environ, SHARE_VAR: os.environ.get(SHARE_VAR) or str(share(self.exp.parallel))}
            env = environment(self.exp, group, env)
            proc = subprocess.Popen(
                with_parent_death_signal(command(self.exp, group, seed, run_id, self.root, launcher=self.launcher)),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
                start_new_session=True,
                env=env,
            )
            self.procs[run_id] = proc
        say(f"{'resumed' if resuming else 'started'} {run_id} ({group.label}, seed {seed})")
        _out, err = proc.communicate()
        with self.lock:
            del self.procs[run_id]
        status = summarize(self.root / run_id).status if (self.root / run_id).is_dir() else "failed"
        tail = [line for line in err.decode(errors="replace").splitlines() if line.strip()][-1:]
        say(f"{run_id}: {status}" + (f" ({tail[0][:200]})" if status != "completed" and tail else ""))
        return run_id, proc.returncode

    def stop(self, signum: int, _frame: object) -> None:
        with self.lock:
            self.stopping = True
            for proc in self.procs.values():
                try:
                    os.killpg(proc.pid, signal.SIGTERM)
                except ProcessLookupError:
                    pass


def run(exp: Experiment, root: Path, launcher: tuple[str, ...] = ()) -> int:
    """Every seed not completed yet, each ``mosaic run`` with ``launcher`` (its flags)."""
    todo, done = plan(exp, root)
    if todo:
        preflight(exp, root)
    total = len(exp.groups) * len(exp.seeds)
    say(
        f"experiment {exp.name}: {len(exp.groups)} groups × {len(exp.seeds)} seeds; {len(done)} of {total} "
        f"runs completed already, {len(todo)} to run, {exp.parallel} at a time"
    )
    if not todo:
        return 0
    pool = Pool(exp, root, launcher)
    previous = {sig: signal.signal(sig, pool.stop) for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)}
    try:
        with ThreadPoolExecutor(max_workers=exp.parallel) as executor:
            codes = [code for _run_id, code in executor.map(pool.one, todo)]
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    failed = sum(code != 0 for code in codes)
    say(
        f"experiment {exp.name}: {len(codes) - failed} runs completed, {failed} not"
        + ("; run the same command again to run those" if failed else "")
        + f"; compare them: mosaic compare {exp.name}"
        + (f" --runs-dir {root}" if root else "")
    )
    if pool.stopping:
        return 130
    return 1 if failed else 0


def say(message: str) -> None:
    print(f"mosaic experiment: {message}", file=sys.stderr, flush=True)
