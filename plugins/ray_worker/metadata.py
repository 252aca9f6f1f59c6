"""The RLlib worker's identity, capabilities and environment (its plugin's ``mosaic_workers`` returns it).

Kept import-light: discovery imports this module and nothing else of the worker."""

from __future__ import annotations

from mosaic_core import WorkerCapabilities, WorkerEnvironment, WorkerMetadata

VERSION = "0.1.0"  # the package's __version__ (its __init__ reads it here)

# ray[rllib] 2.60.0 pins gymnasium==1.2.2 exactly (no co-install with the host's 0.29.1): hence an
# environment of its own. pyarrow 26 imports only with numpy 2; CartPole's frames need pygame;
# torch's unpinned default is a multi-GB CUDA build; tensorboard for the worker's SummaryWriter;
# PettingZoo for multi-agent runs (1.24.3, XuanCe's: the last with MPE inside; gymnasium>=0.28 fits 1.2.2).
REQUIREMENTS = (
    "ray[rllib]==2.60.0",
    "gymnasium==1.2.2",
    "numpy==1.26.4",
    "pyarrow<26",
    "torch==2.13.0",
    "pygame>=2.1",
    "tensorboard>=2.14",
    "pettingzoo==1.24.3",
)
# `mosaic workers install rllib --extras atari,mujoco`: Atari (ale-py bundles its ROMs; RLlib's Atari
# wrappers resize with OpenCV, headless) and MuJoCo (gymnasium 1.x's v5 envs).
OPTIONAL = {
    "atari": ("ale-py>=0.10,<0.12", "opencv-python-headless>=4.8,<4.12"),
    "mujoco": ("mujoco>=2.3.3,<3", "imageio>=2.14.1"),
}

CAPABILITIES = WorkerCapabilities(
    worker_type="rllib",
    supported_paradigms=("sequential", "parallel", "self_play"),  # multi-agent: PettingZoo's AEC and parallel envs
    env_families=("gymnasium", "classic_control", "box2d", "atari", "mujoco", "classic", "mpe", "pettingzoo"),
    action_spaces=("discrete", "continuous"),
    observation_spaces=("vector", "image"),
    supports_checkpointing=True,
    supports_env_switching=False,  # its env runners make their envs themselves, out of the patch point's reach
    requires_gpu=False,  # GPUs are used when extras.algo_params.num_gpus_per_learner asks
    cpu_cores=2,  # the driver and one env runner
    estimated_memory_mb=1600,
)

METADATA = WorkerMetadata(
    name="rllib",
    version=VERSION,
    description="Ray RLlib (PPO, APPO, IMPALA, DQN, SAC; new API stack) on gymnasium envs, and PPO on PettingZoo "
    "multi-agent envs and self-play, on a local Ray cluster started by the run or an existing one",
    capabilities=CAPABILITIES,
    worker="ray_worker.worker:RLlibWorker",
    upstream_library="ray[rllib]",
    upstream_version="2.60.0",
    environment=WorkerEnvironment(requirements=REQUIREMENTS, optional=OPTIONAL),
)
