"""Example hooks: a heartbeat field, a manifest section and a child env variable."""

from mosaic_core.hookspecs import hookimpl


@hookimpl
def mosaic_on_heartbeat(run):
    return {"example_plugin": {"run_id": run.run_id}}


@hookimpl
def mosaic_build_manifest(run, status):
    return {"example": {"status_seen": status}}


@hookimpl
def mosaic_child_env(run):
    return {"MOSAIC_EXAMPLE_PLUGIN": "1"}
