"""The XuanCe worker's identity, capabilities and environment (its plugin's ``mosaic_workers`` returns it).

Kept import-light: discovery imports this module and nothing else of the worker."""

from __future__ import annotations

from mosaic_core import WorkerCapabilities, WorkerEnvironment, WorkerMetadata

VERSION = "0.1.0"  # the package's __version__ (its __init__ reads it here)

# XuanCe pins numpy<2 and gymnasium>=0.28,<1.3; pettingzoo 1.25+ moved MPE out (every MPE config
# then fails), so it is pinned. xuance brings the non-headless opencv-python, which would clash with
# the Atari extra's opencv-python-headless in the host's venv: hence an environment of its own.
# rware (pure Python, small): XuanCe's robotic_warehouse family (its v2 ids: MAPPO's config).
REQUIREMENTS = (
    "xuance==1.4.4",
    "pettingzoo==1.24.3",
    "numpy==1.26.4",
    "torch==2.13.0",
    "gymnasium==0.29.1",
    "pyyaml>=6",
    "tensorboard>=2.14",
    "rware==2.0.0",
)

CAPABILITIES = WorkerCapabilities(
    worker_type="xuance",
    supported_paradigms=("parallel",),  # PettingZoo's parallel API: every agent acts each step
    env_families=("mpe", "pettingzoo", "robotic_warehouse"),
    action_spaces=("discrete", "continuous"),
    observation_spaces=("vector",),
    max_agents=32,
    supports_checkpointing=True,
    supports_env_switching=False,  # XuanCe builds its multi-agent envs once; each MPE scenario has its own agents
    requires_gpu=False,
    estimated_memory_mb=600,
)


METADATA = WorkerMetadata(
    name="xuance",
    version=VERSION,
    description="Multi-agent training with XuanCe (MAPPO, QMIX, MADDPG, VDN, COMA, IPPO, IQL) on PettingZoo "
    "MPE and robotic warehouse, XuanCe imported in the training process",
    capabilities=CAPABILITIES,
    worker="xuance_worker.worker:XuanCeWorker",
    upstream_library="xuance",
    upstream_version="1.4.4",
    environment=WorkerEnvironment(requirements=REQUIREMENTS),
)
