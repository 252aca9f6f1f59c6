"""Worker-config ``extras`` -> command-line flags for a CleanRL script (parsed by tyro).

A pure function of the extras, no import of tyro or the script. The rules:

- The extras given here are the ones no plugin owns (each plugin declares its keys through
  ``mosaic_extras_keys``; the host hands the worker the rest as ``run.worker_extras``), plus
  ``algo_params`` (an object of flags for the script). Every key becomes a flag, and
  ``algo_params`` wins on a clash. Config fields (``seed``, ``env_id``, ``total_timesteps``,
  …) are an error in either place: set them on the config.
- Keys are identifiers (``^[A-Za-z_][A-Za-z0-9_]*$``); a key becomes ``--`` + the key with
  inner ``_`` turned into ``-`` (tyro's own rule: ``learning_rate`` -> ``--learning-rate``).
- Values, as tyro parses them:
  ``true``/``false`` -> ``--flag`` / ``--no-flag`` (tyro rejects ``--flag=False``; a false
  never vanishes); numbers -> ``--flag=3`` (floats as ``repr``, so they round-trip exactly);
  strings -> ``--flag=value``; ``null`` -> ``--flag=None`` (tyro's spelling of None for an
  Optional field; a non-Optional field rejects it, so a null never silently vanishes either);
  a list -> ``--flag v1 v2 …`` and an empty list -> ``--flag`` alone (tyro reads that as
  ``[]``); an object -> error.
- No value can inject a flag: a scalar is one argv item glued to its flag (``--flag=-x``,
  MOSAIC's own form), which tyro reads as the value. A list item cannot be glued, so a string
  list item starting with ``-`` is an error (negative numbers are fine). NUL characters cannot
  be passed in argv and are an error.
"""

from __future__ import annotations

import re
from typing import Any

from mosaic_core import ConfigError

CONFIG_FIELDS = frozenset({"run_id", "algo", "env_id", "total_timesteps", "seed", "worker_id", "program_id"})
KEY = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def flag_name(key: str) -> str:
    """The flag tyro derives from a field name: inner ``_`` -> ``-``, outer ones kept."""
    core = key.strip("_")
    if not core:
        return "--" + key
    start = key.index(core)
    return "--" + key[:start] + core.replace("_", "-") + key[start + len(core) :]


def _scalar_text(value: Any) -> str | None:
    """How tyro reads a scalar: None for types that cannot be a value."""
    if value is None:
        return "None"
    if isinstance(value, bool):
        return "True" if value else "False"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return repr(value)
    if isinstance(value, str):
        return value
    return None


def _convert(where: str, key: str, value: Any, problems: list[str]) -> list[str]:
    flag = flag_name(key)
    if isinstance(value, bool):
        return [flag if value else "--no-" + flag[2:]]
    if isinstance(value, dict):
        problems.append(
            f"{where}: an object cannot be passed as a command-line flag (only extras.algo_params may be an object)"
        )
        return []
    if isinstance(value, (list, tuple)):
        items = []
        for index, item in enumerate(value):
            text = None if isinstance(item, (list, tuple, dict)) else _scalar_text(item)
            if text is None:
                problems.append(
                    f"{where}[{index}]: a {type(item).__name__} cannot be a list item of a flag "
                    "(use strings, numbers, booleans or null)"
                )
            elif "\x00" in text:
                problems.append(f"{where}[{index}]: contains a NUL character, which a command line cannot carry")
            elif isinstance(item, str) and text.startswith("-"):
                problems.append(
                    f"{where}[{index}]: {item!r} starts with '-' and would be read as a flag; "
                    "list items cannot start with '-'"
                )
            else:
                items.append(text)
        return [flag, *items]
    text = _scalar_text(value)
    if text is None:
        problems.append(f"{where}: a {type(value).__name__} cannot be passed as a flag value")
        return []
    if "\x00" in text:
        problems.append(f"{where}: contains a NUL character, which a command line cannot carry")
        return []
    return [f"{flag}={text}"]  # one argv item: tyro reads it as the value, never as a flag


def _check_key(where: str, key: Any, problems: list[str]) -> bool:
    if not isinstance(key, str) or not KEY.match(key):
        problems.append(f"{where}: {key!r} is not a valid flag name (letters, digits and _, not starting with a digit)")
        return False
    if key in CONFIG_FIELDS:
        problems.append(f"{where}: {key} is a worker-config field; set it on the config (or the CLI), not in extras")
        return False
    return True


def _flags_and_problems(extras: Any) -> tuple[list[str], list[str]]:
    problems: list[str] = []
    if extras is None:
        return [], problems
    if not isinstance(extras, dict):
        return [], [f"extras: must be an object, got {type(extras).__name__}"]
    params = extras.get("algo_params")
    if params is None:
        params = {}
    elif not isinstance(params, dict):
        problems.append(f"extras.algo_params: must be an object of flag names to values, got {type(params).__name__}")
        params = {}
    argv: list[str] = []
    for key, value in extras.items():
        where = f"extras.{key}"
        if key == "algo_params" or (isinstance(key, str) and key in params):
            continue
        if _check_key(where, key, problems):
            argv += _convert(where, key, value, problems)
    for key, value in params.items():
        where = f"extras.algo_params.{key}"
        if _check_key(where, key, problems):
            argv += _convert(where, key, value, problems)
    return argv, problems


def flag_problems(extras: Any) -> list[str]:
    """Every reason ``extras`` cannot become flags, each naming ``extras.<key>`` (for validate_config)."""
    return _flags_and_problems(extras)[1]


def extras_to_flags(extras: dict[str, Any], *, source: str | None = None) -> list[str]:
    """The argv items for ``extras``: top-level keys in order, then ``algo_params``.

    Raises :class:`ConfigError` naming the first bad key (and how many more there are);
    ``source`` is the config file, named in the message when given.
    """
    argv, problems = _flags_and_problems(extras)
    if problems:
        more = f" (and {len(problems) - 1} more problem{'s' if len(problems) > 2 else ''})" if len(problems) > 1 else ""
        error = ConfigError(problems[0] + more, source=source)
        error.field = problems[0].split(":", 1)[0]
        raise error
    return argv
