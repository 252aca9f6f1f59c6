"""``mosaic sweep run|status|best|dashboard``.

Only argparse is imported at start-up; Optuna and everything else is imported inside the
action functions, so ``mosaic --help`` is not slowed down (and works without the [sweep] extra).
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from mosaic_core import CliCommand, MosaicError, UsageError, launchers

if TYPE_CHECKING:
    from mosaic_sweep.spec import SweepSpec

STORAGE_HELP = (
    "sqlite:///FILE, journal:FILE or postgresql://user:pass@host/db "
    "(default: sqlite under var/sweeps/, one file per study)"
)


def _configure(parser: argparse.ArgumentParser) -> None:
    actions = parser.add_subparsers(dest="sweep_action", metavar="ACTION", required=True)
    run = actions.add_parser(
        "run",
        help="run (or join) a sweep described by a spec file",
        description="Run trials of a sweep: each trial trains K seeds, each a `mosaic run`.",
    )
    run.add_argument("spec", metavar="SPEC", help="sweep spec (.toml or .json; see examples/sweep/)")
    run.add_argument("--study-name", help="override the spec's study_name")
    run.add_argument("--max-trials", type=int, help="trials in the whole study, counted across all its sweep processes")
    run.add_argument("--total-timesteps", type=int, help="override the per-seed training budget")
    run.add_argument("--seeds", type=int, help="seeds per trial (override)")
    run.add_argument("--storage", help=STORAGE_HELP)
    run.add_argument(
        "--parallel",
        type=int,
        default=None,
        metavar="N",
        help="trials at a time, each in a sweep process of its own on this machine (default 1; on a cluster "
        "(--ray-address): as many runs as its resources hold, at most --max-trials)",
    )
    run.add_argument("--runs-dir", help="runs root for the trials' runs (default var/trainer/runs or $MOSAIC_RUNS_DIR)")
    # Set by --parallel N for its sweep processes: the process's index (the study exists already).
    run.add_argument("--as-process", type=int, default=None, metavar="INDEX", help=argparse.SUPPRESS)
    # Set for a job array's task (a launcher's launch_many): that sweep process runs one trial.
    run.add_argument("--one-trial", action="store_true", help=argparse.SUPPRESS)
    # Where each seed's `mosaic run` executes (--launcher, --ray-address…): passed on on their command lines.
    launchers.add_arguments(run)

    for name, text in (
        ("status", "trials, states, best so far and running sweep processes of a study"),
        ("best", "the best trial: value, parameters, runs; a ready worker config with --config"),
    ):
        sub = actions.add_parser(name, help=text, description=text)
        sub.add_argument("study", metavar="STUDY")
        sub.add_argument("--storage", help=STORAGE_HELP)
        sub.add_argument("--json", action="store_true", help="print JSON")
        if name == "best":
            sub.add_argument("--config", metavar="OUT.json", help="write the best trial's worker config here")
            sub.add_argument("--plot", metavar="OUT.png", help="learning curves of its seeds, mean ± std")
            sub.add_argument("--runs-dir", help="runs root of the trials' runs (for --plot)")
            sub.add_argument(
                "--spec",
                metavar="SPEC",
                help="the sweep's spec file: --config is its fixed config with "
                "the best parameters (default: the spec stored with the study)",
            )
    dash = actions.add_parser("dashboard", help="optuna-dashboard on 127.0.0.1 (the sweep extra installs it)")
    dash.add_argument("study", metavar="STUDY")
    dash.add_argument("--storage", help=STORAGE_HELP)
    dash.add_argument("--port", type=int, default=8080, help="port on 127.0.0.1 (default 8080)")


def _require_optuna() -> None:
    """A one-line error unless Optuna is installed; found, not imported (the action imports it if it
    gets that far: a refused one never pays for it)."""
    import importlib.util

    if importlib.util.find_spec("optuna") is None:
        raise MosaicError("mosaic sweep needs Optuna: pip install 'mosaic-rl[sweep]'")


def _run(ns: argparse.Namespace) -> int:
    _require_optuna()
    if ns.sweep_action == "run":
        return _sweep_run(ns)
    from mosaic_sweep import report

    if ns.sweep_action == "dashboard":
        return report.dashboard(ns.study, ns.storage, ns.port)
    if ns.sweep_action == "status":
        return report.status(ns.study, ns.storage, ns.json)
    return report.best(ns.study, ns.storage, ns.json, ns.config, ns.plot, ns.runs_dir, ns.spec)


def _sweep_run(ns: argparse.Namespace) -> int:
    from mosaic_core.toolkit import default_runs_root
    from mosaic_sweep import loop, preflight, storage, study
    from mosaic_sweep.spec import load_spec

    if ns.parallel is not None and ns.parallel < 1:
        raise UsageError(f"--parallel must be >= 1, got {ns.parallel}")
    choice = launchers.select(ns)  # the seeds' `mosaic run` (and --parallel's processes) get choice.argv()
    choice.check(command="mosaic sweep run")  # a cluster that does not answer, no sbatch: before any study is made
    given = load_spec(ns.spec)
    spec = given.with_overrides(
        study_name=ns.study_name,
        max_trials=ns.max_trials,
        total_timesteps=ns.total_timesteps,
        seeds=ns.seeds,
        storage=ns.storage,
    )
    given_parallel = ns.parallel
    as_array = ns.as_process is None and launchers.can_launch_many(choice)  # trials as one submission
    if ns.parallel is None:
        ns.parallel = 1 if ns.as_process is not None or as_array else _default_parallel(choice, spec.max_trials)
    location = storage.resolve(spec.storage, spec.study_name)
    runs_root = Path(ns.runs_dir) if ns.runs_dir else default_runs_root()
    study.build_sampler(spec), study.build_pruner(spec)  # option errors before anything is written
    one_of_many = ns.as_process is not None
    if one_of_many:
        spec = spec.for_process(ns.as_process)
    else:
        preflight.check(spec, runs_root)
    handle = storage.open_storage(location, spec.heartbeat_s if location.kind != "journal" else None, spec.max_retries)
    the_study = study.open_study(spec, handle, create=not one_of_many, shown_url=location.shown)
    if as_array:
        code = _array_trials(ns, choice, given, spec, given_parallel, runs_root)
    elif one_of_many or ns.parallel == 1:
        code = loop.take_trials(
            spec, the_study, location, runs_root, choice.argv(), own_trials=1 if ns.one_trial else None
        )
    else:
        code = _spawn_processes(ns, choice)
    if not one_of_many:
        from mosaic_sweep import report

        report.summary(the_study, location.shown)
    return code


def _default_parallel(choice: launchers.LauncherChoice, max_trials: int) -> int:
    """1 here; on a launcher that knows its capacity (a Ray cluster) that many, at most the
    study's trials, said on stderr."""
    fits = launchers.capacity(choice)
    if fits is None:
        return 1
    runs, why = fits
    parallel = min(runs, max_trials)
    capped = f", at most max_trials {max_trials}" if parallel < runs else ""
    print(f"mosaic sweep: {parallel} at a time ({why}{capped}; --parallel N to choose)", file=sys.stderr, flush=True)
    return parallel


def _process_command(ns: argparse.Namespace, spec_file: Path | None = None) -> list[str]:
    """This sweep's ``mosaic sweep run`` for one of its sweep processes (``--as-process INDEX``
    follows); ``spec_file``: the spec they read (default: the one named)."""
    from mosaic_sweep.seeds import mosaic_command

    command = [*mosaic_command(), "sweep", "run", str((spec_file or Path(ns.spec)).absolute())]
    for flag in ("study_name", "max_trials", "total_timesteps", "seeds", "storage", "runs_dir"):
        value = getattr(ns, flag)
        if value is not None:
            value = str(Path(value).absolute()) if flag == "runs_dir" else str(value)
            command += [f"--{flag.replace('_', '-')}", value]
    return command


def _array_trials(
    ns: argparse.Namespace,
    choice: launchers.LauncherChoice,
    given: SweepSpec,
    spec: SweepSpec,
    limit: int | None,
    runs_root: Path,
) -> int:
    """The trials as one submission of the launcher (Slurm: a job array, ``%limit`` at a time):
    task ``i`` is a sweep process that runs one trial, its seeds on the task's node (``--launcher
    local`` there), pruning from their live metrics as here; the study's storage is shared. The
    array's files go into a new private folder of the checked runs root (``.jobs/``), with the
    copy of the spec its tasks read."""
    import time

    from mosaic_core.toolkit import job_folder

    name = f"sweep-{spec.study_name}-{time.strftime('%Y%m%dT%H%M%S')}-{os.getpid()}"
    try:
        folder = job_folder(runs_root.absolute(), name)
    except OSError as exc:
        raise UsageError(f"--runs-dir {runs_root}: {exc}") from None
    spec_file = _spec_copy(Path(ns.spec), folder, given)
    commands = tuple(
        (*_process_command(ns, spec_file), "--as-process", str(index), "--one-trial", "--launcher", "local")
        for index in range(spec.max_trials)
    )
    return launchers.launch_many(choice, launchers.Batch(commands, folder, f"mosaic-sweep-{spec.study_name}", limit))


def _spec_copy(named: Path, folder: Path, given: SweepSpec) -> Path:
    """The spec the array's tasks read, copied into its private folder: the file named may lie
    where others can replace it, and a task starts whenever Slurm runs it. The copy must be the
    spec this process checked (or it changed meanwhile: refused)."""
    import dataclasses

    from mosaic_core.files import open_private, write_atomic
    from mosaic_sweep.spec import load_spec

    copy = folder / named.name  # the same name: its stem is the default study name
    try:
        with open_private(named, any_owner=True) as handle:
            write_atomic(copy, handle.read(), mode=0o600)
    except OSError as exc:
        raise UsageError(f"sweep spec {named}: cannot be read again: {exc}") from None
    if dataclasses.replace(load_spec(copy), source=given.source) != given:
        raise UsageError(f"sweep spec {named} changed while the sweep started; nothing was submitted, run it again")
    return copy


def _spawn_processes(ns: argparse.Namespace, choice: launchers.LauncherChoice) -> int:
    """N sweep processes, each this same command with ``--as-process``; SIGTERM/SIGINT to this
    process is passed on to all of them (each cancels its running seed and exits)."""
    from mosaic_sweep.seeds import _die_with_parent

    command = [*_process_command(ns), *choice.argv()]
    from mosaic_core import SHARE_VAR, share

    env = {**os.environ}
    env.setdefault(SHARE_VAR, str(share(ns.parallel)))  # each sweep process's runs: a thread budget of its share
    procs = [
        subprocess.Popen(
            _die_with_parent([*command, "--as-process", str(index)]),
            stdin=subprocess.DEVNULL,
            start_new_session=True,
            env=env,
        )
        for index in range(ns.parallel)
    ]
    print(f"mosaic sweep: {ns.parallel} sweep processes: pids {', '.join(str(p.pid) for p in procs)}", file=sys.stderr)

    def forward(signum: int, _frame: object) -> None:
        for proc in procs:
            if proc.poll() is None:
                os.kill(proc.pid, signal.SIGTERM)

    previous = {sig: signal.signal(sig, forward) for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)}
    try:
        codes = [proc.wait() for proc in procs]
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    return 130 if 130 in codes else max(codes)


COMMANDS = [
    CliCommand(
        "sweep",
        "hyperparameter sweeps and multi-seed benchmarks with Optuna (run, status, best, dashboard)",
        _configure,
        _run,
    )
]
