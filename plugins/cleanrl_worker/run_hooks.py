"""The CleanRL worker's run hooks: the host calls them for CleanRL runs only (the worker's
metadata names this module as its ``run_hooks``), so none asks which worker a run has.

Env families (:mod:`cleanrl_worker.env_families`): a CleanRL run's training process gets the
family's ids registered (ALE) and ``MUJOCO_GL=egl`` for MuJoCo on a headless machine (a run on
an env whose family is not installed is refused by the worker's ``validate``). The manifest's
``evaluation`` section comes from policy_eval's summary and evaluation during training. The
worker's own event (``eval_batch``) is declared by the worker.
"""

from __future__ import annotations

import json

from mosaic_core import hookimpl


@hookimpl
def mosaic_child_env(run):
    """``MUJOCO_GL=egl`` for a MuJoCo env on a headless machine, unless the user set ``MUJOCO_GL``."""
    import os

    from cleanrl_worker.env_families import headless_rendering_env

    return headless_rendering_env(run.config.env_id, dict(os.environ)) or None


@hookimpl
def mosaic_child_setup(child):
    """Register the env family's ids (ALE) before the script makes its envs."""
    from cleanrl_worker.env_families import prepare_family

    if child.env_id:
        prepare_family(child.env_id)


def _read_json(path):
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def _policy_eval_section(summary):
    stats = summary.get("return") if isinstance(summary.get("return"), dict) else {}
    discounted = summary.get("discounted_return") if isinstance(summary.get("discounted_return"), dict) else {}
    return {
        "summary": "eval_summary.json",
        "status": summary.get("status"),
        "episodes": summary.get("episodes"),
        "mean_return": stats.get("mean"),
        "std_return": stats.get("std"),
        "mean_discounted_return": discounted.get("mean"),
        "gamma": summary.get("gamma"),
    }


def _periodic_section(history_path, run_dir):
    history = _read_json(history_path)
    if history is None:
        return None
    evaluations = [e for e in history.get("evaluations") or [] if isinstance(e, dict)]
    best = history.get("best") if isinstance(history.get("best"), dict) else None
    best_model = best.get("path") if best else None
    return {
        "history": str(history_path.relative_to(run_dir)),
        "eval_frequency": history.get("eval_frequency"),
        "eval_episodes": history.get("eval_episodes"),
        "seed": history.get("seed"),
        "deterministic": history.get("deterministic"),
        "evaluations": len(evaluations),
        "curve": [[e.get("global_step"), e.get("mean_return")] for e in evaluations],
        "last": {k: evaluations[-1].get(k) for k in ("global_step", "mean_return", "std_return")}
        if evaluations
        else None,
        "best": {k: best.get(k) for k in ("global_step", "mean_return", "std_return")} if best else None,
        "best_model": best_model if best_model and (run_dir / best_model).is_file() else None,
    }


@hookimpl
def mosaic_build_manifest(run, status):
    """The ``evaluation`` section: policy_eval's ``eval_summary.json`` (its fields at the top) and/or
    evaluation during training (``periodic``, from each ``runs/*/eval_history.json``)."""
    section = {}
    summary = _read_json(run.run_dir / "eval_summary.json")
    if summary is not None:
        section.update(_policy_eval_section(summary))
    periodic = [
        p
        for p in (_periodic_section(path, run.run_dir) for path in sorted(run.run_dir.glob("runs/*/eval_history.json")))
        if p
    ]
    if periodic:
        section["periodic"] = periodic[-1]  # one training script per run directory
    return {"evaluation": section} if section else None
