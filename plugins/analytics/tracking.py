"""Weights & Biases: script flags, the child's environment, the run's name, the manifest section.

- ``extras.track_wandb: true`` -> a :class:`mosaic_core.types.TrackingSettings` (project,
  entity, run name, mode, notes) published for the run's worker, which turns it into its own
  flags or calls (the CleanRL worker: ``--track``, ``--wandb-project-name``,
  ``--wandb-entity``); a worker that cannot track refuses the run in one line.
- The API key (``extras.wandb_api_key``, else the host's ``WANDB_API_KEY``) reaches the
  child only through its environment; it never goes into argv or any file.
- As MOSAIC's runtime did, a tracked run's child gets ``TRACK_WANDB=1`` and
  ``extras.wandb_email`` reaches it as ``WANDB_EMAIL`` (never a flag).
- ``WANDB_DIR`` (and wandb's cache and data dirs, unless the user set them) point inside the
  run directory, so nothing lands elsewhere.
- Mode: a ``WANDB_MODE`` of ``offline``/``disabled`` in the host's environment is never
  overridden; otherwise ``extras.wandb_mode`` is used, and a tracked run with no credential
  at all runs offline instead of failing at login.
- Proxies, as MOSAIC's operator guide has them: with ``extras.wandb_use_vpn_proxy: true`` (or an
  explicit ``wandb_http_proxy`` / ``wandb_https_proxy``) each proxy is the extras key, else the
  host's ``WANDB_VPN_HTTP(S)_PROXY``, ``WANDB_HTTP(S)_PROXY``, ``HTTP(S)_PROXY``/``http(s)_proxy``,
  first non-empty wins; it reaches the child as ``WANDB_HTTP(S)_PROXY``, ``HTTP(S)_PROXY`` and
  ``http(s)_proxy``, with ``localhost`` and ``127.0.0.1`` added to ``NO_PROXY``/``no_proxy``.
- A resume (``mosaic resume``, the run contract) goes on in the same W&B run: ``WANDB_RUN_ID``
  is the id of the newest W&B run in the run directory and ``WANDB_RESUME=allow``. Offline, each
  attempt writes a folder of its own under that one id; the resumed attempt logs only the steps
  after its checkpoint (its TensorBoard writer starts past it, and W&B syncs TensorBoard).
- ``extras.wandb_run_name``: CleanRL calls ``wandb.init(name=run_name)``, and an explicit
  ``name=`` beats ``WANDB_NAME`` in wandb's settings. So besides ``WANDB_NAME`` the training
  process wraps ``wandb.init`` (when the script imports wandb) to put the requested name in;
  the wrapper also reports the run's id, project and directory to the host.
"""

from __future__ import annotations

import contextlib
import netrc
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from mosaic_analytics.extras import PROXY_KEYS, tracking_enabled
from mosaic_core import TrackingSettings
from mosaic_core.contract import at_stop_exit

INFO_KIND = "analytics.wandb"
FORCED_MODES = ("offline", "disabled", "dryrun")
WANDB_HOST = "api.wandb.ai"


def project_name(extras: dict[str, Any]) -> Any:
    """``wandb_project_name`` (CleanRL's flag), or ``wandb_project``: MOSAIC's documentation
    spells it both ways, so both are accepted (the first wins when both are given)."""
    return extras.get("wandb_project_name") or extras.get("wandb_project")


def settings(extras: dict[str, Any]) -> TrackingSettings | None:
    """The run's tracking settings, published for the worker (it turns them into its own
    flags or calls), or None when the run is not tracked."""
    if not tracking_enabled(extras):
        return None
    text = {
        key: extras.get(key) if isinstance(extras.get(key), str) and extras.get(key) else None
        for key in ("wandb_entity", "wandb_run_name", "wandb_mode", "notes")
    }
    project = project_name(extras)
    return TrackingSettings(
        project=project if isinstance(project, str) else None,
        entity=text["wandb_entity"],
        run_name=text["wandb_run_name"],
        mode=text["wandb_mode"],
        notes=text["notes"],
        requested_by="extras.track_wandb",
    )


def _has_netrc_login(environ: dict[str, str]) -> bool:
    path = environ.get("NETRC") or os.path.join(os.path.expanduser("~"), ".netrc")
    try:
        return netrc.netrc(path).authenticators(WANDB_HOST) is not None
    except (OSError, netrc.NetrcParseError):
        return False


def api_key(extras: dict[str, Any], environ: Mapping[str, str] | None = None) -> str | None:
    key = extras.get("wandb_api_key")
    found = (os.environ if environ is None else environ).get("WANDB_API_KEY")
    return key if isinstance(key, str) and key else (found or None)


def resolve_mode(extras: dict[str, Any], environ: dict[str, str]) -> tuple[str | None, str]:
    """The WANDB_MODE to set for the child (None: leave it alone) and why."""
    host_mode = environ.get("WANDB_MODE", "").strip().lower()
    if host_mode in FORCED_MODES:
        return None, f"WANDB_MODE={host_mode} in the environment"
    wanted = extras.get("wandb_mode")
    if wanted:
        return wanted, "extras.wandb_mode"
    if host_mode:
        return None, f"WANDB_MODE={host_mode} in the environment"
    if (
        tracking_enabled(extras)
        and not api_key(extras, environ)
        and not environ.get("WANDB_BASE_URL")
        and not _has_netrc_login(environ)
    ):
        return "offline", "no W&B credential (extras.wandb_api_key, WANDB_API_KEY or ~/.netrc)"
    return None, "wandb default"


def child_env(
    run_dir: Path, extras: dict[str, Any], environ: dict[str, str] | None = None, resumed: bool = False
) -> dict[str, str]:
    """Environment variables for the training process (``resumed``: a resume of the run in ``run_dir``)."""
    environ = dict(os.environ if environ is None else environ)
    wandb_root = run_dir / "wandb"
    env = {"WANDB_DIR": str(run_dir)}
    for name, path in (
        ("WANDB_CACHE_DIR", wandb_root / "cache"),
        ("WANDB_DATA_DIR", wandb_root / "data"),
        ("WANDB_ARTIFACT_DIR", wandb_root / "artifacts"),
    ):
        if not environ.get(name):
            env[name] = str(path)
    key = extras.get("wandb_api_key")
    if isinstance(key, str) and key:
        env["WANDB_API_KEY"] = key
    mode, _why = resolve_mode(extras, environ)
    if mode:
        env["WANDB_MODE"] = mode
    run_name = extras.get("wandb_run_name")
    if isinstance(run_name, str) and run_name:
        env["WANDB_NAME"] = run_name
    email = extras.get("wandb_email")
    if isinstance(email, str) and email:
        env["WANDB_EMAIL"] = email
    if tracking_enabled(extras):
        env["TRACK_WANDB"] = "1"  # MOSAIC's runtime exported it beside the script's --track
    notes = extras.get("notes")
    if isinstance(notes, str) and notes and tracking_enabled(extras) and not environ.get("WANDB_NOTES"):
        env["WANDB_NOTES"] = notes
    env.update(proxy_env(extras, environ))
    if resumed:
        env.update(same_run_env(run_dir, extras, environ))
    return env


def same_run_env(run_dir: Path, extras: dict[str, Any], environ: dict[str, str]) -> dict[str, str]:
    """A resumed tracked run's W&B run: the id of the newest W&B run its directory holds, resumed
    (``allow``: offline there is no server to ask). A user's own ``WANDB_RUN_ID`` is kept."""
    if not tracking_enabled(extras) or environ.get("WANDB_RUN_ID"):
        return {}
    found = _run_dirs(run_dir)  # offline-run-<time>-<id> and run-<time>-<id>: the newest by its time
    if not found:
        return {}
    newest = max(found, key=lambda path: path.name.rsplit("-", 2)[-2])
    return {"WANDB_RUN_ID": newest.name.rsplit("-", 1)[-1], "WANDB_RESUME": "allow"}


def _first(*values: Any) -> str | None:
    return next((v for v in values if isinstance(v, str) and v.strip()), None)


def proxy_env(extras: dict[str, Any], environ: dict[str, str]) -> dict[str, str]:
    """The proxy variables W&B's traffic goes through (empty unless a proxy key asks for it)."""
    if not (extras.get("wandb_use_vpn_proxy") is True or _first(*(extras.get(k) for k in PROXY_KEYS))):
        return {}
    env: dict[str, str] = {}
    for scheme in ("http", "https"):
        upper = scheme.upper()
        proxy = _first(
            extras.get(f"wandb_{scheme}_proxy"),
            environ.get(f"WANDB_VPN_{upper}_PROXY"),
            environ.get(f"WANDB_{upper}_PROXY"),
            environ.get(f"{upper}_PROXY"),
            environ.get(f"{scheme}_proxy"),
        )
        if proxy:
            env.update({f"WANDB_{upper}_PROXY": proxy, f"{upper}_PROXY": proxy, f"{scheme}_proxy": proxy})
    if env:  # the host's own side channel and local services stay direct
        for name in ("NO_PROXY", "no_proxy"):
            entries = [e.strip() for e in environ.get(name, "").split(",") if e.strip()]
            env[name] = ",".join(entries + [h for h in ("localhost", "127.0.0.1") if h not in entries])
    return env


# ------------------------------------------------------------------ training process
def install_init_wrapper(child: Any) -> None:
    """Wrap ``wandb.init`` in this process when the script imports wandb (nothing imported now)."""
    from mosaic_core import after_import

    after_import("wandb", lambda module: _wrap_init(module, child))


def _wrap_init(module: Any, child: Any) -> None:
    original = getattr(module, "init", None)
    if original is None or getattr(original, "__mosaic_wrapped__", False):
        return
    name = child.extras.get("wandb_run_name")

    def init(*args: Any, **kwargs: Any) -> Any:
        if isinstance(name, str) and name:
            kwargs["name"] = name
        run = original(*args, **kwargs)
        try:
            child.publish(INFO_KIND, describe_run(run, child.run_dir), True)
        except Exception:  # reporting is best effort; the run goes on
            pass
        at_stop_exit(lambda: _finish_preempted(module))
        return run

    init.__mosaic_wrapped__ = True  # type: ignore[attr-defined]
    init.__wrapped__ = original  # type: ignore[attr-defined]
    init.__doc__ = original.__doc__
    module.init = init


def _finish_preempted(module: Any) -> None:
    """A stopped run (the run contract's stop) ends its W&B run as preempted, its data written:
    the process ends by its signal next, and W&B's own exit handler would not run."""
    run = getattr(module, "run", None)
    if run is None:
        return
    with contextlib.suppress(Exception):
        run.mark_preempting()
    module.finish(exit_code=0)


def describe_run(run: Any, run_dir: Path) -> dict[str, Any]:
    """What the host needs to know about a wandb run (no secret: ids, names, relative dir)."""
    info: dict[str, Any] = {}
    for field in ("id", "name", "project", "entity"):
        try:
            value = getattr(run, field, None)
        except Exception:
            value = None
        if isinstance(value, str) and value:
            info[field] = value
    try:
        settings = run.settings
        info["offline"] = bool(getattr(settings, "_offline", False))
        sync_dir = Path(str(settings.sync_dir))
        info["dir"] = os.path.relpath(sync_dir.resolve(), Path(run_dir).resolve())
    except Exception:
        pass
    return info


# ------------------------------------------------------------------ manifest
def _run_dirs(run_dir: Path) -> list[Path]:
    root = run_dir / "wandb"
    try:
        entries = sorted(
            p
            for p in root.iterdir()
            if p.is_dir() and not p.is_symlink() and p.name.startswith(("offline-run-", "run-"))
        )
    except OSError:
        return []
    return entries


def manifest_section(
    run_dir: Path, extras: dict[str, Any], reported: dict[str, Any], environ: dict[str, str] | None = None
) -> dict[str, Any] | None:
    """The ``wandb`` section, or None when the run neither tracked, nor left a wandb dir, nor named
    a W&B run (``extras.wandb_run_path``: then it is the section's ``run_path``)."""
    environ = dict(os.environ if environ is None else environ)
    found = _run_dirs(run_dir)
    enabled = tracking_enabled(extras)
    given = extras.get("wandb_run_path")  # a W&B run named by the config (MOSAIC's extras key)
    given = given if isinstance(given, str) and given.strip() else None
    if not enabled and not found and not reported and not given:
        return None
    run_id = reported.get("id")
    directory = reported.get("dir")
    if directory and (directory.startswith("..") or os.path.isabs(directory)):
        directory = None
    if directory is None and found:
        match = [p for p in found if run_id and p.name.endswith(f"-{run_id}")] or found
        directory = os.path.relpath(match[-1], run_dir)
        run_id = run_id or match[-1].name.rsplit("-", 1)[-1]
    project = reported.get("project") or project_name(extras)
    entity = reported.get("entity") or extras.get("wandb_entity")
    mode, why = resolve_mode(extras, environ)
    offline = reported.get("offline")
    if offline is None:
        offline = bool(directory and Path(directory).name.startswith("offline-run-")) or mode == "offline"
    section = {
        "enabled": enabled,
        "mode": "offline" if offline else (mode or environ.get("WANDB_MODE") or "online"),
        "mode_reason": why,
        "project": project,
        "entity": entity,
        "run_id": run_id,
        "run_name": reported.get("name") or extras.get("wandb_run_name"),
        "run_path": given or ("/".join(p for p in (entity, project, run_id) if p) if run_id and project else None),
        "dir": directory,
    }
    if offline and directory:
        section["sync_command"] = f"wandb sync {directory}"
    return section
