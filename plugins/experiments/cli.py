"""``mosaic experiment run SPEC.toml`` and ``mosaic compare EXPERIMENT | RUN…``.

Only argparse is imported at start-up; numpy, rliable and matplotlib inside the actions."""

from __future__ import annotations

import argparse
from pathlib import Path

from mosaic_core import CliCommand, UsageError, launchers

RUNS_DIR_HELP = "runs root (default var/trainer/runs or $MOSAIC_RUNS_DIR)"


def _root(value: str | None, must_exist: bool) -> Path:
    from mosaic_core.toolkit import check_runs_root, default_runs_root

    root = Path(value) if value else default_runs_root()
    if must_exist and not root.is_dir():
        raise UsageError(f"no runs directory at {root}; pass --runs-dir DIR")
    if root.is_dir():
        try:
            check_runs_root(root.absolute())
        except OSError as exc:
            raise UsageError(str(exc)) from None
    return root


# ------------------------------------------------------------------ mosaic experiment
def _configure_experiment(parser: argparse.ArgumentParser) -> None:
    actions = parser.add_subparsers(dest="experiment_action", metavar="ACTION", required=True)
    run = actions.add_parser(
        "run",
        help="run an experiment spec: a grid of (worker, algo, env, overrides) × seeds; "
        "again: only the seeds not completed",
        description="Run every (group, seed) of an experiment as a `mosaic run`, skipping the seeds already completed.",
    )
    run.add_argument("spec", metavar="SPEC.toml")
    run.add_argument("--parallel", type=int, metavar="N", help="runs at a time (overrides the spec's parallel)")
    run.add_argument("--runs-dir", help=RUNS_DIR_HELP)
    daemon = run.add_argument_group(
        "through a trainer daemon", "submit each run to `mosaic daemon` instead (its runs root holds them)"
    )
    daemon.add_argument("--target", metavar="HOST:PORT", help="the daemon's address (e.g. 127.0.0.1:50055)")
    daemon.add_argument("--state-dir", help="the daemon's state dir: its client.token is sent")
    daemon.add_argument("--token-file", help="a file holding the daemon's client token (wins over $MOSAIC_TOKEN)")
    launchers.add_arguments(run)
    card = actions.add_parser(
        "card",
        help="a Hugging Face model card beside the exported model (also: mosaic runs card)",
        description="Write a Hugging Face model card (README.md with the Hub's front matter) "
        "beside the run's newest checkpoint and its config in DIR: for an "
        "experiment, the best seed of the group with the best IQM. No upload: "
        "DIR is what `huggingface-cli upload` takes.",
    )
    card.add_argument("ref", metavar="RUN|EXPERIMENT")
    card.add_argument("-o", "--output", metavar="DIR", required=True, help="a new folder (an existing name is refused)")
    card.add_argument("--reps", type=int, default=None, help="bootstrap replications (default 2000)")
    card.add_argument("--seed", type=int, default=0, help="the bootstrap's random seed (default 0)")
    card.add_argument("--runs-dir", help=RUNS_DIR_HELP)


def _card(ns: argparse.Namespace) -> int:
    import sys

    from mosaic_core.files import printable
    from mosaic_experiments import card, stats

    reps = stats.REPS if ns.reps is None else ns.reps
    if reps < 100:
        raise UsageError(f"--reps must be >= 100, got {reps}")
    stats.require_rliable()
    target, subject = card.write(_root(ns.runs_dir, must_exist=True), ns.ref, Path(ns.output), reps, ns.seed)
    if subject.left_out:
        print(printable(f"mosaic runs card: {subject.left_out}"), file=sys.stderr)
    print(
        printable(
            f"mosaic runs card: run {subject.model.name}, {subject.checkpoint.path.name}: wrote {target}/"
            f"{card.CARD}; upload the folder with `huggingface-cli upload REPO {target}`"
        ),
        file=sys.stderr,
    )
    return 0


def _experiment(ns: argparse.Namespace) -> int:
    from dataclasses import replace

    from mosaic_experiments import runner, spec

    if ns.experiment_action == "card":
        return _card(ns)
    exp = spec.load(Path(ns.spec))
    if ns.parallel is not None:
        if ns.parallel < 1:
            raise UsageError(f"--parallel must be >= 1, got {ns.parallel}")
        exp = replace(exp, parallel=ns.parallel)
    choice = launchers.select(ns)  # where each seed's `mosaic run` executes: its flags on their command lines
    if ns.target is not None:
        return _on_daemon(ns, exp, choice)
    if ns.state_dir or ns.token_file:
        raise UsageError("--state-dir and --token-file are for a daemon: give --target HOST:PORT too")
    choice.check(command="mosaic experiment run")  # no sbatch, a cluster that does not answer: before anything runs
    return runner.run(exp, _root(ns.runs_dir, must_exist=False), tuple(choice.argv()))


def _on_daemon(ns: argparse.Namespace, exp, choice: launchers.LauncherChoice) -> int:
    """The experiment's runs submitted to the daemon at ``--target`` (its runs root holds them)."""
    from mosaic_core.toolkit import default_runs_root, find_token
    from mosaic_core.trainer.client import open_channel
    from mosaic_experiments import on_daemon, runner

    if not choice.local:
        raise UsageError(
            f"--target and --launcher {choice.name}: the daemon runs its runs where its own launcher says "
            "(mosaic daemon --launcher …); give one"
        )
    if ns.runs_dir:
        raise UsageError("--target and --runs-dir: the daemon keeps its runs under its state dir; give --state-dir")
    open_channel(ns.target).close()  # a malformed address: one line before anything
    root = Path(ns.state_dir) / "runs" if ns.state_dir else default_runs_root()
    daemon = on_daemon.Daemon(ns.target, find_token(ns.token_file, ns.state_dir))
    return on_daemon.run(exp, daemon, lambda: runner.preflight(exp, root))


# ------------------------------------------------------------------ mosaic compare
def _configure_compare(parser: argparse.ArgumentParser) -> None:
    parser.description = (
        "Compare groups of runs (runs that differ only by seed, or --group-by fields) by IQM, "
        "median, mean and optimality gap with stratified bootstrap 95%% CIs (rliable), and the "
        "probability of improvement of each pair. A run's score is its final evaluation's mean "
        "return where it has one, else its mean training return over the last 10%% of its steps."
    )
    parser.add_argument("refs", nargs="+", metavar="EXPERIMENT|RUN", help="an experiment's name, or run ids")
    parser.add_argument(
        "--group-by",
        help="comma-separated fields that make a group: worker, algo, env_id or an "
        "extras key (algo_params.learning_rate); needed across envs",
    )
    parser.add_argument(
        "--metric",
        help="a scalar tag scored over the last 10%% of steps instead of the return (e.g. charts/episodic_length)",
    )
    parser.add_argument(
        "--agent",
        help="multi-agent runs: score this agent's return instead of the team's (its final evaluation's "
        "per-agent mean, else its training returns, charts/episodic_return/AGENT)",
    )
    parser.add_argument(
        "--reference",
        action="append",
        default=[],
        metavar="ENV=SCORE",
        help="an env's reference score: normalises it for the overall table, sets the optimality "
        "gap's threshold (default: the env's registered reward_threshold)",
    )
    parser.add_argument("--reps", type=int, default=None, help="bootstrap replications (default 2000)")
    parser.add_argument("--seed", type=int, default=0, help="the bootstrap's random seed (default 0)")
    parser.add_argument(
        "-o", "--output", metavar="REPORT.png", help="IQM intervals, performance profiles and sample-efficiency curves"
    )
    parser.add_argument("--export", metavar="FILE", help="rliable.npz (score matrices) or marl-eval.json")
    parser.add_argument("--json", action="store_true", help="print the numbers as JSON")
    parser.add_argument("--runs-dir", help=RUNS_DIR_HELP)


def _compare_outputs(ns: argparse.Namespace) -> tuple[Path | None, Path | None]:
    """``-o`` (a PNG) and ``--export`` (.npz or .json), refused now rather than after the bootstrap
    (the write checks again)."""
    from mosaic_core.files import check_output

    output = Path(ns.output) if ns.output else None
    if output is not None and (output.suffix.lower() != ".png" or not output.absolute().parent.is_dir()):
        raise UsageError(f"-o {ns.output}: a .png file in an existing folder is needed")
    export = Path(ns.export) if ns.export else None
    if export is not None and export.suffix not in (".npz", ".json"):
        raise UsageError(f"--export {ns.export}: the file must end in .npz (rliable) or .json (marl-eval)")
    for path, flag in ((output, "-o"), (export, "--export")):
        if path is not None:
            check_output(path, flag)
    return output, export


def _compare(ns: argparse.Namespace) -> int:
    from mosaic_core.runstore.score import RETURN_TAG
    from mosaic_experiments import compare, stats, tables

    reps = stats.REPS if ns.reps is None else ns.reps
    if reps < 100:
        raise UsageError(f"--reps must be >= 100, got {reps}")
    if ns.metric and ns.agent:
        raise UsageError("--metric and --agent: give one")
    tag = ns.metric or (f"{RETURN_TAG}/{ns.agent}" if ns.agent else RETURN_TAG)
    fields = [f.strip() for f in ns.group_by.split(",") if f.strip()] if ns.group_by else None
    if ns.group_by is not None and not fields:
        raise UsageError("--group-by: name at least one field (worker, algo, env_id, …)")
    output, export = _compare_outputs(ns)
    references = compare.parse_references(ns.reference)
    stats.require_rliable()  # a missing extra says so before anything is read
    root = _root(ns.runs_dir, must_exist=True)
    resolved = compare.resolve_runs(root, ns.refs)
    dirs = resolved.runs
    comparison = compare.compare(dirs, fields, tag, references, ns.agent)
    note = resolved.note()
    if note:
        comparison.warnings.insert(0, note)
    compare.say(f"{len(dirs)} runs in {len(comparison.groups)} groups; scores: {compare.sources(comparison)}")
    for warning in comparison.warnings:
        compare.say(f"warning: {warning}")
    sections = tables.estimate(comparison, reps, ns.seed)
    if ns.json:
        from mosaic_experiments import report

        print(
            compare.to_json(
                {
                    "scores": compare.sources(comparison),
                    "warnings": comparison.warnings,
                    "sections": tables.as_json(sections),
                    "curves": report.curves_json(comparison, ns.seed),
                }
            )
        )
    else:
        print(
            f"# {tag} scores; IQM, median, mean and optimality gap with stratified bootstrap 95% CIs "
            f"({reps} replications, seed {ns.seed}; rliable)"
        )
        tables.print_sections(sections, comparison)
    if output is not None or export is not None:
        from mosaic_experiments import report

        if export is not None:
            report.export(comparison, export)
            compare.say(f"wrote {export}")
        if output is not None:
            report.write_png(comparison, sections, output, reps, ns.seed)
            compare.say(f"wrote {output}")
    return 0


COMMANDS = [
    CliCommand(
        "experiment",
        "run a grid of (worker, algo, env, overrides) × seeds, resumable (run)",
        _configure_experiment,
        _experiment,
    ),
    CliCommand(
        "compare",
        "IQM, median, mean, optimality gap with bootstrap CIs of groups of runs",
        _configure_compare,
        _compare,
    ),
]
