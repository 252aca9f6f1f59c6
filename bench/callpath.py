"""How a run's path reads, in counts: run by hand, before and after a refactor.

    python bench/callpath.py            # a dry run and a real run of the example worker

(a) The path of ``mosaic run`` from the command line to its launch (the first ``subprocess.Popen``
of the training process, or the dry run's summary), followed with ``sys.setprofile``. The host's
own path is the chain of calls from ``mosaic_core.cli.main.main`` through ``mosaic_core`` code
only (a call into a plugin, a worker, pluggy or the standard library leaves it until it returns;
module bodies run by an import and the code a dataclass generates are left out). Every call on
it from one module into another is a *visit*, and so is every return into the caller's module; a
visit to a module the path entered before is a *re-entry*. The modules entered most often are listed. Each run is measured twice, the first a
warm-up that imports what it needs. (b) Functions over 60
lines in ``mosaic_core`` and ``plugins`` (``ast``: from ``def`` to the function's last line). (c)
Modules over 600 lines in ``mosaic_core``.
"""

from __future__ import annotations

import ast
import collections
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
LONG_FUNCTION = 60
LONG_MODULE = 600


class Stop(Exception):
    """Raised at the launch: the path ends there."""


def follow(argv: list[str]) -> list[tuple[str, bool]]:
    """The ``mosaic_core`` modules a run's path visits, in order, each with whether it was a call
    (else a return into the caller's module)."""
    from mosaic_core.cli.main import main

    visits: list[tuple[str, bool]] = []
    stack: list[str | None] = []  # the module of each frame on the host's own path, None off it

    def profile(frame: Any, event: str, arg: Any) -> None:
        if event == "call":
            module = frame.f_globals.get("__name__", "")
            code = frame.f_code
            own = (
                module.startswith("mosaic_core") and not code.co_filename.startswith("<") and code.co_name != "<module>"
            )
            on_path = own and (not stack or stack[-1] is not None)
            caller = stack[-1] if stack else None
            if on_path and module != caller:
                visits.append((module, True))
            stack.append(module if on_path else None)
        elif event == "return" and stack:
            left = stack.pop()
            back = stack[-1] if stack else None
            if left is not None and back is not None and back != left:
                visits.append((back, False))  # back in the caller's module: a visit too

    real_popen = subprocess.Popen._execute_child  # type: ignore[attr-defined]

    def launch(*args: Any, **kwargs: Any) -> Any:  # the profiler cannot raise: this does
        raise Stop

    subprocess.Popen._execute_child = launch  # type: ignore[attr-defined]
    sys.setprofile(profile)
    try:
        main(argv)
    except (Stop, SystemExit):
        pass
    finally:
        sys.setprofile(None)
        subprocess.Popen._execute_child = real_popen  # type: ignore[attr-defined]
    return visits


def report_path(title: str, path: list[tuple[str, bool]]) -> None:
    visits = collections.Counter(module for module, _call in path)
    calls = collections.Counter(module for module, call in path if call)
    print(
        f"{title}: {len(path)} module visits ({len(path) - len(visits)} re-entries, {len(visits)} modules); "
        f"{sum(calls.values())} calls into another module"
    )
    for module, times in visits.most_common(6):
        print(f"    {times:3d} visits, {calls[module]:3d} calls in  {module}")
    staged = sorted(m for m in visits if m.startswith(("mosaic_core.pipeline", "mosaic_core.stages")))
    print(
        "  the pipeline's modules (visits/calls in): "
        + ", ".join(f"{m.removeprefix('mosaic_core.')} {visits[m]}/{calls[m]}" for m in staged)
    )


def long_functions() -> list[tuple[int, str]]:
    found = []
    for folder in (ROOT / "mosaic_core", ROOT / "plugins"):
        for path in sorted(folder.rglob("*.py")):
            if path.name.endswith(("_pb2.py", "_pb2_grpc.py")):
                continue
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    length = (node.end_lineno or node.lineno) - node.lineno + 1
                    if length > LONG_FUNCTION:
                        found.append((length, f"{path.relative_to(ROOT)}:{node.lineno} {node.name}"))
    return sorted(found, reverse=True)


def long_modules() -> list[tuple[int, str]]:
    found = []
    for path in sorted((ROOT / "mosaic_core").rglob("*.py")):
        if path.name.endswith(("_pb2.py", "_pb2_grpc.py")):
            continue
        lines = len(path.read_text().splitlines())
        if lines > LONG_MODULE:
            found.append((lines, str(path.relative_to(ROOT))))
    return sorted(found, reverse=True)


def main() -> None:
    with tempfile.TemporaryDirectory() as runs:
        os.environ["MOSAIC_RUNS_DIR"] = runs
        common = ["run", "--worker", "example", "--env-id", "CartPole-v1", "--total-timesteps", "64", "--quiet"]
        follow([*common, "--dry-run", "--run-id", "warm"])
        report_path("dry run (to its summary)", follow([*common, "--dry-run", "--run-id", "dry"]))
        follow([*common, "--run-id", "warm"])
        report_path("real run (to its launch)", follow([*common, "--run-id", "real"]))
    functions = long_functions()
    print(f"functions over {LONG_FUNCTION} lines (mosaic_core, plugins): {len(functions)}")
    for length, where in functions:
        print(f"    {length:4d}  {where}")
    modules = long_modules()
    print(f"modules over {LONG_MODULE} lines (mosaic_core): {len(modules)}")
    for length, where in modules:
        print(f"    {length:4d}  {where}")


if __name__ == "__main__":
    main()
