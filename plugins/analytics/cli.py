"""``mosaic runs``, ``mosaic plot`` and ``mosaic tensorboard``.

Only argparse is imported here; each command imports what it needs when it runs.
Errors a user can fix are :class:`~mosaic_core.errors.UsageError` (exit 2, one line).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

from mosaic_analytics.roots import runs_root
from mosaic_core import CliCommand, UsageError
from mosaic_core.files import check_output, printable, read_private_text
from mosaic_core.jsontext import dumps, dumps_rows
from mosaic_core.toolkit import manifest_of

RUNS_DIR_HELP = "runs root (default var/trainer/runs, or $MOSAIC_RUNS_DIR)"


def find_run(root: Path, run_id: str) -> Path:
    """The directory of ``run_id`` (or a unique prefix of it) under ``root``."""
    from mosaic_core.toolkit import find_run_dir

    return find_run_dir(root, run_id)


# ------------------------------------------------------------------ mosaic runs
def _configure_runs(parser: argparse.ArgumentParser) -> None:
    parser.usage = (
        "mosaic runs [--runs-dir DIR] [--json] [--name EXP] [--recheck] [--target HOST:PORT]\n"
        "       mosaic runs show RUN_ID [--json]\n"
        "       mosaic runs export RUN_ID -o FILE.tar.gz [--no-checkpoints]\n"
        "       mosaic runs import FILE.tar.gz\n"
        "       mosaic runs trust RUN_ID\n"
        "       mosaic runs card RUN_ID|EXPERIMENT -o DIR\n"
        "       mosaic runs rm RUN_ID... [--yes]\n"
        "       mosaic runs gc (--keep-last N | --older-than AGE | --failed) [--yes]"
    )
    parser.add_argument(
        "words",
        nargs="*",
        metavar="ACTION ...",
        help="show RUN_ID | export RUN_ID | import FILE | trust RUN_ID | card RUN|EXPERIMENT | rm RUN_ID... | gc",
    )
    parser.add_argument("--runs-dir", help=RUNS_DIR_HELP)
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    parser.add_argument("--name", metavar="EXP", help="only the runs of experiment EXP (a worker's --name)")
    parser.add_argument(
        "--recheck",
        action="store_true",
        help="read again every run whose files changed, ended ones too (a change made by hand; "
        "what MOSAIC changes is seen without it)",
    )
    parser.add_argument("--target", metavar="HOST:PORT", help="list the runs of a trainer daemon instead")
    parser.add_argument("--state-dir", help="with --target: the daemon's state dir, whose client.token is sent")
    parser.add_argument("--token-file", help="with --target: a file holding the daemon's client token")
    keep = parser.add_argument_group("export, import, card, rm and gc")
    keep.add_argument(
        "-o",
        "--output",
        metavar="FILE.tar.gz",
        help="export: the archive to write (must not exist); card: a new folder for the model card",
    )
    keep.add_argument("--no-checkpoints", action="store_true", help="export: leave checkpoint files out")
    keep.add_argument("--yes", action="store_true", help="rm, gc: delete (without it they only list what would go)")
    keep.add_argument("--keep-last", type=int, metavar="N", help="gc: remove all but the N newest ended runs")
    keep.add_argument("--older-than", metavar="AGE", help="gc: remove ended runs older than AGE (30d, 12h, 90m)")
    keep.add_argument("--failed", action="store_true", help="gc: remove failed and lost runs")


def _run_runs(ns: argparse.Namespace) -> int:
    action = ns.words[0] if ns.words else None
    if action == "card":  # the experiments plugin's `mosaic experiment card` (its IQM is rliable's)
        from mosaic_core.toolkit import run_command

        if len(ns.words) != 2 or not ns.output:
            raise UsageError("usage: mosaic runs card RUN_ID|EXPERIMENT -o DIR")
        return run_command(
            "experiment",
            ["card", ns.words[1], "-o", ns.output, *(["--runs-dir", ns.runs_dir] if ns.runs_dir else [])],
            needed_by="mosaic runs card",
        )
    if action in ("export", "import", "trust", "rm", "gc"):
        from mosaic_analytics import runs_manage

        return runs_manage.run(ns, action, ns.words[1:])
    if ns.target:
        if ns.words:
            raise UsageError("mosaic runs --target lists a daemon's runs; `show` reads a local runs directory")
        return _print_daemon_runs(ns.target, ns.json, ns.token_file, ns.state_dir)
    if not ns.words:
        return _list(ns)
    if ns.words[0] == "show" and len(ns.words) == 2:
        return _show(ns, ns.words[1])
    raise UsageError(
        f"unexpected arguments {' '.join(ns.words)!r}; use `mosaic runs` or "
        "`mosaic runs show|export|import|trust|card|rm|gc ...` (see mosaic runs --help)"
    )


def _print_daemon_runs(target: str, as_json: bool, token_file: str | None = None, state_dir: str | None = None) -> int:
    """The daemon's runs, with steps and return read from their run directories (on this machine)."""
    from mosaic_core.runstore.summary import summarize
    from mosaic_core.toolkit import find_token
    from mosaic_core.trainer.client import list_runs, record_to_dict

    rows = []
    for record in list_runs(target, token=find_token(token_file, state_dir)):
        row = record_to_dict(record)
        summary = summarize(Path(record.run_dir)) if record.run_dir and Path(record.run_dir).is_dir() else None
        row.update(
            algo=summary.algo if summary else None,
            env_id=summary.env_id if summary else None,
            global_step=summary.global_step if summary else None,
            total_timesteps=summary.total_timesteps if summary else None,
            score=summary.score if summary else None,
            node=_node_of(Path(record.run_dir)) if record.run_dir else None,
        )
        rows.append(row)
    if as_json:
        print(dumps(rows, indent=2))
        return 0
    nodes = any(r["node"] for r in rows)  # runs a launcher placed elsewhere (mosaic_core.launchers)
    from mosaic_core.runstore import table
    from mosaic_core.runstore.score import format_score

    _print_rows(
        ("RUN ID", "WORKER", "ALGO", "ENV", "STATUS", "STEPS", "SCORE", *(("NODE",) if nodes else ()), "REASON"),
        [
            (
                r["run_id"],
                r["worker"] or "-",
                r["algo"] or "-",
                r["env_id"] or "-",
                f"{r['status']} ({r['terminal_event']})" if r["terminal_event"] else r["status"],
                table.steps(r["global_step"], r["total_timesteps"]),
                format_score(r["score"]),
                *((r["node"] or "-",) if nodes else ()),
                r["failure_reason"] or "",
            )
            for r in rows
        ],
    )
    return 0


def _node_of(run_dir: Path) -> str | None:
    """Where a launcher ran the run: ``node`` in its ``run_started`` payload (first event)."""
    from mosaic_core.files import open_private
    from mosaic_core.runstore.summary import MAX_LINE_BYTES

    try:
        with open_private(run_dir / "events.jsonl") as handle:
            first = json.loads(handle.readline(MAX_LINE_BYTES + 1) or "null")
    except (OSError, ValueError):
        return None
    node = ((first or {}).get("payload") or {}).get("node") if isinstance(first, dict) else None
    return node if isinstance(node, str) else None


def _print_rows(header: tuple[str, ...], rows: list[tuple[str, ...]]) -> None:
    table = [header, *rows]
    table = [tuple(printable(cell) for cell in row) for row in table]  # run files drive no terminal
    widths = [max(len(row[i]) for row in table) for i in range(len(header))]
    for row in table:
        print("  ".join(cell.ljust(width) for cell, width in zip(row, widths)).rstrip())


def _list(ns: argparse.Namespace) -> int:
    from mosaic_core.runstore import table
    from mosaic_core.runstore.index import list_runs, list_runs_json, list_runs_table

    root = runs_root(ns.runs_dir, must_exist=bool(ns.runs_dir))
    if ns.json and not ns.name:
        print(list_runs_json(root, ns.recheck))
        return 0
    if ns.name:
        runs = [r for r in list_runs(root, ns.recheck) if r.experiment == ns.name]
        if ns.json:
            print(dumps_rows([r.to_dict() for r in runs]))
            return 0
        lines = table.render((r.started_at, table.cells(r)) for r in runs) if runs else []
        problems = {r.run_id: r.problems for r in runs if r.problems}
    else:
        lines, problems = list_runs_table(root, ns.recheck)
    if len(lines) < 2:  # the header alone
        print(f"no runs under {root}", file=sys.stderr)
        return 0
    print("\n".join(lines))
    for run_id, said in problems.items():  # a damaged run still lists; what could not be read, one line each
        print(printable(f"mosaic: run {run_id}: {'; '.join(said)}"), file=sys.stderr)
    return 0


def _evaluations(run_dir: Path) -> list[str]:
    """One line per ``mosaic evaluate`` of the run (``evaluations/<id>/eval.json``), oldest first."""
    lines = []
    for found in sorted((run_dir / "evaluations").glob("*/eval.json"), key=lambda p: p.stat().st_mtime):
        result = _load(found)
        if isinstance(result, dict) and isinstance(result.get("mean"), (int, float)):
            protocol = _table(result, "protocol")
            lines.append(
                f"{found.parent.name}: step {result.get('global_step')}, {protocol.get('episodes')} episodes, "
                f"return {result['mean']:.2f} ± {result.get('std', 0):.2f}"
            )
    return lines


def _manifest_lines(manifest: dict[str, Any]) -> list[tuple[str, Any]]:
    """``mosaic runs show``'s lines from a run's manifest: its returns (each agent's), where its
    files are, its tracking and notes."""
    from mosaic_core.runstore.summary import format_number

    lines: list[tuple[str, Any]] = []
    metrics = _table(manifest, "metrics")
    lines.append(
        (
            "last episode",
            f"{format_number(metrics.get('episodic_return'))} (the return of the latest training episode)",
        )
    )
    lines.append(
        (
            "moving average",
            f"{format_number(metrics.get('episodic_return_smoothed'))} (the mean "
            "return of the last 100 training episodes)",
        )
    )
    agents = _table(metrics, "agents")
    for agent, values in agents.items():  # a multi-agent run: each agent's own figures
        if isinstance(values, dict):
            lines.append((f"  {agent}", _agent_line(values)))
    tb = _table(manifest, "tensorboard")
    lines.append(("tensorboard", ", ".join(map(str, tb.get("event_dirs") or [])) or "-"))
    lines.append(("checkpoints", _files(manifest.get("checkpoints"))))
    lines.append(("videos", _files(manifest.get("videos"))))
    wandb = manifest.get("wandb")
    if isinstance(wandb, dict):
        lines.append(("wandb", f"{wandb.get('mode')} {wandb.get('run_path') or ''} {wandb.get('dir') or ''}".strip()))
    if manifest.get("notes"):
        lines.append(("notes", manifest["notes"]))
    return lines


def _untrusted_line(imported: dict[str, Any], run_id: str) -> str:
    return (
        f"imported from {imported.get('imported_from', '?')}, untrusted: nothing in it runs "
        f"until `mosaic runs trust {run_id}`"
    )


def _show(ns: argparse.Namespace, run_id: str) -> int:
    from mosaic_core.runstore import table
    from mosaic_core.runstore.score import Score
    from mosaic_core.runstore.summary import format_age, format_number, summarize
    from mosaic_core.runstore.trust import origin

    root = runs_root(ns.runs_dir)
    run_dir = find_run(root, run_id)
    summary = summarize(run_dir)
    manifest = _load(manifest_of(run_dir))
    config = _load(run_dir / "config.json")
    imported = origin(run_dir)
    if ns.json:
        print(
            dumps(
                {"summary": summary.to_dict(), "config": config, "manifest": manifest, "untrusted": imported}, indent=2
            )
        )
        return 0
    lines = [
        ("run", summary.run_id),
        ("path", summary.path),
        ("status", table.status(summary)),
        *([("trust", _untrusted_line(imported, summary.run_id))] if imported is not None else []),
        *([("reason", summary.reason)] if summary.reason else []),
        ("worker", summary.worker),
        ("algo", summary.algo),
        ("env", summary.env_id),
        (summary.unit, f"{summary.global_step} / {summary.total_timesteps}"),
        ("age", format_age(summary.started_at)),
    ]
    score = Score.from_dict(summary.score)
    lines.append(
        (
            "score",
            f"{format_number(score.value)}  {score.describe()}"
            if score
            else "- (once the run has ended; see docs/comparing-results.md)",
        )
    )
    if summary.unit == "episodes":
        lines.append(("mean return", format_number(summary.last_return)))
    if isinstance(manifest, dict):
        lines += _manifest_lines(manifest)
    else:
        lines.append(("manifest", "none yet" if manifest is None else "unreadable"))
    for evaluation in _evaluations(run_dir):
        lines.append(("evaluation", evaluation))
    for problem in summary.problems:
        lines.append(("problem", problem))
    for key, value in lines:
        print(printable(f"{key + ':':<17}{'-' if value is None else value}"))
    return 0


def _agent_line(values: dict[str, Any]) -> str:
    """An agent's latest values (``tag value`` pairs, the return first)."""
    from mosaic_core.runstore.summary import format_number

    tags = sorted(values, key=lambda tag: (not tag.endswith("episodic_return"), tag))
    return ", ".join(f"{tag.rsplit('/', 1)[-1]} {format_number(values[tag])}" for tag in tags) or "-"


def _files(section: Any) -> str:
    files = section.get("files") if isinstance(section, dict) else section  # older manifests: a list
    if not isinstance(files, list) or not files:
        return "-"
    names = [str(f.get("path")) if isinstance(f, dict) else str(f) for f in files]
    return ", ".join(names[:5]) + (f" (+{len(names) - 5} more)" if len(names) > 5 else "")


def _load(path: Path) -> Any:
    """A run's JSON file, read up to the listing's cap ("unreadable" past it, or when damaged)."""
    from mosaic_core.runstore.summary import MAX_JSON_BYTES

    try:
        text = read_private_text(path, MAX_JSON_BYTES + 1)
        return json.loads(text) if len(text) <= MAX_JSON_BYTES else "unreadable"
    except FileNotFoundError:
        return None
    except (OSError, ValueError, RecursionError):
        return "unreadable"


# ------------------------------------------------------------------ mosaic plot
GROUPINGS = ("seed", "env", "algo")


def _configure_plot(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("run_ids", nargs="+", metavar="RUN_ID", help="one or more runs to overlay")
    parser.add_argument(
        "-o", "--output", default=None, help="PNG file to write (default curves.png; none with --table)"
    )
    parser.add_argument(
        "--smooth", type=int, default=10, metavar="K", help="moving-average window (default 10; 1 = raw)"
    )
    parser.add_argument("--tag", default=None, help="scalar tag to draw (default charts/episodic_return)")
    parser.add_argument(
        "--agents", action="store_true", help="multi-agent runs: also one curve per agent (its TAG/AGENT scalars)"
    )
    parser.add_argument(
        "--group",
        choices=GROUPINGS,
        help="aggregate runs into groups: seed = runs whose config "
        "differs only in the seed; env / algo = runs of one env id / algorithm",
    )
    parser.add_argument(
        "--band", choices=("std", "minmax"), default="std", help="with --group: shade mean ± std (default) or min–max"
    )
    parser.add_argument(
        "--table", action="store_true", help="with --group: print each group's final value, mean ± std over its runs"
    )
    parser.add_argument("--runs-dir", help=RUNS_DIR_HELP)


def _run_plot(ns: argparse.Namespace) -> int:
    from mosaic_analytics import curves
    from mosaic_core.runstore.summary import summarize

    if ns.smooth < 1:
        raise UsageError(f"--smooth must be >= 1, got {ns.smooth}")
    if ns.table and not ns.group:
        raise UsageError("--table needs --group (e.g. --group seed)")
    output = Path(ns.output) if ns.output else (None if ns.table else Path("curves.png"))
    if output is not None and output.suffix.lower() != ".png":
        raise UsageError(f"-o {ns.output}: the output must be a .png file")
    if output is not None and not output.parent.is_dir():
        raise UsageError(f"-o {ns.output}: directory {output.parent} does not exist")
    if output is not None:
        check_output(output, "-o")  # before TensorBoard's files are read and matplotlib imported
    tag = ns.tag or curves.DEFAULT_TAG
    root = runs_root(ns.runs_dir)
    dirs = [find_run(root, run_id) for run_id in dict.fromkeys(ns.run_ids)]
    drawn = [_curve(run_dir, tag, summarize(run_dir)) for run_dir in dirs]
    if ns.group:
        if ns.agents:
            raise UsageError("--agents draws each run's agents; it does not combine with --group")
        return _plot_groups(ns, dirs, drawn, output, tag)
    if ns.agents:
        per_agent = [curves.read_agent_scalars(d, tag, label=c.label) for d, c in zip(dirs, drawn)]
        if not any(per_agent):
            raise UsageError(f"no per-agent {tag!r} scalars ({tag}/AGENT) in {', '.join(d.name for d in dirs)}")
        drawn = [curve for team, agents in zip(drawn, per_agent) for curve in (team, *agents)]
        dirs = [d for d, agents in zip(dirs, per_agent) for d in [d] * (1 + len(agents))]
    assert output is not None  # None only with --table, which goes with --group (drawn above)
    curves.plot(drawn, output, ns.smooth, tag)
    counts = ", ".join(f"{d.name}: {len(c.steps)} points" for d, c in zip(dirs, drawn))
    print(f"wrote {output} ({counts})", file=sys.stderr)
    return 0


def _curve(run_dir: Path, tag: str, summary: Any) -> Any:
    from mosaic_analytics import curves

    curve = curves.read_scalars(run_dir, tag, label=_label(summary))
    for rel in curve.damaged:
        print(
            f"mosaic plot: warning: {run_dir.name}/{rel} is truncated or corrupt; "
            f"using the {len(curve.steps)} points read before the damage",
            file=sys.stderr,
        )
    if not curve.steps:
        files = curves.event_files(run_dir)
        if not files:
            why = "has no TensorBoard event files"
        elif curve.damaged and len(curve.damaged) == len(files):
            why = f"has only damaged TensorBoard event files ({', '.join(curve.damaged)})"
        else:
            why = f"has no {tag!r} scalars in its {len(files)} TensorBoard event file(s)"
        raise UsageError(f"run {run_dir.name!r} {why}; nothing to plot")
    return curve


def _plot_groups(ns: argparse.Namespace, dirs: list[Path], drawn: list[Any], output: Path | None, tag: str) -> int:
    from mosaic_analytics import curves
    from mosaic_analytics.grouping import budget_warning, group_runs

    groups = group_runs(dirs, ns.group)
    by_label = {label: [drawn[dirs.index(d)] for d in members] for label, members in groups.items()}
    warning = budget_warning(dirs, ns.group)
    if warning:
        print(f"mosaic plot: warning: {warning}", file=sys.stderr)
    if output is not None:
        bands = curves.plot_groups(by_label, output, ns.smooth, tag, ns.band)
        sizes = ", ".join(f"{b.label}: {b.runs} runs" for b in bands)
        print(f"wrote {output} ({sizes})", file=sys.stderr)
    else:
        bands = [curves.aggregate(label, runs, ns.smooth) for label, runs in by_label.items()]
    if ns.table:
        if tag == curves.DEFAULT_TAG:  # the return: each run's one score (runstore.score)
            for band, members in zip(bands, groups.values()):
                band.finals = [_score_of(d, drawn[dirs.index(d)]).value for d in members]
        _print_table(bands, tag, ns.smooth)
    return 0


def _score_of(run_dir: Path, curve: Any) -> Any:
    from mosaic_core.runstore.score import run_score

    score = run_score(run_dir, points=list(zip(curve.steps, curve.values)))
    if score is None:
        raise UsageError(f"run {run_dir.name!r} has no episodic return to score")
    return score


def _print_table(bands: list[Any], tag: str, window: int) -> None:
    import statistics

    from mosaic_analytics.curves import DEFAULT_TAG
    from mosaic_core.runstore.score import WINDOW_NAME

    if tag == DEFAULT_TAG:
        print(
            f"# each run's score (its final evaluation's mean return, else the mean training return over the "
            f"{WINDOW_NAME}), mean ± std over the group's runs; IQM with 95% CIs: mosaic compare"
        )
    else:
        print(f"# final {tag} (mean of each run's last {window} points), mean ± std over the group's runs")
    rows = [("GROUP", "RUNS", "MEAN ± STD", "MIN", "MAX")]
    for band in bands:
        mean = statistics.fmean(band.finals)
        std = statistics.stdev(band.finals) if len(band.finals) > 1 else 0.0
        rows.append(
            (
                band.label,
                str(band.runs),
                f"{mean:.2f} ± {std:.2f}",
                f"{min(band.finals):.2f}",
                f"{max(band.finals):.2f}",
            )
        )
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    for row in rows:
        print(printable("  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip()))


def _label(summary: Any) -> str:
    details = [os.path.basename(summary.algo) if summary.algo else None, summary.env_id]
    details = [d for d in details if d]
    return f"{summary.run_id} ({', '.join(details)})" if details else summary.run_id


# ------------------------------------------------------------------ mosaic tensorboard
def _configure_tensorboard(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "run_ids",
        metavar="RUN_ID",
        nargs="*",
        help="runs to show, by id or unique prefix (default: every run under the runs root)",
    )
    parser.add_argument("--port", type=int, default=6006, help="port on 127.0.0.1 (0 = any free port; default 6006)")
    parser.add_argument("--runs-dir", help=RUNS_DIR_HELP)


def _run_tensorboard(ns: argparse.Namespace) -> int:
    """TensorBoard over the runs named (each under its id), or over every run of the root."""
    from mosaic_analytics import curves
    from mosaic_core.runstore.index import list_runs

    if not 0 <= ns.port <= 65535:
        raise UsageError(f"--port must be between 0 and 65535, got {ns.port}")
    root = runs_root(ns.runs_dir)
    if ns.run_ids:
        dirs = [find_run(root, run_id) for run_id in ns.run_ids]
        bare = [d for d in dirs if not curves.event_files(d)]
        if bare:
            raise UsageError(f"run {bare[0].name!r} has no TensorBoard event files under {bare[0]}")
    else:
        dirs = [Path(run.path) for run in reversed(list_runs(root)) if curves.event_files(Path(run.path))]
        if not dirs:
            raise UsageError(f"no run under {root} has TensorBoard event files")
    dirs = list(dict.fromkeys(dirs))
    from mosaic_analytics.tbserve import serve_tensorboard  # every request needs the printed token

    if len(dirs) == 1:
        return serve_tensorboard(str(dirs[0]), ns.port)
    if any("," in str(d) for d in dirs):  # TensorBoard's --logdir_spec splits on commas
        raise UsageError(f"{root} holds a comma: TensorBoard cannot take several runs there; name one run")
    return serve_tensorboard(",".join(f"{d.name}:{d}" for d in dirs), ns.port, logdir_flag="--logdir_spec")


COMMANDS = [
    CliCommand(
        "runs",
        "list runs (id, worker, algo, env, status, steps, last return, age, disk); `runs show|export|import|rm|gc`",
        _configure_runs,
        _run_runs,
    ),
    CliCommand("plot", "plot episodic return vs step of one or more runs into a PNG", _configure_plot, _run_plot),
    CliCommand(
        "tensorboard",
        "start TensorBoard over every run (or the runs named), bound to 127.0.0.1",
        _configure_tensorboard,
        _run_tensorboard,
    ),
    CliCommand(
        "logs",
        "a run's events in human form (--follow until it ends; --target for a daemon's run)",
        lambda parser: _logs().configure(parser),
        lambda ns: _logs().run(ns),
    ),
]


def _logs():
    from mosaic_analytics import logs

    return logs


def _table(mapping: Any, key: str) -> dict[str, Any]:
    """``mapping[key]`` when it is an object (a run's JSON files hold what their writers wrote), else {}."""
    value = mapping.get(key) if isinstance(mapping, dict) else None
    return value if isinstance(value, dict) else {}
