"""Upstream CleanRL's evaluation after ``--save-model``: left out when the save is MOSAIC's default,
recorded as the run's evaluation when the user asked for it.

A run keeps its final model by default, so the worker passes ``--save-model`` to upstream scripts
too. Upstream's save path then imports ``cleanrl_utils.evals.<algo>_eval`` and plays 10 episodes of
the saved model with ``capture_video=True``: an evaluation with video that the user did not ask for,
which needs moviepy and a renderer (pygame, EGL for MuJoCo) and takes minutes on Atari or MuJoCo.
So under the default save the launcher names the final model's file (:func:`skipped_model`) and the
training process (:func:`install`) makes each ``cleanrl_utils.evals`` module's ``evaluate`` return
no episodes for that file, saying so on stderr; the script then logs no ``eval/episodic_return``.
Every other call runs as upstream wrote it (QDagger's teacher and mid-training evaluations), and a
user's own ``--save-model`` (or ``--upload-model``) runs upstream's evaluation unchanged, and
:func:`record` then keeps what it played where ``mosaic evaluate`` keeps its own,
``evaluations/upstream-save-STEP/eval.json`` (``mosaic.eval/1``), so it is the run's evaluation (its
score, its model card) and not only ``eval/episodic_return`` at TensorBoard steps 0–9. Upstream's
evaluation resets its env unseeded: the file says so (``seed`` null, ``first_seed`` null,
``evaluated_by``) instead of claiming the run contract's evaluation seeds. The bundled algorithms
have their own save path (:func:`cleanrl_worker.evaluation.evaluate_saved_model`) and are left alone.
"""

from __future__ import annotations

import functools
import importlib.abc
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

PACKAGE = "cleanrl_utils.evals"
UPLOAD_FLAGS = ("--upload-model", "--upload_model")
FOLDER_PREFIX = "upstream-save-"  # evaluations/upstream-save-STEP/eval.json
UNSEEDED = "upstream's own episodes (its evaluation resets unseeded), not the run contract's evaluation seeds"

Wrap = Callable[[Callable[..., Any]], Callable[..., Any]]


def final_model(algorithm: Any, argv: list[str]) -> str | None:
    """The file name an upstream script saves its final model as (``runs/<run>/<exp_name>.cleanrl_model``);
    None for a bundled script (a save path of its own)."""
    from cleanrl_worker.script_args import resolved_value

    if algorithm.source == "bundled":
        return None
    exp_name = resolved_value(algorithm.script, argv, "exp_name") or Path(algorithm.script).stem
    return f"{exp_name}.cleanrl_model"


def skipped_model(algorithm: Any, argv: list[str], save_argv: list[str]) -> str | None:
    """The file name of the model whose upstream evaluation the run leaves out (the script saves
    it as ``runs/<run>/<exp_name>.cleanrl_model``), or None: a bundled script, a save the user
    asked for (``save_argv`` is the worker's own save flag, empty when the user gave one), an upload."""
    if save_argv != ["--save-model"] or any(arg.split("=", 1)[0] in UPLOAD_FLAGS for arg in argv):
        return None
    return final_model(algorithm, argv)


def dry_run_note(model_name: str) -> str:
    return (
        f"the default save keeps {model_name}; upstream's evaluation after it (10 episodes with video) "
        "is left out: give --save-model to run it"
    )


def install(model_name: str) -> None:
    """From now on, ``evaluate`` of every ``cleanrl_utils.evals`` module imported returns no
    episodes when asked to evaluate a file named ``model_name``."""
    sys.meta_path.insert(0, _EvalsFinder(lambda evaluate: _skipping(evaluate, model_name)))


def record(model_name: str, trained_steps: int | None) -> None:
    """From now on, ``evaluate`` of every ``cleanrl_utils.evals`` module imported, asked to evaluate
    a file named ``model_name``, runs as upstream wrote it and its episodes become the run's
    evaluation (:func:`write_evaluation`). ``trained_steps``: the script's total_timesteps, the
    evaluation's step when the script's own ``global_step`` cannot be read."""
    sys.meta_path.insert(0, _EvalsFinder(lambda evaluate: _recording(evaluate, model_name, trained_steps)))


class _EvalsFinder(importlib.abc.MetaPathFinder):
    def __init__(self, wrap: Wrap):
        self.wrap = wrap

    def find_spec(self, name: str, path: Any, target: Any = None) -> Any:
        if not name.startswith(PACKAGE + "."):
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(name, path, target)
            if spec is not None:
                if spec.loader is not None:
                    spec.loader = _EvalsLoader(spec.loader, self.wrap)
                return spec
        return None


class _EvalsLoader(importlib.abc.Loader):
    def __init__(self, loader: Any, wrap: Wrap):
        self.loader = loader
        self.wrap = wrap

    def create_module(self, spec: Any) -> Any:
        return self.loader.create_module(spec)

    def exec_module(self, module: Any) -> None:
        self.loader.exec_module(module)
        if callable(getattr(module, "evaluate", None)):
            module.evaluate = self.wrap(module.evaluate)


def _model_path(args: tuple[Any, ...], kwargs: dict[str, Any]) -> str | None:
    model_path = args[0] if args else kwargs.get("model_path")
    return None if model_path is None else str(model_path)


def _skipping(evaluate: Callable[..., Any], model_name: str) -> Callable[..., Any]:
    @functools.wraps(evaluate)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        model_path = _model_path(args, kwargs)
        if model_path is None or Path(model_path).name != model_name:
            return evaluate(*args, **kwargs)
        print(
            f"mosaic: upstream's evaluation of {model_path} left out (saved by MOSAIC's default; "
            "give --save-model for upstream's 10 episodes with video)",
            file=sys.stderr,
            flush=True,
        )
        return []

    return wrapper


def _recording(evaluate: Callable[..., Any], model_name: str, trained_steps: int | None) -> Callable[..., Any]:
    @functools.wraps(evaluate)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        model_path = _model_path(args, kwargs)
        if model_path is None or Path(model_path).name != model_name:
            return evaluate(*args, **kwargs)
        lengths: list[int] = []
        args, kwargs = _counting_lengths(args, kwargs, lengths)
        returns = evaluate(*args, **kwargs)
        caller = sys._getframe(1)  # the script, just past its training loop: its global_step is the last
        step = caller.f_locals.get("global_step", caller.f_globals.get("global_step"))
        step = int(step) if isinstance(step, int) else trained_steps
        write_evaluation(model_path, list(returns), lengths, step, f"upstream {evaluate.__module__} after --save-model")
        return returns

    return wrapper


def _counting_lengths(
    args: tuple[Any, ...], kwargs: dict[str, Any], lengths: list[int]
) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """``evaluate``'s arguments with its ``make_env`` (upstream's ``make_env(env_id, seed, idx, …)``,
    which returns a thunk) wrapped so that every env it makes appends each episode's length to
    ``lengths`` as the episode ends: the order a vector env's ``final_info`` reports them in."""

    def counting(make_env: Callable[..., Any]) -> Callable[..., Any]:
        def make(*make_args: Any, **make_kwargs: Any) -> Any:
            thunk = make_env(*make_args, **make_kwargs)
            return (lambda: _counting_env(thunk(), lengths)) if callable(thunk) else thunk

        return make

    if "make_env" in kwargs:
        return args, {**kwargs, "make_env": counting(kwargs["make_env"])}
    if len(args) > 1 and callable(args[1]):
        return (args[0], counting(args[1]), *args[2:]), kwargs
    return args, kwargs


def _counting_env(env: Any, lengths: list[int]) -> Any:
    """``env`` wrapped to append each episode's length to ``lengths`` as it ends (gymnasium is
    imported here, in the training process: the host never imports it)."""
    import gymnasium as gym

    class EpisodeLengths(gym.Wrapper):  # type: ignore[misc, type-arg]
        steps = 0

        def reset(self, **kwargs: Any) -> Any:
            self.steps = 0
            return self.env.reset(**kwargs)

        def step(self, action: Any) -> Any:
            result = self.env.step(action)
            self.steps += 1
            if result[2] or result[3]:
                lengths.append(self.steps)
            return result

    return EpisodeLengths(env)


def write_evaluation(model_path: str, returns: list[Any], lengths: list[int], step: int | None, by: str) -> None:
    """Upstream's evaluation of the run's final model as the run's evaluation, ``mosaic.eval/1``
    in ``evaluations/upstream-save-STEP/eval.json``, announced as an ``eval_result`` event and a
    note saying whose seeds it played. Nothing outside a MOSAIC run, or when the episodes' lengths
    were not seen (an ``evaluate`` that makes its envs without ``make_env``): said on stderr."""
    from cleanrl_worker.evaluation import EVENT_KEYS
    from mosaic_core import contract
    from mosaic_core.child import current, emit_event

    child = current()
    if child is None or not returns:
        return
    if len(lengths) < len(returns) or step is None:
        print(
            f"mosaic: upstream's evaluation of {model_path} not recorded: its episodes' lengths or step unknown",
            file=sys.stderr,
            flush=True,
        )
        return
    summary = contract.eval_result(
        worker="cleanrl",
        algo=child.algo,
        env_id=child.env_id,
        checkpoint=os.path.abspath(model_path),
        global_step=step,
        returns=[_number(value) for value in returns],
        lengths=lengths[: len(returns)],
        seeds=[0] * len(returns),  # replaced below: upstream's evaluation is unseeded
        deterministic=False,
        extra={"evaluated_by": by, "seeds": UNSEEDED},
    )
    summary["protocol"]["first_seed"] = None
    for episode in summary["episodes"]:
        episode["seed"] = None
    folder = Path(child.run_dir) / "evaluations" / f"{FOLDER_PREFIX}{step}"
    os.makedirs(folder, mode=0o700, exist_ok=True)
    path = contract.write_eval(folder / contract.EVAL_FILE, summary)
    emit_event("eval_result", {key: summary[key] for key in EVENT_KEYS} | {"path": str(path)})
    emit_event("note", {"text": f"{by}: {len(returns)} episodes on {UNSEEDED}; the run's evaluation ({path})"})


def _number(value: Any) -> float:
    """An episode's return as upstream collects it (``info['episode']['r']``: a float or a 1-element array)."""
    return float(getattr(value, "item", lambda: value)())
