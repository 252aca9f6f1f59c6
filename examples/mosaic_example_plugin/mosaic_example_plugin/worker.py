"""A second worker, written the way a third party would: a random policy in a plain gymnasium
loop as the training process. It is one small class; the host gives it config files, dry
runs, lifecycle events, heartbeats, signals, run directories, FastLane frames, the live metric
bridge (through ``mosaic_core.child.report_scalar``), the manifest, curriculum and daemon
submission."""

from __future__ import annotations

import argparse
import os

from mosaic_core import (
    CodePath,
    ConfigError,
    Launch,
    Worker,
    WorkerCapabilities,
    WorkerEnvironment,
    WorkerForm,
    WorkerMetadata,
)
from mosaic_core.contract import CheckpointLayout, host_flags

POLICIES = ("random", "first")


CAPABILITIES = WorkerCapabilities(
    worker_type="example",
    supported_paradigms=("sequential",),
    env_families=("gymnasium",),
    action_spaces=("discrete", "continuous"),
    observation_spaces=("vector", "image"),
    estimated_memory_mb=128,
)


def get_worker_metadata() -> WorkerMetadata:
    """The worker's descriptor (its ``mosaic.workers`` entry point): cheap to
    build (imports nothing heavy); the worker class is named, imported when a run needs it."""
    return WorkerMetadata(
        name="example",
        version="0.2.0",
        worker="mosaic_example_plugin.worker:ExampleWorker",
        description="Plays a random (or always-first-action) policy in a gymnasium env; an example worker",
        capabilities=CAPABILITIES,
        example=True,
    )


def get_isolated_worker_metadata() -> WorkerMetadata:
    """The same worker in its own environment (`mosaic workers install example-venv`): gymnasium
    1.2.2 there, whatever the host's venv holds, and no torch."""
    return WorkerMetadata(
        name="example-venv",
        version="0.2.0",
        worker="mosaic_example_plugin.worker:ExampleWorker",
        description="The example worker in its own environment (gymnasium 1.2.2, no torch)",
        capabilities=CAPABILITIES,
        example=True,
        environment=WorkerEnvironment(requirements=("gymnasium==1.2.2", "numpy==1.26.4")),
    )


class ExampleWorker(Worker):
    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--log-every", type=int, default=200, help="steps between charts/SPS reports")
        parser.add_argument(
            "--direct",
            action="store_true",
            help="build the env without gym.make and publish frames through mosaic_core.child",
        )

    def config_defaults(self, data, options):
        return {"algo": "random"}  # the one algorithm-like choice this worker has: the policy

    def code_paths(self, data):
        """A policy file given as ``algo`` is code this run executes: a daemon checks it."""
        algo = data.get("algo")
        return [CodePath("algo", algo)] if isinstance(algo, str) and algo.endswith(".py") else []

    def algorithm_names(self, data):
        return list(POLICIES)  # a policy file (a .py path) is code, not a name

    def describe_options(self, algo):
        return WorkerForm(algos=POLICIES, algo=algo or "random")  # a submit form offers the policies

    def checkpoint_layout(self, config):
        """What a stop leaves (SIGTERM, SIGUSR1, Ctrl-C), and every ``extras.checkpoint_frequency``
        steps: the step reached, as JSON; `mosaic resume` goes on from it."""
        return CheckpointLayout("checkpoints/step_{step}.json", "example.progress/1")

    def validate(self, config, options):
        problems = []
        if options.get("log_every", 1) < 1:
            problems.append("--log-every must be >= 1")
        if config.extras.get("mode") == "evaluate":  # the run contract's keys are the host's to check
            problems.append("extras.mode: the example worker trains and resumes; it has no evaluate mode")
        return problems

    def plan(self, config, run) -> Launch:
        if run.worker_extras:  # keys no plugin owns would be this worker's, and it has none
            key = sorted(run.worker_extras)[0]
            raise ConfigError(
                f"extras.{key}: no installed plugin owns this key and the example worker takes no extras of its own",
                field=f"extras.{key}",
                source=config.source,
            )
        if config.algo.endswith(".py"):  # the policy file, wherever the run's directory is
            config = config.with_overrides(algo=os.path.abspath(config.algo))
        resuming = config.extras.get("mode") == "resume"  # the host found the run's newest checkpoint
        command = [
            run.python,
            "-m",
            "mosaic_example_plugin.random_loop",
            *host_flags(config, checkpoint=config.extras["checkpoint_path"] if resuming else None),
            "--env-id",
            config.env_id,
            "--log-every",
            str(run.options["log_every"]),
            *(["--direct"] if run.options.get("direct") else []),
        ]
        return Launch(
            command=command,
            num_envs=1,
            summary={"headline": f"{config.algo} policy on {config.env_id}"},
            started_payload={"policy": config.algo},
        )
