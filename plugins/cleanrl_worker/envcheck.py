"""A dry run's environment checks: the env id exists (ids registered by installed packages
included, with a close-match suggestion, or the extra that provides its family), and the
algorithm can act and see in its spaces, read without stepping the env.

Bundled algorithms declare their spaces (:data:`cleanrl_worker.catalog.ALGORITHM_SPACES`). An
upstream script with one of those names is held to the action space only (its observation
handling is its own); any other script is not checked, and the dry run says so. gymnasium is
imported here (resolving an env needs it); torch, TensorBoard and W&B are not.
"""

from __future__ import annotations

import contextlib
import difflib
import importlib
import importlib.util
import io
import warnings
from typing import Any

from cleanrl_worker.catalog import ALGORITHM_SPACES, STATIC_SPACES, classify, fit_problem
from cleanrl_worker.env_families import family_of, missing_family_message, prepare_family
from mosaic_core import ConfigError

# Bundled algorithms on EnvPool's Atari: its task ids (`Breakout-v5`) are gymnasium's `ALE/Breakout-v5`.
ENVPOOL_ATARI = ("ppo_atari_envpool",)


def _spec(env_id: str) -> Any:
    """gymnasium's spec of ``env_id`` (``module:Env-v0`` imports the module first)."""
    import gymnasium as gym

    module, _, name = env_id.rpartition(":")
    if module:
        try:
            importlib.import_module(module)
        except ImportError as exc:
            raise ConfigError(f"env_id {env_id!r}: cannot import {module}: {exc}", field="env_id") from None
    family = family_of(name)
    if family is not None and family.key == "minigrid":
        with contextlib.suppress(ImportError):
            import minigrid  # noqa: F401  (registers MiniGrid and BabyAI)
    prepare_family(name)
    try:
        return gym.spec(name)
    except gym.error.Error:
        close = difflib.get_close_matches(name, list(gym.registry), n=1, cutoff=0.6)
        hint = f"; did you mean {close[0]}?" if close else "; `mosaic envs` lists the known ids"
        raise ConfigError(f"env_id {env_id!r} is not a registered environment{hint}", field="env_id") from None


def _kinds(spec: Any) -> tuple[str, str, str | None]:
    """(observation kind, action kind, family key) of a registered env, made but never stepped
    (a family whose spaces are known is not made: ALE is slow to make, MuJoCo may start GL)."""
    import gymnasium as gym

    family = family_of(spec.id)
    if family is not None and family.key == "atari":
        return ("vector" if spec.kwargs.get("obs_type") == "ram" else "image"), "discrete", "atari"
    if family is not None and family.key in STATIC_SPACES:
        return (*STATIC_SPACES[family.key], family.key)
    try:
        with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()):
            warnings.simplefilter("ignore")
            env = gym.make(spec.id, disable_env_checker=True)
    except Exception as exc:
        raise ConfigError(
            f"env_id {spec.id!r} cannot be made: {' '.join(str(exc).split())[:200]}", field="env_id"
        ) from None
    try:
        observation, _shape, action, _size = classify(env.observation_space, env.action_space)
    finally:
        env.close()
    return observation, action, family.key if family else None


def check_env(env_id: str, algo: str | None, source: str) -> list[str]:
    """Raise a ConfigError naming what a run of ``algo`` (from ``source``) on ``env_id`` would
    fail on; return notes for what could not be checked. ``algo=None``: the id only. A script
    that is not bundled may register its own env ids when it runs: an unknown id is a note then."""
    if algo in ENVPOOL_ATARI and source == "bundled" and importlib.util.find_spec("envpool") is None:
        from cleanrl_worker.readiness import install_command

        raise ConfigError(
            f"{algo} runs on EnvPool, which is not installed: {install_command(['envpool'])}", field="algo"
        )
    missing = missing_family_message(env_id)
    if missing:
        raise ConfigError(missing, field="env_id")
    try:
        spec = _spec(f"ALE/{env_id}" if algo in ENVPOOL_ATARI and "/" not in env_id else env_id)
    except ConfigError as exc:
        if source in ("bundled", "mode"):
            raise
        return [f"{exc} (not refused: the {source} script may register it itself)"]
    if algo is None:
        return []
    if algo not in ALGORITHM_SPACES:
        return [f"spaces not checked: {algo} ({source}) declares none; the env {env_id} exists"]
    observation, action, family = _kinds(spec)
    if algo in ENVPOOL_ATARI and family == "atari":  # checked as gymnasium's ALE id, run as EnvPool's task
        family = "envpool"
    if source == "bundled":
        problem = fit_problem(algo, action=action, observation=observation, family=family)
    else:  # an upstream script of a bundled name: its action space is known, its network is its own
        wanted = ALGORITHM_SPACES[algo].actions
        problem = None if action in wanted else f"{algo} needs a {' or '.join(wanted)} action space, not {action}"
    if problem:
        raise ConfigError(f"{problem} (env {env_id}); `mosaic envs` lists what fits", field="env_id")
    return []


# ------------------------------------------------------------------ the real run's fast path
# A real run gives the same answers as a dry run without importing gymnasium on the host's start-up
# path: each (env id, algorithm, source) is checked once, the answer kept in the user's cache keyed
# by the installed versions of the packages that register envs; later runs read it back (~1 ms).
CHECKS_VERSION = 2  # raised whenever the checks' answers change, so no cached answer outlives them
MAX_CACHE_BYTES = 16 * 1024 * 1024  # a cache file larger than this is not read
CACHE_PACKAGES = ("gymnasium", "ale-py", "minigrid", "mujoco", "shimmy", "dm-control", "procgen-mirror", "envpool")


def _fingerprint() -> str:
    from importlib import metadata

    found = [f"checks={CHECKS_VERSION}"]
    for name in CACHE_PACKAGES:
        try:
            found.append(f"{name}={metadata.version(name)}")
        except metadata.PackageNotFoundError:
            found.append(f"{name}=-")
    return ";".join(found)


def _cache_file(create: bool = False) -> Any:
    """The cache file, in MOSAIC's cache folder once it is checked as ours alone; None: no cache."""
    from mosaic_core.files import cache_dir

    folder = cache_dir(create=create)
    return folder / "envcheck.json" if folder is not None else None


def _read_cache(path: Any) -> dict[str, Any]:
    import json
    import os

    if path is None:
        return {}
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return {}
    with os.fdopen(fd, encoding="utf-8") as handle:
        info = os.fstat(handle.fileno())
        if info.st_uid != os.geteuid() or info.st_mode & 0o022 or not (info.st_mode & 0o170000 == 0o100000):
            return {}  # not a plain private file of ours: never trusted
        try:
            data = json.loads(handle.read(MAX_CACHE_BYTES + 1))
        except (ValueError, RecursionError):
            return {}
    return data if isinstance(data, dict) else {}


def check_env_cached(env_id: str, algo: str | None, source: str) -> list[str]:
    """:func:`check_env`'s answer, from the cache when this combination was checked with the
    packages installed now; checked (and remembered) otherwise. Same ConfigError, same notes."""
    from mosaic_core.files import write_json_atomic

    if ":" in env_id:  # ``module:Env-v0`` registers through code that may change: always checked
        return check_env(env_id, algo, source)
    path, fingerprint = _cache_file(), _fingerprint()
    data = _read_cache(path)
    results = data.get("results") if data.get("fingerprint") == fingerprint else None
    results = results if isinstance(results, dict) else {}
    key = f"{env_id}\n{algo}\n{source}"
    known = results.get(key)
    if isinstance(known, dict):
        if known.get("error"):
            raise ConfigError(str(known["error"]))  # the message as first raised, field included
        return [str(note) for note in known.get("notes") or []]
    error: ConfigError | None = None
    try:
        notes = check_env(env_id, algo, source)
        results[key] = {"notes": notes}
    except ConfigError as exc:
        error, results[key] = exc, {"error": str(exc)}
    try:
        path = _cache_file(create=True)
        if path is not None:
            write_json_atomic(path, {"fingerprint": fingerprint, "results": results}, mode=0o600)
    except OSError:
        pass  # a cache we cannot write costs only speed
    if error is not None:
        raise error
    return notes
