"""The CleanRL worker's one descriptor (its plugin's ``mosaic_workers`` hook returns
:data:`METADATA`; its run hooks, :mod:`cleanrl_worker.run_hooks`, are called for its runs only).

Kept import-light: discovery imports this module and nothing else of the worker, and it
imports nothing of the worker's package either."""

from __future__ import annotations

from mosaic_core import WorkerCapabilities, WorkerMetadata

VERSION = "0.1.0"

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

METADATA = WorkerMetadata(
    name="cleanrl",
    version=VERSION,
    description="Runs CleanRL single-file algorithms (bundled or from a checkout) in a supervised subprocess",
    capabilities=CAPABILITIES,
    worker="cleanrl_worker.worker:CleanRLWorker",
    upstream_library="cleanrl",
    upstream_version="master (single-file scripts)",
    run_hooks="cleanrl_worker.run_hooks",
)
