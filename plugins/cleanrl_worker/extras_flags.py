"""Extras that become a script's flags, checked against its ``Args`` key by key.

MOSAIC's own names for script flags (the keys are the worker's, declared in its ``extras_keys``):

- ``use_cuda``: the script's ``cuda``, ``--cuda`` / ``--no-cuda`` (MOSAIC's form, ``--cuda=false``,
  is one tyro rejects); given with a ``cuda`` that disagrees, refused.
- ``total_frames``: ``--total-frames`` for a script whose ``Args`` has such a field. MOSAIC
  forwarded it whatever the script, and upstream's scripts have none, so their runs failed: for
  such a script it is refused in one line that says to give ``total_timesteps``.

:func:`check_extras_flags` validates each extras key's flags on their own, so a problem names the
key (``extras.algo_params.lerning_rate``, or a flat config's top-level key by its own name) and
the config file, not only the flag.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from mosaic_core import ConfigError, WorkerConfig


def mosaic_flags(script: Path, config: WorkerConfig) -> dict[str, Any]:
    """The script flags (as extras) MOSAIC's names ask for: ``cuda`` from ``use_cuda``,
    ``total_frames`` from ``extras.total_frames`` (one in ``algo_params`` is passed as it is)."""
    return {**_cuda(config), **_frames(script, config)}


def _params(config: WorkerConfig) -> dict[str, Any]:
    params = config.extras.get("algo_params")
    return params if isinstance(params, dict) else {}


def _cuda(config: WorkerConfig) -> dict[str, Any]:
    use_cuda = config.extras.get("use_cuda")
    if use_cuda is None:
        return {}
    if not isinstance(use_cuda, bool):
        raise ConfigError(
            f"extras.use_cuda must be true or false, got {use_cuda!r}", field="extras.use_cuda", source=config.source
        )
    cuda = _params(config).get("cuda", config.extras.get("cuda"))
    if cuda is not None and cuda != use_cuda:
        raise ConfigError(
            f"extras.use_cuda ({str(use_cuda).lower()}) and cuda ({str(cuda).lower()}) disagree; give one",
            field="extras.use_cuda",
            source=config.source,
        )
    return {"cuda": use_cuda} if cuda is None else {}


def _frames(script: Path, config: WorkerConfig) -> dict[str, Any]:
    params = _params(config)
    where, given = next(
        ((w, g) for w, g in (("extras.algo_params", params), ("extras", config.extras)) if "total_frames" in g),
        (None, {}),
    )
    if where is None:
        return {}
    if "total_frames" not in script_fields(script):
        raise ConfigError(
            f"{where}.total_frames: {script.name}'s Args has no total_frames (MOSAIC forwarded "
            f"--total-frames={given['total_frames']}, which such a script rejects, and the run failed); "
            "give total_timesteps instead",
            field=f"{where}.total_frames",
            source=config.source,
        )
    return {"total_frames": given["total_frames"]} if where == "extras" else {}


def script_fields(script: Path) -> dict[str, Any]:
    """The fields of ``script``'s ``Args`` (none when it has no such class)."""
    from cleanrl_worker.script_args import NoArgsClassError, read_script_args

    try:
        return dict(read_script_args(script).fields)
    except NoArgsClassError:
        return {}


def check_extras_flags(script: Path, script_extras: dict[str, Any], config: WorkerConfig) -> None:
    """Each key's flags of ``script_extras`` (what becomes script flags) against the script's
    ``Args``; a ConfigError naming the first bad key and the file (and how many more there are)."""
    from cleanrl_worker.flags import extras_to_flags
    from cleanrl_worker.script_args import validate_argv

    fields = script_fields(script)
    if not fields:
        return  # nothing to check against: check_script_argv says so in a note
    params = table if isinstance(table := script_extras.get("algo_params"), dict) else {}
    given = [(f"extras.algo_params.{key}", {"algo_params": {key: value}}) for key, value in params.items()]
    given += [(f"extras.{k}", {k: v}) for k, v in script_extras.items() if k != "algo_params" and k not in params]
    problems = [
        (where, f"{_as_written(config, where)}: {problem} in {script.name}'s Args")
        for where, one in given
        for problem in validate_argv(extras_to_flags(one, source=config.source), fields)
    ]
    if problems:
        more = f" (and {len(problems) - 1} more: {'; '.join(p for _, p in problems[1:])})" if len(problems) > 1 else ""
        raise ConfigError(problems[0][1] + more, field=problems[0][0], source=config.source)


def _as_written(config: WorkerConfig, where: str) -> str:
    """``where`` as the user wrote it: a flat config's top-level key is named by itself."""
    key = where.rsplit(".", 1)[-1]
    top_level = where.startswith("extras.algo_params.") and key in config.raw
    return f"{key} (a top-level key, read as {where})" if top_level else where
