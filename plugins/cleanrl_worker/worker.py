"""The CleanRL worker's interface to the host (:class:`mosaic_core.worker.Worker`): its own
flags (``--interactive``, ``--preset``, ``--name``, ``--restart``), the config defaults of its
modes, and the launch plan. Everything else of a run is the host's (:mod:`mosaic_core.pipeline`)."""

from __future__ import annotations

import argparse
from typing import Any

from mosaic_core.config import WorkerConfig
from mosaic_core.runs import RunContext
from mosaic_core.types import ExtrasKey, Launch
from mosaic_core.worker import Worker

# The worker's own extras keys; every key no one owns becomes a script flag.
OWN_KEYS = [
    ExtrasKey("algo_params", "an object of script flags (wins over top-level keys)"),
    ExtrasKey("mode", "train (default), resume_training or policy_eval"),
    ExtrasKey("checkpoint_path", "the checkpoint resume_training continues from"),
    ExtrasKey("policy_path", "the checkpoint policy_eval (or interactive) plays"),
    ExtrasKey("cleanrl_home", "a CleanRL checkout to take algorithms from"),
    ExtrasKey("gym_compat", "gymnasium 1.x: true/false forces 0.29 vector-env semantics on or off for the script"),
    ExtrasKey("interactive", "reserved: use --interactive"),
    ExtrasKey("interactive_render", "interactive mode: send frames (default true)"),
    ExtrasKey("eval", "reserved for evaluation settings"),
    ExtrasKey("eval_", "evaluation settings (the keys below)", prefix=True),
    ExtrasKey("eval_episodes", "episodes per evaluation: policy_eval's rounds, or training's periodic evaluation"),
    ExtrasKey("eval_frequency", "training: evaluate the policy every N steps, keep best.cleanrl_model"),
    ExtrasKey("eval_batch_size", "policy_eval: episodes played in parallel (default 1)"),
    ExtrasKey("eval_gamma", "policy_eval: discount of the reported discounted return"),
    ExtrasKey("eval_repeat", "policy_eval: rounds of eval_episodes episodes (default 1)"),
    ExtrasKey("eval_max_episode_steps", "policy_eval: the episode step limit"),
    ExtrasKey("eval_capture_video", "policy_eval: record the first episode of each batch"),
    ExtrasKey("eval_deterministic", "policy_eval: greedy / mean actions"),
    ExtrasKey("eval_realtime", "policy_eval: play at the env's render_fps (to watch live frames)"),
    ExtrasKey("eval_video_format", "policy_eval: gif or mp4 (default: mp4 when moviepy is installed)"),
    ExtrasKey("preset", "hyperparameter preset (--preset): e.g. tuned; see mosaic algos presets"),
    ExtrasKey("experiment_name", "experiment name (--name): resume its latest interrupted run"),
]


class CleanRLWorker(Worker):
    accepts_extra_argv = True  # `mosaic run --worker cleanrl ... --learning-rate 1e-3`: the script's flags

    def extras_keys(self) -> list[ExtrasKey]:
        return OWN_KEYS

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        if getattr(parser, "description", None) is None:  # the host's group for this worker's flags
            parser.description = ("The script's own flags go after these (--learning-rate 1e-3 --num-envs 8); "
                                  "mosaic algos show ALGO lists them with types, defaults and help.")
        parser.add_argument("--interactive", action="store_true", help="JSON-lines stepping over stdin/stdout")
        parser.add_argument("--preset", metavar="NAME",
                            help="tuned hyperparameters for this algo and env (e.g. tuned; `mosaic algos presets`); "
                                 "extras and script flags win over it")
        parser.add_argument("--name", metavar="EXP",
                            help="experiment name: resume the latest checkpoint of the latest run named EXP if it "
                                 "was interrupted; else start a new run under that name")
        parser.add_argument("--restart", action="store_true", help="with --name: start fresh, never resume")

    def config_defaults(self, data: dict[str, Any], options: dict[str, Any]) -> dict[str, Any]:
        from cleanrl_worker.launcher import mode_defaults, recorded_options

        recorded = recorded_options(data, options)
        defaults = mode_defaults({**data, "extras": {**recorded, **data.get("extras", {})}},
                                 bool(options.get("interactive")))
        return {**defaults, "extras": recorded} if recorded else defaults

    def gpu_request(self, config: WorkerConfig) -> str | None:
        from cleanrl_worker.launcher import gpu_request

        return gpu_request(config.extras)

    def plan(self, config: WorkerConfig, run: RunContext) -> Launch:
        from cleanrl_worker.launcher import plan_launch

        return plan_launch(config, run)
