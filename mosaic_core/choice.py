"""The worker of a run that names none (``mosaic run`` without ``--worker``, a daemon submission
without ``worker``), chosen from what the run asks for:

1. ``$MOSAIC_DEFAULT_WORKER`` when set;
2. else, among the installed workers whose runs can execute here (their own environment built,
   or none needed; example workers left out): those that have the run's algorithm as spelt (or
   take it as a script path), else those that have it in another case
   (:mod:`mosaic_core.algonames`), else those that declare no names; a tie goes to the ones that
   declare the env id's family (``mpe/simple_spread_v3``: ``mpe``) when some do;
3. one left: that one. None or several: a UsageError naming the candidates and what each offers.

Only what workers declare in-process is asked (``algorithm_names``, ``code_paths``, their
capabilities): no worker environment is started to choose.
"""

from __future__ import annotations

import argparse
import difflib
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mosaic_core.algonames import spelling
from mosaic_core.entrypoints import LoadedEntryPoint
from mosaic_core.errors import MosaicError, UsageError
from mosaic_core.workers import DEFAULT_WORKER_VAR, discover_workers

EXACT, OTHER_CASE, UNDECLARED = 0, 1, 2  # how well a worker's names fit the run's algo (lower is better)
SHOWN_NAMES = 6  # a worker's names shown in a message before "…"


@dataclass
class Candidate:
    item: LoadedEntryPoint
    names: list[str] | None  # None: the worker declares none
    takes_path: bool  # the run's algo is a script path this worker runs
    blocked: str | None  # why its runs cannot execute here (None: they can)

    @property
    def name(self) -> str:
        return self.item.name

    def fit(self, algo: str | None) -> int | None:
        if algo is None:
            return EXACT
        if self.takes_path:
            return EXACT
        if self.names is None:
            return UNDECLARED
        found = spelling(algo, self.names)
        return None if found is None else EXACT if found == algo else OTHER_CASE

    def offers(self, algo: str | None) -> str:
        """What this worker offers the run, for a message: its spelling of ``algo``, or its names."""
        found = spelling(algo, self.names) if algo and self.names else None
        declared = self.item.obj.capabilities.env_families
        families = ", ".join(declared[:4]) + (", …" if len(declared) > 4 else "")
        if found:
            return f"{self.name} (its {found}; envs: {families})"
        if self.names is None:
            return f"{self.name} (algorithms: not declared; envs: {families})"
        names = ", ".join(self.names[:SHOWN_NAMES]) + (
            f", … {len(self.names)} in all" if len(self.names) > SHOWN_NAMES else ""
        )
        return f"{self.name} ({names}; envs: {families})"


def _candidate(item: LoadedEntryPoint, data: dict[str, Any]) -> Candidate:
    from mosaic_core.environments import status
    from mosaic_core.types import CodePath
    from mosaic_core.worker import declare, declared_names, load_worker

    try:
        found = status(item.obj, item.distribution)
        blocked = None if found.ready else (found.detail or found.describe())
    except Exception as exc:  # a broken environment root: not a candidate, and said why
        blocked = str(exc)
    if item.obj.example:
        blocked = f"an example worker, chosen only by name: give --worker {item.name}"
    try:
        worker = load_worker(item)
        names = declared_names(item, worker, data)
        paths = declare(item, "code_paths(data)", lambda: worker.code_paths(data), CodePath)
    except UsageError as exc:  # a broken worker is never chosen; the message says why
        return Candidate(item, [], False, str(exc))
    return Candidate(item, names, any(path.field == "algo" for path in paths), blocked)


def _family(env_id: Any) -> str | None:
    if isinstance(env_id, str) and "/" in env_id:
        return env_id.split("/", 1)[0].casefold()
    return None


def choose_worker(items: list[LoadedEntryPoint] | None = None, data: dict[str, Any] | None = None) -> str:
    """The worker a run whose config (a mapping: ``algo``, ``env_id``, ``extras``…) is ``data``
    goes to when it names none (see the module doc); a UsageError otherwise."""
    named = os.environ.get(DEFAULT_WORKER_VAR, "").strip()
    if named:
        return named
    data = dict(data or {})
    named_algo = data.get("algo") or data.get("algorithm")  # `algorithm`: MOSAIC's flat configs' spelling
    algo = named_algo if isinstance(named_algo, str) and named_algo else None
    active = [item for item in (discover_workers() if items is None else items) if item.status == "active"]
    everyone = [_candidate(item, data) for item in active]
    ready = [c for c in everyone if c.blocked is None]
    fits = {c.name: c.fit(algo) for c in ready}
    best = min((fit for fit in fits.values() if fit is not None), default=None)
    chosen = [c for c in ready if best is not None and fits[c.name] == best]
    family = _family(data.get("env_id"))
    if len(chosen) > 1 and family:
        declaring = [c for c in chosen if family in {f.casefold() for f in c.item.obj.capabilities.env_families}]
        chosen = declaring or chosen
    if len(chosen) == 1:
        return chosen[0].name
    raise UsageError(_why_not(algo, data.get("env_id"), chosen, ready, everyone))


def _why_not(
    algo: str | None, env_id: Any, chosen: list[Candidate], ready: list[Candidate], everyone: list[Candidate]
) -> str:
    how = f"give --worker NAME or set ${DEFAULT_WORKER_VAR}"
    installed = ", ".join(c.name for c in everyone) or "none"
    if chosen:
        what = f"algo {algo!r}" if algo else "a run with no --algo"
        on = f" on {env_id}" if isinstance(env_id, str) and env_id else ""
        return (
            f"name the worker: {what}{on} fits {len(chosen)} installed workers: "
            f"{'; '.join(c.offers(algo) for c in chosen)}; {how}"
        )
    if not ready:
        blocked = "; ".join(f"{c.name}: {c.blocked}" for c in everyone) or "none is installed"
        return f"name the worker: no installed worker can run here ({blocked}); {how}"
    elsewhere = [c for c in everyone if c.blocked is not None and algo and c.fit(algo) in (EXACT, OTHER_CASE)]
    hint = "".join(f"; {c.name} has it ({c.blocked})" for c in elsewhere) or _did_you_mean(algo, ready)
    return f"no installed worker that can run here runs algo {algo!r}{hint} (installed: {installed}); {how}"


def _did_you_mean(algo: str | None, ready: list[Candidate]) -> str:
    close: list[str] = []
    if not algo:
        return ""
    for candidate in ready:
        by_fold = {name.casefold(): name for name in candidate.names or ()}
        for match in difflib.get_close_matches(algo.casefold(), list(by_fold), n=1, cutoff=0.6):
            close.append(f"{by_fold[match]} ({candidate.name})")
    return f"; did you mean {' or '.join(close)}?" if close else ""


# ------------------------------------------------------------------ mosaic run without --worker
class _Request(argparse.ArgumentParser):
    """The few flags that say what a run asks for, read from ``mosaic run``'s arguments."""

    def __init__(self) -> None:
        super().__init__(add_help=False, allow_abbrev=False)
        self.add_argument("--algo")
        self.add_argument("--env-id", "--env", dest="env_id")
        self.add_argument("--config")
        self.add_argument("--from", dest="from_run")
        self.add_argument("--runs-dir")
        self.add_argument("--extras")

    def error(self, message: str) -> Any:
        raise UsageError(message)


def worker_for_argv(argv: list[str]) -> tuple[str, dict[str, Any] | None]:
    """The worker of a ``mosaic run`` that names none, from its ``--algo``, ``--env``, ``--extras``
    and config file (whose own ``worker`` wins), and the ``--config`` file's contents: read once
    here, for the run too (a pipe, ``<(…)``, can be read only once). When no worker can be chosen,
    the UsageError also names every problem of the run that needs no worker to be seen (flags,
    the config file, ``--extras``, the runs directory, the plugins' checks)."""
    from mosaic_core.config import parse_extras_json, read_config_file, unwrap_config
    from mosaic_core.runs import default_runs_root, find_run_dir

    problems: list[str] = []
    try:
        ns, _rest = _Request().parse_known_args(argv)
    except UsageError as exc:
        ns, problems = (
            argparse.Namespace(algo=None, env_id=None, config=None, from_run=None, runs_dir=None, extras=None),
            [f"{exc} (see `mosaic run --worker NAME --help`)"],
        )
    read, data, source = None, {}, ns.config
    try:
        if ns.config and not ns.from_run:
            read = read_config_file(ns.config)
            data = dict(read)
        elif ns.from_run and not ns.config:
            source = str(
                find_run_dir(Path(ns.runs_dir).absolute() if ns.runs_dir else default_runs_root(), ns.from_run)
                / "config.json"
            )
            data = unwrap_config(read_config_file(source, run_file=True), source)
    except MosaicError as exc:
        problems.append(str(exc))
    if isinstance(data.get("worker"), str) and data["worker"]:
        return data["worker"], read  # the config says whose it is (a run's config.json)
    extras = data.get("extras")
    if not isinstance(extras, dict):
        extras = {}
    try:
        extras = {**extras, **(parse_extras_json(ns.extras) if ns.extras else {})}
    except MosaicError as exc:
        problems.append(str(exc))
    request = {**data, "extras": extras, **{k: v for k, v in (("algo", ns.algo), ("env_id", ns.env_id)) if v}}
    try:
        return choose_worker(data=request), read
    except UsageError as exc:
        if any(arg in ("-h", "--help") for arg in argv):
            raise
        problems += _other_problems(argv, data, source, problems)
        raise UsageError("; ".join([str(exc), *(f"and: {p}" for p in dict.fromkeys(problems))])) from None


def _other_problems(argv: list[str], data: dict[str, Any], source: str | None, known: list[str]) -> list[str]:
    """What is wrong with the run whatever its worker: the host's flags and launcher options,
    the config's fields, the plugins' checks and the runs directory (the config file and
    ``--extras``, when unreadable, are in ``known`` already)."""
    from mosaic_core import launchers
    from mosaic_core.config import build_config, parse_extras_json
    from mosaic_core.plugins import plugin_host
    from mosaic_core.runs import RunDirectory
    from mosaic_core.stages.flags import RUN_FIELD_FLAGS, check_host_options, host_parser
    from mosaic_core.stages.validate import split_extras

    problems: list[str] = []
    parser = host_parser("mosaic run", "", "")
    installed = launchers.active()
    launchers.add_arguments(parser, installed)
    try:
        ns, _rest = parser.parse_known_args(argv)
    except UsageError as exc:
        return [str(exc)] if not known else []  # the request's reading said it already
    if ns.config and ns.from_run:
        problems.append("give --config or --from, not both")
    try:
        check_host_options(ns)
        problems += launchers.select(ns, installed).problems(ns.num_cpus)
    except MosaicError as exc:
        problems.append(str(exc))
    try:
        extras = parse_extras_json(ns.extras) if ns.extras else None
    except MosaicError:
        extras = None  # in known already
    overrides = {name: getattr(ns, name) for name in RUN_FIELD_FLAGS}
    try:
        # Fields a worker's defaults may fill are filled here with stand-ins: only what is wrong counts.
        config = build_config(
            {k: v for k, v in data.items() if k != "worker"},
            source=source,
            overrides=overrides,
            extras=extras,
            generate_run_id=True,
            defaults=lambda merged: {"algo": "any", "env_id": "any", "total_timesteps": 1},
        )
    except MosaicError as exc:
        return [*problems, str(exc)]
    try:
        host = plugin_host()
        problems += split_extras(list(host.extras_keys()), config.extras)[1] + host.validate_config(config)
    except MosaicError as exc:
        problems.append(str(exc))
    try:
        RunDirectory.for_run(ns.runs_dir, config.run_id).check_usable()
    except MosaicError as exc:
        problems.append(str(exc))
    typo = env_id_typo(ns.env_id or data.get("env_id"))
    return [*problems, typo] if typo else problems


def env_id_typo(env_id: Any) -> str | None:
    """A sentence when ``env_id`` looks like a typo of an env id the host's gymnasium knows
    (its plugin envs loaded): unknown, while a close id is known and no other version of it is.
    None when it is known or nothing is close (it may be a worker's own env, known only in that
    worker's environment), for ``module:Env`` ids, and where the host has no gymnasium."""
    if not isinstance(env_id, str) or not env_id or ":" in env_id:
        return None
    try:
        from gymnasium.envs.registration import parse_env_id, registry
    except Exception:  # the light core: each worker checks its env ids
        return None
    if env_id in registry:
        return None
    known = {other: _name_of(parse_env_id, other) for other in registry}
    wanted = _name_of(parse_env_id, env_id)
    if wanted is None or wanted in known.values():
        return None  # malformed (the worker says so) or another version of a known env
    if wanted[0] is not None and not any(name and name[0] == wanted[0] for name in known.values()):
        return None  # a namespace this gymnasium does not have: another registry's
    close = difflib.get_close_matches(env_id, list(known), n=1, cutoff=0.6)
    return f"env_id {env_id!r} is not a registered environment; did you mean {close[0]}?" if close else None


def _name_of(parse: Any, env_id: str) -> tuple[str | None, str] | None:
    """(namespace, name) of an env id, its version left out; None when it does not parse."""
    try:
        namespace, name, _version = parse(env_id)
    except Exception:
        return None
    return namespace, name
