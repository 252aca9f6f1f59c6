"""The Ray launcher's plugin module: it provides the launcher (``mosaic_launchers``:
:class:`mosaic_ray.launcher.RayLauncher`) and ``manifest.json`` gets a ``ray``
section naming the node.

On the node, the launcher's actor starts ``mosaic run`` with ``MOSAIC_RAY_NODE`` (JSON: node
id, address, host name); the caller keeps the same in ``run.state["ray"]``."""

from __future__ import annotations

import json
import os

from mosaic_core import hookimpl

NODE_ENV = "MOSAIC_RAY_NODE"


def node_info(run) -> dict | None:
    if isinstance(run.state.get("ray"), dict):
        return run.state["ray"]
    try:
        info = json.loads(os.environ.get(NODE_ENV) or "null")
    except json.JSONDecodeError:
        return None
    return info if isinstance(info, dict) else None


@hookimpl
def mosaic_launchers():
    from mosaic_ray.launcher import RayLauncher

    return [RayLauncher()]


@hookimpl
def mosaic_build_manifest(run, status):
    info = node_info(run)
    return {"ray": info} if info else None
