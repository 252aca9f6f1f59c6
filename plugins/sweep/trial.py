"""The objective Optuna calls for one trial: K seeds, one ``mosaic run`` each, one after another.

Intermediate values (for the pruner) come from the runs' ``metrics`` events on a step axis
that runs through the seeds: seed ``i`` at global step ``s`` reports at
``i * total_timesteps + s`` the mean of the finished seeds' final values and the running
seed's current value, so every trial is compared with the others at the same seed and step.
The final value of a seed is its run's score for the episodic return (the one score every
listing shows), else the mean of the objective metric's last N values; the trial's value aggregates its seeds (mean by default).

Trial metadata reaches each run through ``optuna_*`` extras (never forwarded to the script;
the analytics plugin puts them in the manifest's ``optuna`` section).
"""

from __future__ import annotations

import math
import os
import secrets
import socket
import statistics
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mosaic_core.toolkit import plugin_host, redact
from mosaic_sweep.seeds import RETURN_METRIC, SeedOutcome, SeedProcess, SeedRun, intermediate_value
from mosaic_sweep.spec import SweepSpec, check_params
from mosaic_sweep.study import sample

METRICS_INTERVAL_S = 0.5  # a trial's metrics twice a second, for the pruner
AGGREGATE: dict[str, Callable[[list[float]], float]] = {
    "mean": statistics.fmean,
    "median": statistics.median,
    "min": min,
    "max": max,
}


class SweepStopped(Exception):
    """The sweep process got SIGTERM/SIGINT while a trial ran; its seeds were cancelled."""


@dataclass
class Stopper:
    """Shared by the signal handlers and the trial: the reason to stop and the running seed."""

    reason: str | None = None
    current: SeedProcess | None = None

    def request(self, reason: str) -> None:
        if self.reason is None:
            self.reason = reason
        seed = self.current
        if seed is not None:
            seed.stop(f"sweep process stopped ({reason})")


def process_label() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


def trial_process(trial: Any) -> str:
    """The ``host:pid`` of the sweep process that ran ``trial`` ("" if none); a study made before
    the rename keeps it as ``worker``."""
    attrs = trial.user_attrs
    return str(attrs.get("process", attrs.get("worker", "")))


def final_value(run_dir: Path, metric: str, last_n: int) -> float | None:
    """The episodic return: the run's one score (:mod:`mosaic_core.runstore.score`, the number
    ``mosaic runs`` and ``mosaic compare`` show); another metric: the mean of its last ``last_n``
    values (read back through ``mosaic_run_scalars``: the analytics plugin reads TensorBoard files)."""
    from mosaic_core.toolkit import plugin_host

    if metric == RETURN_METRIC:
        from mosaic_core.runstore.score import run_score

        score = run_score(run_dir)
        return score.value if score is not None else None
    values = [value for _step, value in plugin_host().run_scalars(run_dir, metric) or []]
    return statistics.fmean(values[-last_n:]) if values else None


class TrialObjective:
    """Callable handed to ``study.optimize``; ``before_trial`` runs first inside each trial
    (used to release the budget lock once Optuna has created the trial)."""

    def __init__(
        self,
        spec: SweepSpec,
        runs_root: Path,
        storage_shown: str,
        stopper: Stopper,
        before_trial: Any = None,
        launcher_argv: list[str] | None = None,
    ):
        self.spec, self.runs_root, self.storage_shown = spec, runs_root, storage_shown
        self.launcher_argv = list(launcher_argv or [])  # each seed's `mosaic run` gets them
        self.stopper, self.before_trial = stopper, before_trial
        self.last_error: str | None = None

    def __call__(self, trial: Any) -> float:
        if self.before_trial is not None:
            self.before_trial()
        spec = self.spec
        env_id, params = sample(trial, spec)
        self._record_trial(trial, env_id, params)
        runs: list[str] = []
        finals: list[float] = []
        reported = [-1]  # the last step reported to the pruner, across the trial's seeds
        for index, seed in enumerate(spec.seeds):
            if self.stopper.reason is not None:
                raise SweepStopped(self.stopper.reason)
            finals.append(self._run_seed(trial, index, seed, env_id, params, runs, finals, reported))
            trial.set_user_attr("seed_values", finals)
        result = AGGREGATE[spec.objective.aggregate](finals)
        shown = ", ".join(f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}" for k, v in params.items())
        _say(
            f"trial {trial.number}: {result:.4g} on {env_id} over seeds {list(spec.seeds)}"
            + (f" ({shown})" if shown else "")
        )
        return result

    def _record_trial(self, trial: Any, env_id: str, params: dict[str, Any]) -> None:
        """The trial's parameters checked (an enqueued trial's come from storage) and its config
        recorded in the study (redacted: the study is on disk)."""
        spec = self.spec
        problem = check_params(spec, env_id, params)
        if problem is not None:
            error = f"refused parameters from the study's storage: {problem}"
            trial.set_user_attr("seed_failure", error)
            self.last_error = error
            _say(f"trial {trial.number}: failed: {error}")
            raise SeedFailed(error)
        trial.set_user_attr("process", process_label())
        extras = redact({**spec.extras, "algo_params": {**spec.algo_params, **params}})
        trial.set_user_attr(
            "config",
            {
                "worker": spec.worker,
                "algo": spec.algo,
                "env_id": env_id,
                "total_timesteps": spec.total_timesteps,
                "seeds": list(spec.seeds),
                "extras": extras,
            },
        )

    def _seed_run(self, trial: Any, seed: int, env_id: str, params: dict[str, Any]) -> SeedRun:
        spec = self.spec
        return SeedRun(
            run_id=self._run_id(trial.number, seed),
            worker=spec.worker,
            algo=spec.algo,
            env_id=env_id,
            total_timesteps=spec.total_timesteps,
            seed=seed,
            extras=self._extras(trial, env_id, params, seed),
            runs_root=self.runs_root,
            launcher_argv=self.launcher_argv,
        )

    def _run_seed(
        self,
        trial: Any,
        index: int,
        seed: int,
        env_id: str,
        params: dict[str, Any],
        runs: list[str],
        finals: list[float],
        reported: list[int],
    ) -> float:
        """One seed's run of the trial, its metrics reported to the pruner as the mean with the
        seeds before it; its value, or TrialPruned, SweepStopped, SeedFailed."""
        import optuna

        spec = self.spec
        run = self._seed_run(trial, seed, env_id, params)
        runs.append(run.run_id)
        trial.set_user_attr("runs", runs)
        process = SeedProcess(run)
        pruned: list[str] = []
        offset = index * spec.total_timesteps

        def on_metrics(payload: dict[str, Any]) -> None:
            current = intermediate_value(payload, spec.objective.metric)
            step = payload.get("global_step")
            if current is None or not isinstance(step, int) or offset + step <= reported[0]:
                return
            value, reported[0] = statistics.fmean([*finals, current]), offset + step
            trial.report(value, reported[0])
            if trial.should_prune():
                reason = (
                    f"pruned by the sweep: study {spec.study_name} trial {trial.number}, "
                    f"{type(trial.study.pruner).__name__} at step {reported[0]} "
                    f"({spec.objective.metric} {value:.4g})"
                )
                pruned.append(reason)
                process.stop(reason)

        self.stopper.current = process.start()
        try:
            if self.stopper.reason is not None:  # a signal came while the process started
                process.stop(f"sweep process stopped ({self.stopper.reason})")
            outcome = process.follow(on_metrics)
        finally:
            self.stopper.current = None
        if pruned:
            trial.set_user_attr("pruned", pruned[0])
            _say(f"trial {trial.number}: {pruned[0]} [run {run.run_id}]")
            raise optuna.TrialPruned(pruned[0])
        if self.stopper.reason is not None:
            trial.set_user_attr("interrupted", self.stopper.reason)
            raise SweepStopped(self.stopper.reason)
        return self._seed_value(trial, outcome, run)

    def _seed_value(self, trial: Any, outcome: SeedOutcome, run: SeedRun) -> float:
        metric = self.spec.objective.metric
        if outcome.status == "completed":
            value = final_value(outcome.run_dir, metric, self.spec.objective.last_n)
            if value is not None and math.isfinite(value):
                return value
            error = f"run {run.run_id} logged no finite {metric!r} value"
        else:
            error = f"run {run.run_id} (seed {run.seed}) {outcome.status}: {outcome.error}"
        trial.set_user_attr("seed_failure", error)
        self.last_error = error
        _say(f"trial {trial.number}: failed: {error}")
        raise SeedFailed(error)

    def _extras(self, trial: Any, env_id: str, params: dict[str, Any], seed: int) -> dict[str, Any]:
        spec = self.spec
        extras = {**spec.extras, "algo_params": {**spec.algo_params, **params}}
        for key in _metrics_interval_keys():
            extras.setdefault(key, METRICS_INTERVAL_S)
        extras.update(
            {
                "optuna_study": spec.study_name,
                "optuna_trial": trial.number,
                "optuna_params": {**params, **({"env_id": env_id} if len(spec.env_ids) > 1 else {})},
                "optuna_storage": self.storage_shown,
                "optuna_seed": seed,
            }
        )
        return extras

    def _run_id(self, number: int, seed: int) -> str:
        run_id = f"{self.spec.study_name}-t{number}-s{seed}"
        if (self.runs_root / run_id).exists():  # a study of the same name ran here before
            run_id += f"-{secrets.token_hex(3)}"
        return run_id


class SeedFailed(Exception):
    """A seed's run failed or logged no objective value; the trial is marked failed."""


def _say(message: str) -> None:
    print(f"mosaic sweep: {message}", file=sys.stderr, flush=True)


def _metrics_interval_keys() -> list[str]:
    """The extras keys that set the seconds between a run's metrics events (declared
    ``ExtrasKey(metrics_interval=True)``: analytics' ``metrics_interval_s``)."""
    return [key.name for _plugin, key in plugin_host().extras_keys() if key.metrics_interval and not key.prefix]
