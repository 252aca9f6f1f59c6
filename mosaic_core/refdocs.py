"""Generate the site's reference pages from the code: ``docs/reference/cli.md`` from the argparse
parsers of ``mosaic`` (built-in commands, this distribution's plugins' commands, ``mosaic run``'s
shared flags and each built-in worker's own) and ``docs/reference/schemas.md`` from the config,
events, manifest and evaluation modules. Run ``python -m mosaic_core.refdocs`` (it writes both
under ``docs/reference/``, or ``--check``: exit 1 naming the stale pages); a test checks the
committed pages are up to date. Third-party workers and plugins are left out: the pages document
this distribution, whatever else is installed."""

from __future__ import annotations

import argparse
import dataclasses
import inspect
import json
import os
import re
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

DISTRIBUTION = "mosaic-rl"
WIDTH = "100"  # argparse wraps help at $COLUMNS: fixed, so the page is the same on every terminal
PAGES = ("cli.md", "schemas.md")


def _subparsers(parser: argparse.ArgumentParser) -> Iterator[tuple[str, argparse.ArgumentParser]]:
    for action in parser._actions:  # argparse has no public walk over subcommands
        if isinstance(action, argparse._SubParsersAction):
            yield from action.choices.items()


def _help(parser: argparse.ArgumentParser) -> str:
    previous = os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = WIDTH
    try:
        return parser.format_help().rstrip()
    finally:
        if previous is None:
            del os.environ["COLUMNS"]
        else:
            os.environ["COLUMNS"] = previous


def _section(title: str, parser: argparse.ArgumentParser, level: int = 2) -> list[str]:
    parts = ["", f"{'#' * level} {title}", "", "```text", _help(parser), "```"]
    for name, child in _subparsers(parser):
        parts += _section(f"{title} {name}", child, min(level + 1, 4))
    return parts


def _our_commands() -> list[Any]:
    """The built-in commands and those this distribution's plugins contribute."""
    from mosaic_core.cli import main
    from mosaic_core.plugins import plugin_host

    commands = {c.name: c for c in main._commands(chosen="workers")}  # built-in and the daemon's: no plugin
    for item in plugin_host().loaded:
        hook = getattr(item.obj, "mosaic_cli_commands", None)
        if item.status == "active" and item.distribution == DISTRIBUTION and hook is not None:
            commands.update({c.name: c for c in hook() or []})
    return [commands[name] for name in sorted(commands)]


def _worker_parser(name: str) -> argparse.ArgumentParser:
    """``mosaic run --worker NAME``'s parser as the pipeline builds it, launchers' flags included."""
    from mosaic_core import launchers, pipeline
    from mosaic_core.worker import load_worker
    from mosaic_core.workers import find_worker

    item = find_worker(name)
    parser = pipeline.host_parser(f"mosaic run --worker {name}", name, item.obj.description)
    own = parser.add_argument_group(f"{name} worker")
    launchers.add_arguments(
        parser, [i.obj for i in launchers.discover() if i.status == "active" and i.distribution == DISTRIBUTION]
    )
    load_worker(item).add_arguments(own)
    return parser


def render_cli() -> str:
    from mosaic_core.cli import main
    from mosaic_core.workers import discover_workers

    commands = _our_commands()
    parts = [
        "# CLI reference",
        "",
        "Generated from the argparse parsers by `python -m mosaic_core.refdocs`; do not edit by hand. "
        "`mosaic COMMAND --help` prints the same on any machine; a third-party plugin's commands and "
        "workers are not listed here (`mosaic --help`, `mosaic workers`).",
        "",
    ]
    parts += [f"- [`mosaic {c.name}`](#mosaic-{c.name}): {c.help}" for c in commands]
    workers = sorted(i.name for i in discover_workers() if i.distribution == DISTRIBUTION and i.status == "active")
    parts += ["- [`mosaic run`](#mosaic-run): the flags every worker's runs share, then each worker's own"]
    top = main.build_parser(commands, chosen="")
    parts += ["", "## mosaic", "", "```text", _help(top), "```"]
    for command in commands:
        parser = argparse.ArgumentParser(prog=f"mosaic {command.name}", description=command.help)
        command.configure(parser)
        parts += _section(f"mosaic {command.name}", parser)
    parts += [
        "",
        "## mosaic run",
        "",
        "`mosaic run [--worker NAME] [flags...]`: the host's flags, the same for every worker, then the "
        "launchers' and the worker's own (`mosaic run --worker NAME --help`). Without `--worker` a run "
        "goes to `$MOSAIC_DEFAULT_WORKER`, else to the installed worker that runs its `--algo` "
        "([running runs](../running.md#which-worker-runs-it)).",
    ]
    for name in workers:
        parts += _section(f"mosaic run --worker {name}", _worker_parser(name), 3)
    return "\n".join(parts) + "\n"


def _doc(obj: Any) -> str:
    """A docstring as one Markdown paragraph (reST roles and double backticks as code)."""
    text = " ".join((inspect.getdoc(obj) or "").split())
    return re.sub(r":(?:func|class|meth|mod|data|attr):`~?([^`]+)`", r"`\1`", text).replace("``", "`")


def _implementations(hook: str) -> list[tuple[str, str]]:
    """(plugin, docstring) of each of this distribution's active plugins implementing ``hook``; the
    docstring as written (Markdown), reST roles and double backticks as code."""
    from mosaic_core.plugins import plugin_host

    found = []
    for item in sorted(plugin_host().loaded, key=lambda i: i.name):
        function = getattr(item.obj, hook, None)
        if item.status == "active" and item.distribution == DISTRIBUTION and function is not None:
            text = inspect.getdoc(function) or ""
            found.append((item.name, re.sub(r":(?:func|class|meth|mod|data|attr):`~?([^`]+)`", r"`\1`", text)))
    return found


def _type(annotation: Any) -> str:
    name = annotation if isinstance(annotation, str) else getattr(annotation, "__name__", str(annotation))
    return name.replace(" | ", " or ")  # a pipe would split the Markdown table


def _config_section() -> list[str]:
    """The worker config's fields, limits and the standard extras keys."""
    from mosaic_core import config, contract

    parts = [
        "# Schemas",
        "",
        "Generated from the code by `python -m mosaic_core.refdocs`; do not edit by hand. The files a run "
        "writes under its run directory, and the config it reads.",
        "",
        "## Worker config",
        "",
        f"`mosaic_core.config.WorkerConfig`: {_doc(config.WorkerConfig)} "
        "Read from `--config` (flat, or nested at `metadata.worker.config`), flags and `--extras`; written "
        "to the run's `config.json` with secrets as `" + config.REDACTED + "`. A flat file may spell `algo` as "
        "`algorithm` (MOSAIC's shape) and hold other top-level keys: extras keys someone owns go to `extras`, "
        "the rest to `extras.algo_params` ([configs](../configs.md#flat-configs-in-mosaics-shape)). "
        "`WorkerConfig.raw` keeps the whole payload as loaded, in memory only.",
        "",
        "| field | type | required | default |",
        "|---|---|---|---|",
    ]
    for item in dataclasses.fields(config.WorkerConfig):
        if item.name not in config.FIELDS:  # `source` and `raw` live in memory only
            continue
        default = (
            "{}"
            if item.default_factory is not dataclasses.MISSING
            else ""
            if item.default is dataclasses.MISSING
            else json.dumps(item.default)
        )
        parts.append(
            f"| `{item.name}` | `{_type(item.type)}` | {'yes' if item.name in config.REQUIRED else 'no'} | "
            f"{default and f'`{default}`'} |"
        )
    parts += [
        "",
        "Limits: `run_id` matches `" + config.RUN_ID.pattern + "`; `seed` from 0 to "
        f"{config.MAX_SEED:,}; `total_timesteps` from 1 to {config.MAX_STEPS:,}; `algo`, `env_id`, "
        f"`worker_id` at most {config.MAX_NAME:,} characters without control characters; at most "
        f"{config.MAX_DEPTH} levels deep; a config file at most {config.MAX_CONFIG_FILE_BYTES // 2**20} MiB. "
        "Secret keys (the name contains " + ", ".join(f"`{m}`" for m in config.SECRET_MARKERS) + ") are "
        "redacted wherever the config is written or printed.",
        "",
        "### Standard extras keys",
        "",
        "The run contract's keys, the same for every worker ([the run contract](../run-contract.md)):",
        "",
        "| key | meaning |",
        "|---|---|",
    ]
    parts += [f"| `{key.name}` | {key.help} |" for key in contract.STANDARD_KEYS]
    return parts


def _events_section() -> list[str]:
    from mosaic_core import events

    return [
        "",
        "## Lifecycle events (`events.jsonl`)",
        "",
        _doc(events),
        "",
        "| field | what |",
        "|---|---|",
        "| `event` | the event's name (`run_started`, `metrics`, `checkpoint_saved`, `heartbeat`, `note`, …) |",
        "| `run_id` | the run |",
        "| `seq` | 1, 2, 3… in the order written |",
        "| `timestamp` | seconds since the epoch |",
        "| `payload` | an object, redacted; non-finite numbers become `null` |",
        "",
        "Terminal events: " + ", ".join(f"`{e}` (status `{events.STATUS_OF[e]}`)" for e in events.TERMINAL) + ".",
        "",
    ]


def _manifest_section() -> list[str]:
    from mosaic_core import manifest

    parts = [
        "## Run manifest (`manifest.json`)",
        "",
        _doc(manifest),
        "",
        f"Schema `{manifest.MANIFEST_SCHEMA}`. The host writes these sections; every other top-level key is "
        "a plugin's section (`mosaic_build_manifest`), named after it:",
        "",
    ]
    parts += [f"- `{name}`" for name in sorted(manifest.HOST_SECTIONS)]
    parts += [
        "",
        "### At a run's end: the terminal event's payload",
        "",
        "A terminal event's payload holds the host's fields ("
        + ", ".join(f"`{name}`" for name in sorted(manifest.HOST_TERMINAL_FIELDS))
        + ") and those plugins contribute through `mosaic_terminal_payload`, which may also write a file "
        "derived from the manifest. This distribution's plugins, in their own words:",
    ]
    for name, text in _implementations("mosaic_terminal_payload"):
        parts += ["", f"#### Plugin `{name}`", "", text]
    return parts


def _eval_section() -> list[str]:
    from mosaic_core import contract

    example = contract.eval_result(
        worker="example",
        algo="random",
        env_id="CartPole-v1",
        checkpoint="checkpoints/step_50000.json",
        global_step=50000,
        returns=[500.0, 480.0],
        lengths=[500, 480],
        seeds=[1000001, 1000002],
        deterministic=True,
    )
    example["written"] = 1767225600.0
    return [
        "",
        f"## Evaluation result (`{contract.EVAL_FILE}`)",
        "",
        _doc(contract.eval_result),
        "",
        "Written by `mosaic_core.contract.write_eval` (atomically). For two episodes:",
        "",
        "```json",
        json.dumps(example, indent=2),
        "```",
    ]


def render_schemas() -> str:
    """``docs/reference/schemas.md``: the config a run reads and the files it writes."""
    parts = [*_config_section(), *_events_section(), *_manifest_section(), *_eval_section()]
    return "\n".join(parts) + "\n"


def pages() -> dict[str, str]:
    return {"cli.md": render_cli(), "schemas.md": render_schemas()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m mosaic_core.refdocs", description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default="docs/reference", help="where the pages go (default docs/reference)")
    parser.add_argument("--check", action="store_true", help="write nothing; exit 1 naming the pages that differ")
    ns = parser.parse_args(argv)
    out = Path(ns.out)
    stale = []
    for name, text in pages().items():
        path = out / name
        if ns.check:
            if not path.is_file() or path.read_text(encoding="utf-8") != text:
                stale.append(str(path))
            continue
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    if stale:
        print(f"stale: {', '.join(stale)}; run: python -m mosaic_core.refdocs", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
