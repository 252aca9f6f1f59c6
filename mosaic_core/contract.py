"""The run contract, written once for every worker: modes, checkpoints, evaluation results.

The host owns a run's life, not only its start and end (`docs/run-contract.md`). What
every worker does the same way is here; a worker only says how its checkpoints look
(:class:`CheckpointLayout`, from :meth:`mosaic_core.worker.Worker.checkpoint_layout`) and how
to start each mode (:meth:`~mosaic_core.worker.Worker.plan`).

- **Modes** ``train``, ``resume``, ``evaluate`` (:data:`MODES`); ``resume_training`` and
  ``policy_eval`` are read as their old names (:func:`normalize_mode`). A worker may add its
  own (the CleanRL worker's ``interactive``).
- **Standard extras keys** (:data:`STANDARD_KEYS`) are declared here, not per worker, and
  checked here (:func:`standard_key_problems`, one wording for every worker); the host turns
  them into the training program's flags (:func:`host_flags`), which the program reads back
  with :func:`add_host_arguments`.
- **Checkpoints** are :class:`Checkpoint` records found by the layout a worker declares;
  :func:`newest_checkpoint` is the one lookup.
- **A stop that keeps the run** (:class:`StopOnSignal`): SIGTERM, SIGUSR1 (what schedulers
  send before a time limit) and SIGINT ask the training program to checkpoint at its next safe
  point and end as killed by that signal, so the host records a resumable cancel.
- **Evaluation results** are one schema, ``mosaic.eval/1`` (:func:`eval_result`), written
  atomically as ``eval.json`` (:func:`write_eval`), with the same defaults for every worker
  (:data:`EVAL_EPISODES` episodes, seeds disjoint from training's: :func:`eval_seeds`).

Nothing here imports torch, numpy or a worker: the host and every training program use it.
"""

from __future__ import annotations

import argparse
import math
import os
import re
import signal
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, Protocol

from mosaic_core.evalvideo import (
    VIDEO_ENCODERS,
    VIDEO_FPS,
    mp4_enjoy_extras,
    no_video_encoder,
    video_encoder,
    write_mp4,
)
from mosaic_core.jsontext import dumps
from mosaic_core.types import ExtrasKey

__all__ = [
    "CHECKPOINT_MODES",
    "Checkpoint",
    "CheckpointLayout",
    "EVAL_EPISODES",
    "EVAL_FILE",
    "EVAL_SCHEMA",
    "EVAL_SEED_OFFSET",
    "LOWEST",
    "MODES",
    "OLD_NAMES",
    "STANDARD_KEYS",
    "STOP_SIGNALS",
    "StopOnSignal",
    "VIDEO_ENCODERS",
    "VIDEO_FILE",
    "VIDEO_FPS",
    "add_host_arguments",
    "at_stop_exit",
    "checkpoint_key",
    "eval_result",
    "eval_seeds",
    "find_checkpoints",
    "host_flags",
    "iqm",
    "mp4_enjoy_extras",
    "newest_checkpoint",
    "no_video_encoder",
    "normalize_mode",
    "run_at_stop_exit",
    "standard_key_problems",
    "video_encoder",
    "write_eval",
    "write_mp4",
]

MODES = ("train", "resume", "evaluate")
OLD_NAMES = {"resume_training": "resume", "policy_eval": "evaluate"}

EVAL_EPISODES = 10
EVAL_SEED_OFFSET = 1_000_000  # evaluation seeds start here past the training seed
EVAL_SCHEMA = "mosaic.eval/1"
EVAL_FILE = "eval.json"

STANDARD_KEYS = [
    ExtrasKey(
        "mode", "train (default), resume or evaluate (resume_training and policy_eval are read as resume and evaluate)"
    ),
    ExtrasKey("checkpoint_path", "resume / evaluate: a checkpoint, or a run directory (its newest checkpoint)"),
    ExtrasKey("policy_path", "resume / evaluate: the old name of checkpoint_path"),
    ExtrasKey(
        "agent_id",
        "the agent's name (MOSAIC's run metadata): recorded in config.json, run_started and the manifest, never a flag",
        bookkeeping=True,
    ),
    ExtrasKey("checkpoint_frequency", "save a checkpoint every N env steps (0 or absent: at the end and on a stop)"),
    ExtrasKey("save_replay_buffer", "off-policy algorithms: keep the replay buffer in checkpoints (its size is said)"),
    ExtrasKey("eval_episodes", f"evaluation episodes (default {EVAL_EPISODES}, the same for every worker)"),
    ExtrasKey("eval_deterministic", "evaluate with the greedy / mean action"),
    ExtrasKey("eval_seed", f"the first evaluation seed (default: training seed + {EVAL_SEED_OFFSET:,})"),
    ExtrasKey("eval_every_checkpoint", "evaluate each checkpoint as training goes (an eval_result event each)"),
    ExtrasKey("eval_capture_video", "evaluate: record the first episode as a video (mosaic evaluate --video sets it)"),
    ExtrasKey("torch_threads", "the training process's torch threads (default: the run's thread budget)"),
]


def normalize_mode(mode: Any) -> Any:
    """``mode`` with the old names read as the contract's (``None`` and ``""``: ``train``).
    Anything else is returned as given, for validation to name."""
    if mode in (None, ""):
        return "train"
    return OLD_NAMES.get(mode, mode) if isinstance(mode, str) else mode


# The standard keys' values ------------------------------------------------------------------


def _whole(low: int) -> Callable[[Any], bool]:
    return lambda value: isinstance(value, int) and not isinstance(value, bool) and value >= low


def _switch(value: Any) -> bool:
    return isinstance(value, bool)


def _path(value: Any) -> bool:
    return isinstance(value, str) and bool(value) and "\0" not in value


# The smallest value of each whole-number key (a training program's parser and a script's ranges use them too).
LOWEST = {"checkpoint_frequency": 0, "eval_episodes": 1, "eval_seed": 0, "torch_threads": 1}
SWITCHES = ("save_replay_buffer", "eval_deterministic", "eval_every_checkpoint", "eval_capture_video")
_PATH = "a path (a checkpoint, or a run directory: its newest checkpoint)"
# What each standard key holds: (the test of a value, what the error says was expected).
VALUES: dict[str, tuple[Callable[[Any], bool], str]] = {
    "checkpoint_path": (_path, _PATH),
    "policy_path": (_path, _PATH),
    **{key: (_whole(low), f"an integer >= {low}") for key, low in LOWEST.items()},
    **{key: (_switch, "true or false") for key in SWITCHES},
}
CHECKPOINT_MODES = ("resume", "evaluate")  # the modes that load a checkpoint


def checkpoint_key(extras: dict[str, Any]) -> str:
    """The key naming the checkpoint to load: ``checkpoint_path``, or ``policy_path`` (its old
    name) when only that is given."""
    return "policy_path" if extras.get("policy_path") and not extras.get("checkpoint_path") else "checkpoint_path"


def standard_key_problems(extras: dict[str, Any], own_modes: Sequence[str] = ()) -> list[str]:
    """What is wrong with the standard keys of ``extras``, one line each naming the key, what was
    expected and what was given: the one check every worker's runs pass (the host's, before a
    worker validates its own keys). ``own_modes``: the modes a worker adds (:attr:`Worker.modes`)."""
    mode = normalize_mode(extras.get("mode"))
    modes = (*MODES, *own_modes)
    problems = []
    if mode not in modes:
        problems.append(
            f"extras.mode must be one of {', '.join(modes)} (resume_training and policy_eval are read as "
            f"resume and evaluate), got {extras.get('mode')!r}"
        )
    for key, (accepts, expected) in VALUES.items():
        if key in extras and extras[key] is not None and not accepts(extras[key]):
            problems.append(f"extras.{key} must be {expected}, got {extras[key]!r}")
    if mode in CHECKPOINT_MODES and extras.get(checkpoint_key(extras)) in (None, ""):
        problems.append(
            f"extras.checkpoint_path is required for mode {mode!r} (a checkpoint, or a run directory: its newest)"
        )
    if extras.get("eval_capture_video") is True and mode != "evaluate":
        problems.append("extras.eval_capture_video: a video is recorded in mode evaluate only")
    return problems


# Checkpoints --------------------------------------------------------------------------------


@dataclass(frozen=True)
class CheckpointLayout:
    """How a worker's checkpoints look inside a run directory.

    ``pattern`` is a path relative to the run directory with one ``{step}`` field, e.g.
    ``"checkpoints/step_{step}.cleanrl_model"`` (``kind="file"``) or
    ``"checkpoints/step_{step}"`` (``kind="dir"``); ``{run_id}`` may appear too. ``format``
    names the format (``"mosaic.cleanrl_model"``); ``code`` says whether loading it runs code
    (pickles: then it loads only from a run the owner made or trusted)."""

    pattern: str
    format: str
    kind: Literal["file", "dir"] = "file"
    code: bool = False

    def __post_init__(self) -> None:
        if self.pattern.count("{step}") != 1 or self.pattern.startswith("/") or ".." in Path(self.pattern).parts:
            raise ValueError(
                f"CheckpointLayout.pattern must be a relative path with one {{step}}, got {self.pattern!r}"
            )
        if self.kind not in ("file", "dir"):
            raise ValueError(f"CheckpointLayout.kind must be 'file' or 'dir', got {self.kind!r}")

    def path(self, run_dir: Path, step: int, run_id: str = "") -> Path:
        return run_dir / self.pattern.format(step=step, run_id=run_id)

    def regex(self, run_id: str = "") -> re.Pattern[str]:
        head, tail = self.pattern.split("{step}")

        def escape(text: str) -> str:
            return re.escape(text.replace("{run_id}", run_id))

        return re.compile(f"^{escape(head)}(?P<step>[0-9]+){escape(tail)}$")


@dataclass(frozen=True)
class Checkpoint:
    """A checkpoint the host knows: where, at which env step, in which format."""

    path: Path
    step: int
    format: str
    code: bool = False

    def payload(self) -> dict[str, Any]:
        return {"path": str(self.path), "step": self.step, "format": self.format, "code": self.code}


def find_checkpoints(run_dir: Path, layout: CheckpointLayout, run_id: str = "") -> list[Checkpoint]:
    """The checkpoints of ``layout`` under ``run_dir``, oldest step first. Links are not
    followed and entries of the wrong kind are skipped (a FIFO, socket or device is no file
    checkpoint: nothing ever opens one and waits); only the pattern's folder is listed."""
    pattern = layout.regex(run_id)
    parent = layout.path(run_dir, 0, run_id).parent
    found = []
    try:
        entries = list(os.scandir(parent))
    except OSError:
        return []
    for entry in entries:
        relative = (parent / entry.name).relative_to(run_dir).as_posix()
        match = pattern.match(relative)
        if not match or entry.is_symlink():
            continue
        if not (entry.is_dir if layout.kind == "dir" else entry.is_file)(follow_symlinks=False):
            continue
        found.append(Checkpoint(Path(entry.path), int(match["step"]), layout.format, layout.code))
    return sorted(found, key=lambda c: c.step)


def newest_checkpoint(run_dir: Path, layout: CheckpointLayout, run_id: str = "") -> Checkpoint | None:
    found = find_checkpoints(run_dir, layout, run_id)
    return found[-1] if found else None


# Evaluation ---------------------------------------------------------------------------------


def eval_seeds(episodes: int, training_seed: int | None = None, eval_seed: int | None = None) -> list[int]:
    """One reset seed per evaluation episode: ``eval_seed, eval_seed + 1, …``; by default
    :data:`EVAL_SEED_OFFSET` past the training seed, so they never meet training's seeds."""
    if episodes < 1:
        raise ValueError(f"episodes must be at least 1, got {episodes}")
    start = eval_seed if eval_seed is not None else (training_seed or 0) + EVAL_SEED_OFFSET
    return [start + i for i in range(episodes)]


def iqm(values: Sequence[float]) -> float:
    """The interquartile mean: the mean of the middle 50 % (rliable's definition,
    ``scipy.stats.trim_mean(values, 0.25)``: a quarter cut from each end, rounded down)."""
    ordered = sorted(float(v) for v in values)
    if not ordered:
        return math.nan
    cut = int(0.25 * len(ordered))
    middle = ordered[cut : len(ordered) - cut]
    return sum(middle) / len(middle)


def _mean_std(values: Sequence[float]) -> tuple[float, float]:
    if not values:
        return math.nan, math.nan
    mean = sum(values) / len(values)
    return mean, math.sqrt(sum((v - mean) ** 2 for v in values) / len(values))


def eval_result(
    *,
    worker: str,
    algo: str,
    env_id: str,
    checkpoint: str,
    global_step: int,
    returns: Sequence[float],
    lengths: Sequence[int],
    seeds: Sequence[int],
    deterministic: bool,
    agent_returns: Sequence[dict[str, float]] | None = None,
    extra: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The one evaluation schema, ``mosaic.eval/1``. ``returns`` are per-episode (team returns
    for multi-agent runs, whose per-agent returns go in ``agent_returns``); normalisation is
    always frozen during evaluation."""
    if not (len(returns) == len(lengths) == len(seeds)) or (
        agent_returns is not None and len(agent_returns) != len(returns)
    ):
        raise ValueError("returns, lengths, seeds (and agent_returns) must have one entry per episode")
    episodes = []
    for i, (ret, length, seed) in enumerate(zip(returns, lengths, seeds)):
        episode: dict[str, Any] = {"return": float(ret), "length": int(length), "seed": int(seed)}
        if agent_returns is not None:
            episode["agents"] = {str(k): float(v) for k, v in agent_returns[i].items()}
        episodes.append(episode)
    mean, std = _mean_std([float(r) for r in returns])
    return {
        "schema": EVAL_SCHEMA,
        "worker": worker,
        "algo": algo,
        "env_id": env_id,
        "checkpoint": checkpoint,
        "global_step": int(global_step),
        "protocol": {
            "episodes": len(episodes),
            "deterministic": bool(deterministic),
            "first_seed": int(seeds[0]) if seeds else None,
            "normalization": "frozen",
        },
        "episodes": episodes,
        "mean": mean,
        "std": std,
        "iqm": iqm(returns),
        "written": time.time(),
        **(extra or {}),
    }


def write_eval(path: Path, result: dict[str, Any]) -> Path:
    """Write ``result`` as JSON (0600) through the one writer (``--eval-out`` may name it):
    atomically, never through a link."""
    from mosaic_core.files import write_atomic

    write_atomic(path, (dumps(result, indent=2) + "\n").encode(), mode=0o600, flag="--eval-out")
    return Path(path)


# Stopping -----------------------------------------------------------------------------------

STOP_SIGNALS = (signal.SIGTERM, signal.SIGUSR1, signal.SIGINT)
_AT_STOP_EXIT: list[Callable[[], Any]] = []


def at_stop_exit(callback: Callable[[], Any]) -> None:
    """Have ``callback`` run when a stopped training program ends (:meth:`StopOnSignal.exit`),
    before the process ends as signalled (no ``atexit`` handler runs then): e.g. a tracker's
    ``finish``, so what it logged up to the checkpoint is written. Its errors are ignored."""
    _AT_STOP_EXIT.append(callback)


def run_at_stop_exit() -> None:
    """Run (once each) what was registered with :func:`at_stop_exit`; for a training program that
    ends a stopped run its own way (RLlib's driver ends its cluster and exits at once)."""
    while _AT_STOP_EXIT:
        callback = _AT_STOP_EXIT.pop(0)
        try:
            callback()
        except Exception:  # the stop goes on: the checkpoint is saved already
            pass


class StopOnSignal:
    """A stop that keeps the run, for a training program's main loop::

        stop = StopOnSignal()
        for global_step in range(...):
            ...
            if stop.requested:
                break
        save(...)        # a checkpoint of the run as it is now
        stop.exit(completed=global_step >= total)  # ends as killed by the signal (a no-op without a
                         # stop, and when the loop did its whole budget: the run completed)

    A second signal ends the process at once, unless it comes within ``SAME_STOP_S`` of the
    first: that is the same stop (a scheduler ending a job signals each of its processes, Slurm
    on a preemption, and the host passes the stop on too). The host's SIGKILL after its grace
    period bounds the whole stop. Installed only from the main thread."""

    SAME_STOP_S = 2.0

    def __init__(self, signals: tuple[int, ...] = STOP_SIGNALS):
        self.signum: int | None = None
        self.first_at = 0.0
        if threading.current_thread() is threading.main_thread():
            for signum in signals:
                signal.signal(signum, self._received)

    def _received(self, signum: int, _frame: Any) -> None:
        if self.signum is not None:
            if time.monotonic() - self.first_at < self.SAME_STOP_S:
                return  # the same stop, from a second sender
            self._reraise(signum)  # asked twice: no more waiting
        self.signum, self.first_at = signum, time.monotonic()

    @property
    def requested(self) -> bool:
        return self.signum is not None

    def exit(self, completed: bool = False) -> None:
        """After a requested stop, end the process as killed by the signal (a no-op otherwise).
        ``completed``: the loop did its whole budget before it heard the stop (the signal came in
        its last step, or after it): the process then ends normally, and the host records the run
        completed, not a cancel that nothing is left to resume."""
        if self.signum is not None and completed:
            name = signal.Signals(self.signum).name
            print(f"{name} came after the run's last step: it completed, its final checkpoint saved", file=sys.stderr)
            return
        if self.signum is not None:
            run_at_stop_exit()
            print(f"stopped by {signal.Signals(self.signum).name} after saving what the run keeps", file=sys.stderr)
            sys.stderr.flush()
            sys.stdout.flush()
            self._reraise(self.signum)

    @staticmethod
    def _reraise(signum: int) -> None:
        signal.signal(signum, signal.SIG_DFL)
        os.kill(os.getpid(), signum)


# The training program's side ----------------------------------------------------------------


VIDEO_FILE = "video.mp4"  # evaluate's recording, in the evaluation's folder (mosaic evaluate --video copies it out)
NUMBER_FLAGS = ("checkpoint_frequency", "eval_episodes", "eval_seed", "torch_threads")


class RunFields(Protocol):
    """What :func:`host_flags` reads of a run's config (a :class:`mosaic_core.config.WorkerConfig`)."""

    @property
    def algo(self) -> str: ...
    @property
    def total_timesteps(self) -> int | None: ...
    @property
    def seed(self) -> int | None: ...
    @property
    def extras(self) -> dict[str, Any]: ...


def host_flags(config: RunFields, checkpoint: Path | str | None = None) -> list[str]:
    """The run's standard fields as its training program's flags, the ones
    :func:`add_host_arguments` reads back: ``--algo``, ``--mode``, ``--total-timesteps`` and
    ``--seed`` when the config has them (a budget is set when it is not None: the config allows
    no other empty value), ``checkpoint`` (the one the worker resolved) as ``--checkpoint``, and
    each standard key given. ``eval_every_checkpoint`` is a training mode's, ``eval_capture_video``
    records :data:`VIDEO_FILE`. The values were checked already (:func:`standard_key_problems`)."""
    extras = config.extras
    mode = normalize_mode(extras.get("mode"))
    flags = ["--algo", config.algo, "--mode", str(mode)]
    for name, value in (("total_timesteps", config.total_timesteps), ("seed", config.seed)):
        if value is not None:
            flags += [_flag(name), str(value)]
    if checkpoint is not None:
        flags += ["--checkpoint", str(checkpoint)]
    flags += [item for key in NUMBER_FLAGS if extras.get(key) is not None for item in (_flag(key), str(extras[key]))]
    if extras.get("eval_deterministic") is True:
        flags.append("--eval-deterministic")
    if extras.get("eval_every_checkpoint") is True and mode != "evaluate":
        flags.append("--eval-every-checkpoint")
    if isinstance(extras.get("save_replay_buffer"), bool):
        flags.append("--save-replay-buffer" if extras["save_replay_buffer"] else "--no-save-replay-buffer")
    if extras.get("eval_capture_video") is True:
        flags += ["--video", VIDEO_FILE]
    return flags


def _flag(key: str) -> str:
    return "--" + key.replace("_", "-")


def _at_least(low: int) -> Callable[[str], int]:
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            value = low - 1
        if value < low:
            raise argparse.ArgumentTypeError(f"must be an integer >= {low}, got {text!r}")
        return value

    return parse


def add_host_arguments(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """The host's fields on a training program's command line (:func:`host_flags` writes them),
    the same names for every worker whose program the host starts with them (``--env`` is the
    worker's own: env ids differ)::

        --algo A --mode train|resume|evaluate [--total-timesteps N] [--seed S]
        [--checkpoint PATH]            resume / evaluate: the checkpoint to load
        [--checkpoint-frequency N]     save every N env steps (0: at the end and on a stop)
        [--eval-episodes N] [--eval-seed S] [--eval-deterministic] [--eval-every-checkpoint]
        [--[no-]save-replay-buffer] [--eval-out eval.json] [--video out.mp4] [--torch-threads T]

    ``total_timesteps`` is None when not given (resume: the resumed run's budget; evaluate: none),
    ``torch_threads`` None when not given (the run's thread budget,
    :func:`mosaic_core.threads.pin_process_threads`), ``save_replay_buffer`` None (the algorithm's default)."""
    parser.add_argument("--algo", required=True)
    parser.add_argument("--total-timesteps", type=_at_least(1), help="the budget (training modes)")
    parser.add_argument("--seed", type=int)
    parser.add_argument("--mode", type=normalize_mode, choices=MODES, default="train")
    parser.add_argument("--checkpoint", help="resume / evaluate: the checkpoint to load")
    parser.add_argument("--checkpoint-frequency", type=_at_least(LOWEST["checkpoint_frequency"]), default=0)
    parser.add_argument("--eval-episodes", type=_at_least(LOWEST["eval_episodes"]), default=EVAL_EPISODES)
    parser.add_argument("--eval-seed", type=_at_least(LOWEST["eval_seed"]))
    parser.add_argument("--eval-deterministic", action="store_true")
    parser.add_argument(
        "--eval-every-checkpoint", action="store_true", help="evaluate each checkpoint (an eval_result event each)"
    )
    parser.add_argument(
        "--save-replay-buffer", action=argparse.BooleanOptionalAction, help="keep the replay buffer in checkpoints"
    )
    parser.add_argument("--eval-out", default=EVAL_FILE, help="where evaluate writes its result")
    parser.add_argument("--video", help="evaluate: record the first episode to this .mp4")
    parser.add_argument(
        "--torch-threads", type=_at_least(LOWEST["torch_threads"]), help="torch's threads (default: the run's budget)"
    )
    return parser
