"""Upstream CleanRL's evaluation after ``--save-model``, left out when the save is MOSAIC's default.

A run keeps its final model by default, so the worker passes ``--save-model`` to upstream scripts
too. Upstream's save path then imports ``cleanrl_utils.evals.<algo>_eval`` and plays 10 episodes of
the saved model with ``capture_video=True``: an evaluation with video that the user did not ask for,
which needs moviepy and a renderer (pygame, EGL for MuJoCo) and takes minutes on Atari or MuJoCo.
So under the default save the launcher names the final model's file (:func:`skipped_model`) and the
training process (:func:`install`) makes each ``cleanrl_utils.evals`` module's ``evaluate`` return
no episodes for that file, saying so on stderr; the script then logs no ``eval/episodic_return``.
Every other call runs as upstream wrote it (QDagger's teacher and mid-training evaluations), and a
user's own ``--save-model`` (or ``--upload-model``) runs upstream's evaluation unchanged. The
bundled algorithms have their own save path and are left alone.
"""

from __future__ import annotations

import functools
import importlib.abc
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

PACKAGE = "cleanrl_utils.evals"
UPLOAD_FLAGS = ("--upload-model", "--upload_model")


def skipped_model(algorithm: Any, argv: list[str], save_argv: list[str]) -> str | None:
    """The file name of the model whose upstream evaluation the run leaves out (the script saves
    it as ``runs/<run>/<exp_name>.cleanrl_model``), or None: a bundled script, a save the user
    asked for (``save_argv`` is the worker's own save flag, empty when the user gave one), an upload."""
    from cleanrl_worker.script_args import resolved_value

    if algorithm.source == "bundled" or save_argv != ["--save-model"]:
        return None
    if any(arg.split("=", 1)[0] in UPLOAD_FLAGS for arg in argv):
        return None
    exp_name = resolved_value(algorithm.script, argv, "exp_name") or Path(algorithm.script).stem
    return f"{exp_name}.cleanrl_model"


def dry_run_note(model_name: str) -> str:
    return (
        f"the default save keeps {model_name}; upstream's evaluation after it (10 episodes with video) "
        "is left out: give --save-model to run it"
    )


def install(model_name: str) -> None:
    """From now on, ``evaluate`` of every ``cleanrl_utils.evals`` module imported returns no
    episodes when asked to evaluate a file named ``model_name``."""
    sys.meta_path.insert(0, _EvalsFinder(model_name))


class _EvalsFinder(importlib.abc.MetaPathFinder):
    def __init__(self, model_name: str):
        self.model_name = model_name

    def find_spec(self, name: str, path: Any, target: Any = None) -> Any:
        if not name.startswith(PACKAGE + "."):
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(name, path, target)
            if spec is not None:
                if spec.loader is not None:
                    spec.loader = _EvalsLoader(spec.loader, self.model_name)
                return spec
        return None


class _EvalsLoader(importlib.abc.Loader):
    def __init__(self, loader: Any, model_name: str):
        self.loader = loader
        self.model_name = model_name

    def create_module(self, spec: Any) -> Any:
        return self.loader.create_module(spec)

    def exec_module(self, module: Any) -> None:
        self.loader.exec_module(module)
        if callable(getattr(module, "evaluate", None)):
            module.evaluate = _skipping(module.evaluate, self.model_name)


def _skipping(evaluate: Callable[..., Any], model_name: str) -> Callable[..., Any]:
    @functools.wraps(evaluate)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        model_path = args[0] if args else kwargs.get("model_path")
        if model_path is None or Path(str(model_path)).name != model_name:
            return evaluate(*args, **kwargs)
        print(
            f"mosaic: upstream's evaluation of {model_path} left out (saved by MOSAIC's default; "
            "give --save-model for upstream's 10 episodes with video)",
            file=sys.stderr,
            flush=True,
        )
        return []

    return wrapper
