"""Checks made before a study exists, so a bad spec writes nothing.

1. Each env's first trial is put through ``mosaic run --dry-run`` (the worker's own validation:
   algorithm, script flags from ``algo_params`` and ``[params]``, plugin extras).
2. The objective metric must be a tag the algorithm script logs: the literal tags of its
   ``add_scalar`` calls (and of the modules it imports from its own packages) are read from
   the source with ``ast``, without importing anything heavy. A script that logs only
   computed tags is not checked.
"""

from __future__ import annotations

import ast
import difflib
import importlib.util
import json
import subprocess
from pathlib import Path
from typing import Any

from mosaic_core import UsageError
from mosaic_sweep.seeds import SeedRun, command_for, environment
from mosaic_sweep.spec import SweepSpec


def check(spec: SweepSpec, runs_root: Path) -> None:
    script = None
    sample = {p.name: p.first_value() for p in spec.params if not p.when}
    for env_id in spec.env_ids:
        run = SeedRun(
            run_id="sweep-preflight",
            worker=spec.worker,
            algo=spec.algo,
            env_id=env_id,
            total_timesteps=spec.total_timesteps,
            seed=spec.seeds[0],
            runs_root=runs_root,
            extras={**spec.extras, "algo_params": {**spec.algo_params, **sample}},
        )
        done = subprocess.run(
            command_for(run, dry_run=True),
            env=environment(run),
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=120,
        )
        if done.returncode != 0:
            lines = [l for l in done.stderr.splitlines() if l.strip()]
            why = lines[-1].removeprefix("mosaic: error: ") if lines else f"exit code {done.returncode}"
            raise UsageError(
                f"sweep spec {spec.source}: a trial on {env_id} would be refused by "
                f"`mosaic run --worker {spec.worker}`: {why}"
            )
        try:
            script = json.loads(done.stdout).get("algorithm", {}).get("script") or script
        except (ValueError, AttributeError):
            pass
    if script:
        check_metric(spec, Path(script))


def check_metric(spec: SweepSpec, script: Path) -> None:
    exact, prefixes = logged_tags(script)
    metric = spec.objective.metric
    if not exact and not prefixes:
        return
    if metric in exact or any(metric.startswith(p) for p in prefixes):
        return
    close = difflib.get_close_matches(metric, sorted(exact), n=1)
    hint = f"; did you mean {close[0]}?" if close else ""
    raise UsageError(
        f"sweep spec {spec.source}: objective.metric: {metric!r} is never logged by {script.name} "
        f"(it logs {', '.join(sorted(exact)[:12])}){hint}"
    )


def logged_tags(script: Path) -> tuple[set[str], set[str]]:
    """(literal tags, prefixes of f-string tags) of ``add_scalar`` calls in the script and
    the modules it imports from packages found on disk (no import is executed)."""
    exact: set[str] = set()
    prefixes: set[str] = set()
    seen: set[Path] = set()
    todo = [script]
    while todo:
        path = todo.pop()
        if path in seen or len(seen) > 30:
            continue
        seen.add(path)
        try:
            tree = ast.parse(path.read_text(encoding="utf-8"))
        except (OSError, SyntaxError, UnicodeDecodeError):
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "add_scalar":
                _tag(node.args[0] if node.args else None, exact, prefixes)
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                todo += _local_module(node.module, script)
    return exact, prefixes


def _tag(node: Any, exact: set[str], prefixes: set[str]) -> None:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        exact.add(node.value)
    elif isinstance(node, ast.JoinedStr) and node.values and isinstance(node.values[0], ast.Constant):
        prefixes.add(str(node.values[0].value))


def _local_module(name: str, script: Path) -> list[Path]:
    """The source file of ``name`` when its top-level package is found without importing
    anything (so torch, gymnasium… are never loaded); only our own kind of packages count."""
    top, *rest = name.split(".")
    if top in ("torch", "numpy", "gymnasium", "gym", "tyro", "stable_baselines3", "jax", "flax"):
        return []
    try:
        spec = importlib.util.find_spec(top)
    except (ImportError, ValueError):
        return []
    if spec is None or not spec.submodule_search_locations:
        return []
    for root in spec.submodule_search_locations:
        base = Path(root, *rest)
        for candidate in (base.with_suffix(".py"), base / "__init__.py"):
            if candidate.is_file():
                return [candidate]
    return []
