"""Reading a study back: ``status``, ``best`` (with a ready worker config and a seed plot),
``dashboard``, and the summary a sweep prints when it ends."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

from mosaic_core import MosaicError, UsageError
from mosaic_core.files import check_output, write_atomic
from mosaic_core.jsontext import dumps
from mosaic_core.toolkit import redact
from mosaic_sweep import storage as storages
from mosaic_sweep.spec import ENV_PARAM, NAME, check_params
from mosaic_sweep.trial import trial_process


def load(study_name: str, storage_value: str | None) -> tuple[Any, str]:
    import optuna

    if not NAME.match(study_name):
        raise UsageError(f"study name {study_name!r}: 1-64 letters, digits, '-' or '_'")
    location = storages.resolve(storage_value, study_name)
    handle = storages.open_storage(location, create=False)
    try:
        return optuna.load_study(study_name=study_name, storage=handle), location.shown
    except KeyError:
        names = [s.study_name for s in optuna.get_all_study_summaries(handle, include_best_trial=False)]
        hint = f" (studies there: {', '.join(names)})" if names else ""
        raise UsageError(f"no study {study_name!r} in {location.shown}{hint}") from None


def _best(study: Any) -> Any:
    try:
        return study.best_trial
    except ValueError:
        return None


def _params(trial: Any) -> str:
    return ", ".join(f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}" for k, v in trial.params.items()) or "-"


def _record(trial: Any) -> dict[str, Any]:
    duration = None
    if trial.datetime_start is not None:
        end = trial.datetime_complete.timestamp() if trial.datetime_complete else time.time()
        duration = round(end - trial.datetime_start.timestamp(), 1)
    attrs = trial.user_attrs
    return {
        "number": trial.number,
        "state": trial.state.name.lower(),
        "value": trial.value,
        "params": trial.params,
        "seed_values": attrs.get("seed_values"),
        "runs": attrs.get("runs", []),
        "process": trial_process(trial) or None,
        "duration_s": duration,
        "note": attrs.get("pruned") or attrs.get("seed_failure") or attrs.get("interrupted"),
        "retry_of": trial.system_attrs.get("failed_trial"),
    }


def counts(study: Any) -> dict[str, int]:
    out: dict[str, int] = {}
    for trial in study.get_trials(deepcopy=False):
        out[trial.state.name.lower()] = out.get(trial.state.name.lower(), 0) + 1
    return out


def summary(study: Any, shown: str) -> None:
    best = _best(study)
    states = ", ".join(f"{n} {s}" for s, n in sorted(counts(study).items())) or "no trials"
    print(f"mosaic sweep: study {study.study_name} in {shown}: {states}", file=sys.stderr)
    if best is not None:
        print(
            f"mosaic sweep: best trial {best.number}: {best.value:.4g} ({_params(best)}); "
            f"`mosaic sweep best {study.study_name} --config best.json`",
            file=sys.stderr,
        )


def status(study_name: str, storage_value: str | None, as_json: bool) -> int:
    study, shown = load(study_name, storage_value)
    trials = [_record(t) for t in study.get_trials(deepcopy=False)]
    best = _best(study)
    running = sorted({t["process"] for t in trials if t["state"] == "running" and t["process"]})
    data = {
        "study": study.study_name,
        "storage": shown,
        "direction": study.direction.name.lower(),
        "counts": counts(study),
        "best": _record(best) if best else None,
        "running_processes": running,
        "trials": trials,
    }
    if as_json:
        print(dumps(data, indent=2, default=str))
        return 0
    print(f"study {data['study']} ({data['direction']}) in {shown}")
    print("trials: " + (", ".join(f"{n} {s}" for s, n in sorted(data["counts"].items())) or "none"))
    print(f"best: trial {best.number}, {best.value:.4g} ({_params(best)})" if best else "best: none yet")
    print("running sweep processes: " + (", ".join(running) or "none"))
    rows = [("#", "STATE", "VALUE", "SECONDS", "PROCESS", "PARAMS / NOTE")]
    for t in trials:
        value = "-" if t["value"] is None else f"{t['value']:.4g}"
        seconds = "-" if t["duration_s"] is None else f"{t['duration_s']:.0f}"
        params = ", ".join(f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}" for k, v in t["params"].items())
        if t["retry_of"] is not None:
            params = f"retry of {t['retry_of']}; {params}"
        rows.append(
            (
                str(t["number"]),
                t["state"],
                value,
                seconds,
                t["process"] or "-",
                (params or "-") + (f" [{t['note']}]" if t["note"] else ""),
            )
        )
    widths = [max(len(r[i]) for r in rows) for i in range(5)]
    for r in rows:
        print("  ".join(c.ljust(w) for c, w in zip(r[:5], widths)) + "  " + r[5])
    return 0


def worker_config(trial: Any, spec: Any) -> dict[str, Any]:
    """A flat worker config (``mosaic run --worker W --config FILE``) for a trial's setting: the
    spec's fixed config (worker, algo, budget, first seed, extras) with only the spec's own
    parameters, checked against the spec, written over it. Nothing else the storage holds (a
    trial's recorded config, its ``algo`` or a script path) reaches the file."""
    params = dict(trial.params)
    env_id = params.pop(ENV_PARAM, spec.env_ids[0])
    problem = check_params(spec, env_id, params)
    if problem is not None:
        raise MosaicError(f"trial {trial.number}'s stored parameters do not fit the spec: {problem}; not written")
    return {
        "algo": spec.algo,
        "env_id": env_id,
        "total_timesteps": spec.total_timesteps,
        "seed": spec.seeds[0],
        "extras": {**spec.extras, "algo_params": {**spec.algo_params, **params}},
    }


def study_spec(study: Any, spec_file: str | None) -> Any:
    """The sweep's spec: ``--spec FILE`` when given, else the one stored when the study was first
    run (in a storage only its owner can write; see storage.check_private)."""
    from mosaic_sweep.spec import load_spec, parse_spec
    from mosaic_sweep.study import SPEC_ATTR

    if spec_file:
        return load_spec(spec_file)
    stored = study.user_attrs.get(SPEC_ATTR)
    if not isinstance(stored, dict):
        raise MosaicError(f"study {study.study_name!r} has no stored spec (not run by mosaic sweep); give --spec FILE")
    return parse_spec(stored, f"the spec stored in study {study.study_name!r}", default_name=study.study_name)


def best(
    study_name: str,
    storage_value: str | None,
    as_json: bool,
    config_out: str | None,
    plot_out: str | None,
    runs_dir: str | None,
    spec_file: str | None = None,
) -> int:
    for out, suffix, flag in ((config_out, ".json", "--config"), (plot_out, ".png", "--plot")):
        if out and (Path(out).suffix.lower() != suffix or not Path(out).absolute().parent.is_dir()):
            raise UsageError(f"{out}: must be a {suffix} file in an existing directory")
        if out:
            check_output(out, flag)  # before the study is opened (the write checks again)
    study, shown = load(study_name, storage_value)
    trial = _best(study)
    if trial is None:
        raise MosaicError(f"study {study_name!r} in {shown} has no completed trial yet")
    record = _record(trial)
    spec = study_spec(study, spec_file)
    config = worker_config(trial, spec)
    if as_json:
        print(dumps({**record, "config": redact(config)}, indent=2, default=str))
    else:
        print(f"best trial {trial.number} of {study_name}: {trial.value:.6g}")
        print(f"params: {_params(trial)}")
        if record["seed_values"]:
            print("per seed: " + ", ".join(f"{v:.4g}" for v in record["seed_values"]))
        print(f"runs: {' '.join(record['runs'])}")
        print(f"train it: {config_run_hint(spec, config_out)}")
    if config_out:
        write_atomic(config_out, (json.dumps(config, indent=2) + "\n").encode(), flag="--config")
        print(f"wrote {config_out}", file=sys.stderr)
    if plot_out:
        _plot(record["runs"], plot_out, runs_dir)
    return 0


def config_run_hint(spec: Any, config_out: str | None) -> str:
    return f"mosaic run --worker {spec.worker} --config {config_out or 'best.json'}"


def _plot(runs: list[str], output: str, runs_dir: str | None) -> None:
    """The best trial's seeds as one mean ± std band, drawn by ``mosaic plot``."""
    from mosaic_core.toolkit import run_command

    argv = [*runs, "--group", "seed", "-o", output, *(["--runs-dir", runs_dir] if runs_dir else [])]
    run_command("plot", argv, needed_by="sweep best --plot")


def dashboard(study_name: str, storage_value: str | None, port: int) -> int:
    if not 0 <= port <= 65535:
        raise UsageError(f"--port must be between 0 and 65535, got {port}")
    study, shown = load(study_name, storage_value)
    try:
        import optuna_dashboard
    except ImportError:
        raise MosaicError(
            "optuna-dashboard is not installed (it comes with the sweep extra: pip install -e '.[sweep]'); "
            f"study {study_name!r} is in {shown}"
        ) from None
    from mosaic_core.webtoken import serve_wsgi

    # optuna-dashboard can edit studies: its WSGI application is served behind our token, in
    # this process, instead of its own open server (see mosaic_core.webtoken.TokenWSGI).
    def announce(url: str, token: Any) -> None:
        print(
            f"mosaic sweep: optuna-dashboard at {url} for {shown} (the token is also in {token.file} "
            "while it runs; Ctrl-C stops it)",
            file=sys.stderr,
            flush=True,
        )

    return serve_wsgi(
        optuna_dashboard.wsgi(study._storage), port, "sweep-dashboard", "mosaic sweep dashboard", announce
    )
