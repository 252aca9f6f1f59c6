"""The host's own hook implementations, registered in every :class:`~mosaic_core.plugins.PluginHost`
(never blocked by ``MOSAIC_LOAD_PLUGINS``): the vocabulary the host itself consumes."""

from __future__ import annotations

from mosaic_core.hookspecs import hookimpl
from mosaic_core.types import ChildEvent, ExtrasKey

NAME = "host"


@hookimpl
def mosaic_extras_keys() -> list[ExtrasKey]:
    return [
        ExtrasKey("schema_id", "RegisterWorker schema id (default <worker>.<algo>)"),
        ExtrasKey("schema_version", "RegisterWorker schema version (default 1)"),
        ExtrasKey("supports_pause", "RegisterWorker: the run can pause"),
        ExtrasKey("supports_checkpoint", "RegisterWorker: the run writes checkpoints"),
        ExtrasKey("grpc", "reserved for the trainer protocol"),
        ExtrasKey("grpc_", "reserved for the trainer protocol", prefix=True),
        ExtrasKey("grpc_target", "reserved for the trainer protocol (use --grpc-target)"),
        ExtrasKey("mosaic_", "reserved for the host", prefix=True),
        ExtrasKey("agent_id", "the run's agent id (MOSAIC's metadata.ui.agent_id): recorded, never a script flag"),
    ]


@hookimpl
def mosaic_child_events() -> list[ChildEvent]:
    return [
        ChildEvent("note", "a free-form remark from the training process (e.g. an interactive episode)"),
        ChildEvent(
            "checkpoint_saved",
            "the training process wrote a checkpoint (payload: path, global_step, ...); any worker may emit it",
        ),
    ]
