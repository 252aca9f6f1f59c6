"""The CleanRL worker's interface to the host (:class:`mosaic_core.worker.Worker`): its own
flags (``--interactive``, ``--preset``, ``--name``; ``--restart`` is the host's), the config defaults of its
modes, and the launch plan. Everything else of a run is the host's (:mod:`mosaic_core.pipeline`)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from mosaic_core import (
    ChildEvent,
    CodePath,
    ExtrasKey,
    FormOption,
    Launch,
    RunContext,
    TrackingSettings,
    UsageError,
    Worker,
    WorkerConfig,
    WorkerForm,
)
from mosaic_core.contract import Checkpoint, CheckpointLayout, normalize_mode

# The worker's own extras keys (the standard ones, mode, checkpoint_path, eval_episodes…, are the
# core's: mosaic_core.contract.STANDARD_KEYS); every key no one owns becomes a script flag.
OWN_KEYS = [
    ExtrasKey("algo_params", "an object of script flags (wins over top-level keys)"),
    ExtrasKey("cleanrl_home", "a CleanRL checkout to take algorithms from"),
    ExtrasKey("use_cuda", "MOSAIC's other name for cuda: the script's --cuda / --no-cuda"),
    ExtrasKey(
        "total_frames",
        "MOSAIC's frame budget: --total-frames for a script whose Args has it (others take total_timesteps)",
    ),
    ExtrasKey("gym_compat", "gymnasium 1.x: true/false forces 0.29 vector-env semantics on or off for the script"),
    ExtrasKey("interactive", "reserved: use --interactive"),
    ExtrasKey("interactive_render", "interactive mode: send frames (default true)"),
    ExtrasKey("eval", "reserved for evaluation settings"),
    ExtrasKey("eval_", "evaluation settings (the keys below)", prefix=True),
    ExtrasKey("eval_frequency", "training: evaluate the policy every N steps, keep best.cleanrl_model"),
    ExtrasKey("eval_batch_size", "policy_eval: episodes played in parallel (default 1)"),
    ExtrasKey("eval_gamma", "policy_eval: discount of the reported discounted return"),
    ExtrasKey("eval_repeat", "policy_eval: rounds of eval_episodes episodes (default 1)"),
    ExtrasKey("eval_max_episode_steps", "policy_eval: the episode step limit"),
    ExtrasKey("eval_realtime", "policy_eval: play at the env's render_fps (to watch live frames)"),
    ExtrasKey("eval_video_format", "policy_eval: gif or mp4 (default: mp4 when moviepy is installed)"),
    ExtrasKey("preset", "hyperparameter preset (--preset): e.g. tuned; see mosaic algos presets"),
    ExtrasKey("experiment_name", "experiment name (--name): resume its latest interrupted run", names_experiment=True),
]


# Script fields a submit form never offers: the config's own fields and the tracking settings.
FORM_HIDDEN = {"env_id", "total_timesteps", "seed", "track", "wandb_project_name", "wandb_entity"}


def names_a_path(algo: str) -> bool:
    """Whether ``algo`` names a script by path rather than an algorithm by name."""
    return "/" in algo or algo.endswith(".py") or algo.startswith("~")


# The libraries whose version a training run's resume must share with the run it continues: the
# envs' dynamics and their RNG streams (gymnasium), the networks' arithmetic and RNG (torch).
RESUME_LIBRARIES = ("torch", "gymnasium")


def _other_library_version(checkpoint: Checkpoint, saved: dict[str, str]) -> str | None:
    """Why ``checkpoint`` cannot continue its run here: saved with another version of a
    :data:`RESUME_LIBRARIES` library than this environment has (local build tags aside)."""
    from importlib import metadata

    for library in RESUME_LIBRARIES:
        theirs = saved.get(library)
        try:
            ours = metadata.version(library)
        except metadata.PackageNotFoundError:
            continue
        if isinstance(theirs, str) and theirs.split("+")[0] != ours.split("+")[0]:
            return (
                f"checkpoint {checkpoint.path} was saved with {library} {theirs}, this environment has {ours}: "
                "resumed, it would not continue the same run (install that version to resume it, or evaluate it)"
            )
    return None


class CleanRLWorker(Worker):
    accepts_extra_argv = True  # `mosaic run --worker cleanrl ... --learning-rate 1e-3`: the script's flags
    modes = ("interactive",)  # beside the contract's: JSON-lines stepping (--interactive)

    def extras_keys(self) -> list[ExtrasKey]:
        return OWN_KEYS

    def child_events(self) -> list[ChildEvent]:
        return [
            ChildEvent("eval_batch", "policy_eval finished a batch of episodes"),
            ChildEvent(
                "eval_result",
                "a checkpoint evaluated as training goes (extras.eval_every_checkpoint), or the model saved at the end",
            ),
        ]

    def code_paths(self, data: dict[str, Any]) -> list[CodePath]:
        """A script given by path as ``algo``, and a CleanRL checkout (``extras.cleanrl_home``);
        the script a name resolves to goes into the plan's ``Launch.code_paths``."""
        paths = []
        algo, extras = data.get("algo"), data.get("extras")
        if isinstance(algo, str) and names_a_path(algo):
            paths.append(CodePath("algo", algo))
        home = extras.get("cleanrl_home") if isinstance(extras, dict) else None
        if isinstance(home, str) and home:
            paths.append(CodePath("extras.cleanrl_home", home))
        return paths

    def algorithm_of_module(self, module: str) -> str | None:
        """MOSAIC's registry modules (``cleanrl.dqn``; ``ppo``'s patched copy and ``cleanrl.ppo``)
        and ``cleanrl_worker.<module>``, the bundled copy its resolution also tried."""
        from cleanrl_worker.readiness import MOSAIC_MODULES
        from cleanrl_worker.registry import bundled_names

        canonical = module.removeprefix("cleanrl_worker.") if module.startswith("cleanrl_worker.cleanrl.") else module
        names = {f"cleanrl.{name}": name for name in [*MOSAIC_MODULES, *bundled_names()]}
        names.update({path: name for name, path in MOSAIC_MODULES.items()})
        return names.get(canonical)

    def algorithm_names(self, data: dict[str, Any]) -> list[str]:
        """Every name the registry resolves or explains (a checkout in ``extras.cleanrl_home``
        adds its own), the bundled ones first, and the modes' programs (``policy_eval``, ``interactive``)."""
        from cleanrl_worker.launcher import MODE_PROGRAMS
        from cleanrl_worker.registry import bundled_names, checkout_home, known_names

        extras = table if isinstance(table := data.get("extras"), dict) else {}
        try:
            home = checkout_home(extras.get("cleanrl_home"), Path.cwd())
        except UsageError:
            home = None  # the plan names what is wrong with it
        bundled = bundled_names()
        return [*bundled, *(name for name in known_names(home) if name not in bundled), *MODE_PROGRAMS]

    def honoured_settings(self) -> tuple[type, ...]:
        return (TrackingSettings,)  # the scripts' --track, --wandb-project-name, --wandb-entity

    def describe_options(self, algo: str | None) -> WorkerForm:
        """The bundled and installed algorithms, and the fields of ``algo``'s ``Args`` (read
        without importing torch); submitted values go to ``extras.algo_params``."""
        from cleanrl_worker.registry import list_algorithms, resolve
        from cleanrl_worker.script_args import read_script_args

        algos = tuple(entry.name for entry in list_algorithms() if entry.winner is not None)
        algo = algo or ("ppo" if "ppo" in algos else (algos or (None,))[0])
        if algo is None:
            return WorkerForm()
        resolved = resolve(algo)
        fields = read_script_args(resolved.script).fields
        options = tuple(
            FormOption(
                f.name,
                f.kind if f.kind in ("str", "int", "float", "bool", "literal", "list") else "str",
                f.to_dict()["default"],
                f.help or "",
                tuple(f.choices or ()),
                f.item_kind,
                f.annotation,
                f.default_text,
            )
            for f in fields.values()
            if f.name not in FORM_HIDDEN
        )
        return WorkerForm(
            algos=algos, algo=algo, options=options, extras_key="algo_params", source=str(resolved.script)
        )

    def validate(self, config: WorkerConfig, options: dict[str, Any]) -> list[str]:
        """An env whose family is not installed (Atari, MuJoCo, …): one problem naming the
        extra; a ``gym_compat`` that is not a bool."""
        from cleanrl_worker.env_families import missing_family_message

        problems = [missing_family_message(config.env_id)] if isinstance(config.env_id, str) else []
        compat = config.extras.get("gym_compat")
        if compat is not None and not isinstance(compat, bool):
            problems.append(f"extras.gym_compat must be true or false (0.29 vector-env semantics), got {compat!r}")
        return [problem for problem in problems if problem]

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        if getattr(parser, "description", None) is None:  # the host's group for this worker's flags
            parser.description = (
                "The script's own flags go after these (--learning-rate 1e-3 --num-envs 8); "
                "mosaic algos show ALGO lists them with types, defaults and help."
            )
        parser.add_argument("--interactive", action="store_true", help="JSON-lines stepping over stdin/stdout")
        parser.add_argument(
            "--preset",
            metavar="NAME",
            help="tuned hyperparameters for this algo and env (e.g. tuned; `mosaic algos presets`); "
            "extras and script flags win over it",
        )
        parser.add_argument(
            "--name",
            metavar="EXP",
            help="experiment name: resume the latest checkpoint of the latest run named EXP if it "
            "was interrupted; else start a new run under that name",
        )
        parser.add_argument(
            "--no-save",
            action="store_true",
            help="keep no model: a run saves its final model by default (the script's --save-model; "
            'extras {"save_model": false} says the same in a config)',
        )

    def config_defaults(self, data: dict[str, Any], options: dict[str, Any]) -> dict[str, Any]:
        from cleanrl_worker.launcher import mode_defaults, recorded_options

        recorded = recorded_options(data, options)
        defaults = mode_defaults(
            {**data, "extras": {**recorded, **data.get("extras", {})}}, bool(options.get("interactive"))
        )
        return {**defaults, "extras": recorded} if recorded else defaults

    def gpu_request(self, config: WorkerConfig) -> str | None:
        from cleanrl_worker.launcher import gpu_request

        return gpu_request(config.extras)

    def checkpoint_layout(self, config: WorkerConfig) -> CheckpointLayout | None:
        """The bundled algorithms' ``checkpoints/step_{step}.cleanrl_model`` (weights, optimizer,
        RNG and env state: :mod:`cleanrl_worker.resumestate`); scripts of a checkout or a path
        keep their own files, which the host does not resume."""
        from cleanrl_worker.checkpoint_header import CHECKPOINTS, FORMAT
        from cleanrl_worker.registry import bundled_names

        if config.extras.get("cleanrl_home") or config.algo not in bundled_names():
            return None
        return CheckpointLayout(CHECKPOINTS, FORMAT)

    def policy_server(
        self, checkpoint: Checkpoint, config: WorkerConfig, *, agent: str, python: str
    ) -> list[str] | None:
        """The interactive mode's session serving the checkpoint's greedy policy (its ``act`` command);
        a single-agent policy: the same for any seat its spaces fit."""
        command = [python, "-m", "cleanrl_worker.interactive", "--env-id", config.env_id]
        return command + ["--policy-path", str(checkpoint.path), "--deterministic"]

    def check_checkpoint(self, checkpoint: Checkpoint, config: WorkerConfig) -> str | None:
        from cleanrl_worker.checkpoint_header import FORMAT, FORMAT_VERSION, read_header

        try:
            header = read_header(checkpoint.path)
        except ValueError as exc:
            return f"checkpoint {checkpoint.path}: {exc}"
        if header.get("format") != FORMAT:
            return f"checkpoint {checkpoint.path} is not a {FORMAT} checkpoint (format {header.get('format')!r})"
        version = header.get("format_version")
        if not isinstance(version, int) or version > FORMAT_VERSION:
            return (
                f"checkpoint {checkpoint.path} has format version {version}, newer than this worker reads "
                f"({FORMAT_VERSION})"
            )
        for field, expected in (("algo", config.algo), ("env_id", config.env_id)):
            if header.get(field) != expected:
                return f"checkpoint {checkpoint.path} was saved with {field} {header.get(field)!r}, not {expected!r}"
        if normalize_mode(config.extras.get("mode")) != "evaluate":  # playing a policy needs only its weights
            return _other_library_version(checkpoint, header.get("versions") or {})
        return None

    def enjoy_extras(self, *, video_format: str | None, live: bool) -> dict[str, Any] | None:
        """policy_eval's recording (GIF, or MP4 with moviepy) and FastLane keys, one episode at a time."""
        extras: dict[str, Any] = {"eval_batch_size": 1} if video_format or live else {}
        if video_format:
            extras.update(eval_capture_video=True, eval_video_format=video_format)
        if live:
            extras.update(fastlane=True, eval_realtime=True)
        return extras

    def algos_arguments(self, parser: argparse.ArgumentParser) -> None:
        from cleanrl_worker.algos_cli import configure

        configure(parser)

    def algos_view(self, ns: argparse.Namespace, python: str) -> int | None:
        from cleanrl_worker.algos_cli import run

        return run(ns)

    def plan(self, config: WorkerConfig, run: RunContext) -> Launch:
        from cleanrl_worker.launcher import plan_launch

        return plan_launch(config, run)
