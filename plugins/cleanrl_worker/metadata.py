"""The CleanRL worker's identity and capabilities (the ``mosaic.workers`` entry point).

Kept import-light: discovery imports this module and nothing else of the worker."""

from __future__ import annotations

from mosaic_core.capabilities import WorkerCapabilities, WorkerMetadata

CAPABILITIES = WorkerCapabilities(
    worker_type="cleanrl",
    supported_paradigms=("sequential",),
    env_families=("gymnasium", "atari", "procgen", "mujoco", "dm_control", "minigrid", "babyai"),
    action_spaces=("discrete", "continuous"),
    observation_spaces=("vector", "image"),
    max_agents=1,
    supports_checkpointing=True,
    requires_gpu=False,
    estimated_memory_mb=512,
)


def get_worker_metadata() -> WorkerMetadata:
    from cleanrl_worker import __version__

    return WorkerMetadata(
        name="cleanrl",
        version=__version__,
        description="Runs CleanRL single-file algorithms (bundled or from a checkout) in a supervised subprocess",
        capabilities=CAPABILITIES,
        worker="cleanrl_worker.worker:CleanRLWorker",
        upstream_library="cleanrl",
        upstream_version="master (single-file scripts)",
    )
