"""The training process: install MOSAIC's patch points, then run a CleanRL script as ``__main__``.

``python -m cleanrl_worker.launch [--root DIR] SCRIPT -- ARGS...`` sets ``sys.argv`` and
``__file__`` as if the script were run directly (CleanRL scripts have no ``main()``), puts the
CleanRL checkout root on ``sys.path`` (for ``cleanrl_utils``) and never swallows an exception:
a crash prints its traceback to the run's stderr log and exits non-zero. ``--skip-eval-of FILE``
leaves out upstream's evaluation of the model the default save keeps; ``--record-eval-of FILE``
keeps upstream's evaluation of the model the user asked to save as the run's evaluation
(:mod:`cleanrl_worker.upstream_eval`).
"""

from __future__ import annotations

import argparse
import ast
import runpy
import sys
from pathlib import Path

from cleanrl_worker import upstream_eval
from cleanrl_worker.gym029_compat import install_for as install_gym029_compat
from mosaic_core import child


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="cleanrl_worker.launch")
    parser.add_argument("script", type=Path)
    parser.add_argument("--root", type=Path, action="append", default=[], help="prepend to sys.path")
    parser.add_argument("--skip-eval-of", metavar="FILE", help="leave out cleanrl_utils.evals' evaluation of FILE")
    parser.add_argument("--record-eval-of", metavar="FILE", help="record cleanrl_utils.evals' evaluation of FILE")
    parser.add_argument("args", nargs=argparse.REMAINDER)
    ns = parser.parse_args(argv)
    script = ns.script.resolve()
    script_args = ns.args[1:] if ns.args[:1] == ["--"] else ns.args
    for root in reversed([script.parent, *ns.root]):
        sys.path.insert(0, str(root.resolve()))
    child.connect()
    install_gym029_compat(script, getattr(child.current(), "extras", {}))  # 0.29-era scripts on gymnasium 1.x
    if ns.skip_eval_of:
        upstream_eval.install(ns.skip_eval_of)
    if ns.record_eval_of:
        upstream_eval.record(ns.record_eval_of, _total_timesteps(script, script_args))
    if _imports_torch(script):
        child.preload("torch", "torch._dynamo")  # the script's own import, and its first optimizer's
    sys.argv = [str(script), *script_args]
    runpy.run_path(str(script), run_name="__main__")


def _imports_torch(script: Path) -> bool:
    """Whether ``script`` imports torch (CleanRL's JAX scripts do not: they are not made to)."""
    try:
        tree = ast.parse(script.read_bytes(), str(script))
    except (OSError, SyntaxError, ValueError):
        return False  # runpy reports it, as it would without us
    for node in ast.walk(tree):
        names = [a.name for a in node.names] if isinstance(node, ast.Import) else []
        names += [node.module] if isinstance(node, ast.ImportFrom) and node.module and not node.level else []
        if any(name.split(".")[0] == "torch" for name in names):
            return True
    return False


def _total_timesteps(script: Path, script_args: list[str]) -> int | None:
    from cleanrl_worker.script_args import resolved_value

    try:
        return int(resolved_value(script, script_args, "total_timesteps"))
    except (TypeError, ValueError):
        return None


if __name__ == "__main__":
    main()
