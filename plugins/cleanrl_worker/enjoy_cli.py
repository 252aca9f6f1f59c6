"""``mosaic enjoy RUN_OR_CHECKPOINT``: watch a trained policy (RL Zoo's ``enjoy.py``).

    mosaic enjoy RUN [--episodes N] [--video out.gif|out.mp4] [--live] [--seed S] [--deterministic]

RUN is a run id (or a unique prefix), a run directory, or a ``.cleanrl_model`` file. From a run,
its ``best.cleanrl_model`` is played when it has one, else its latest checkpoint.

It is a normal supervised run of the CleanRL worker in ``policy_eval`` mode, through the
host's pipeline (:mod:`mosaic_core.pipeline`): the policy loop is the one policy evaluation
uses, and the run gets a directory, ``events.jsonl``, a manifest and, with ``--live``,
FastLane frames paced at the env's frame rate (``mosaic fastlane watch RUN_ID``) — nothing
is written twice. Per-episode returns are printed from the run's ``eval_summary.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
from pathlib import Path
from typing import Any

from mosaic_core import UsageError

SUFFIX = ".cleanrl_model"
BEST = "best" + SUFFIX


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("target", metavar="RUN_OR_CHECKPOINT",
                        help="a run id (or unique prefix), a run directory, or a .cleanrl_model file")
    parser.add_argument("--episodes", type=int, default=3, help="episodes to play (default 3)")
    parser.add_argument("--video", metavar="OUT", help="write the first episode to OUT (.gif, or .mp4 with moviepy)")
    parser.add_argument("--live", action="store_true",
                        help="stream frames through FastLane at the env's frame rate (mosaic fastlane watch RUN_ID)")
    parser.add_argument("--seed", type=int, default=1, help="episode k starts from env seed SEED + k (default 1)")
    parser.add_argument("--deterministic", action="store_true", help="greedy / mean actions instead of sampling")
    parser.add_argument("--env-id", help="play on another env with the same spaces (default: the checkpoint's)")
    parser.add_argument("--runs-dir", help="runs root (default var/trainer/runs, or $MOSAIC_RUNS_DIR)")
    parser.add_argument("--run-id", help="id of the enjoy run itself (default: a new ULID)")
    parser.add_argument("--json", action="store_true", help="print the evaluation summary as JSON")


def _runs_root(ns: argparse.Namespace) -> Path:
    from mosaic_core import default_runs_root

    return Path(ns.runs_dir).absolute() if ns.runs_dir else default_runs_root()


def run_checkpoint(run_dir: Path) -> Path:
    """The checkpoint to play from a run: its best one, else its latest (by saved step)."""
    from cleanrl_worker.experiments import NamedRun

    best = sorted(run_dir.rglob(BEST), key=lambda p: p.stat().st_mtime)
    if best:
        return best[-1]
    latest = NamedRun(run_dir, {}, 0.0).latest_checkpoint()
    if latest:
        return latest[0]
    found = sorted(run_dir.rglob("*" + SUFFIX), key=lambda p: p.stat().st_mtime)
    if not found:
        raise UsageError(f"run {run_dir.name} has no checkpoint ({SUFFIX}): it ran with --no-save, ended before "
                         "saving, or its script cannot save; a run without --no-save keeps its final model")
    return found[-1]


def resolve_target(ns: argparse.Namespace) -> tuple[Path, str]:
    """(checkpoint, env id) that ``RUN_OR_CHECKPOINT`` names."""
    from mosaic_core import find_run_dir

    target = Path(ns.target).expanduser()
    if target.is_file():
        return target.resolve(), ns.env_id or _checkpoint_env(target)
    if target.is_dir() and (target / "config.json").is_file():
        run_dir = target
    elif target.suffix == SUFFIX or os.sep in ns.target:
        raise UsageError(f"{ns.target}: no such checkpoint or run directory")
    else:
        run_dir = find_run_dir(_runs_root(ns), ns.target)
    checkpoint = run_checkpoint(run_dir).resolve()
    if ns.env_id:
        return checkpoint, ns.env_id
    try:
        env_id = json.loads((run_dir / "config.json").read_text(encoding="utf-8"))["env_id"]
    except (OSError, ValueError, KeyError, TypeError):
        env_id = None
    return checkpoint, env_id if isinstance(env_id, str) else _checkpoint_env(checkpoint)


def _checkpoint_env(path: Path) -> str:
    from cleanrl_worker.checkpoint import load_checkpoint

    return str(load_checkpoint(path)["env_id"])  # a CheckpointError says what is wrong with the file


def _check(ns: argparse.Namespace) -> str | None:
    """The video format, after refusing bad flags."""
    if ns.episodes < 1:
        raise UsageError(f"--episodes must be an integer >= 1, got {ns.episodes}")
    if ns.seed < 0:
        raise UsageError(f"--seed must be an integer >= 0, got {ns.seed}")
    if ns.video is None:
        return None
    video = Path(ns.video)
    fmt = video.suffix.lower().lstrip(".")
    if fmt not in ("gif", "mp4"):
        raise UsageError(f"--video {ns.video}: give a .gif or .mp4 file name")
    if fmt == "mp4":
        import importlib.util

        if importlib.util.find_spec("moviepy") is None:
            raise UsageError(f"--video {ns.video}: MP4 needs moviepy (pip install -e '.[video]'); or give a .gif")
    if not video.absolute().parent.is_dir():
        raise UsageError(f"--video {ns.video}: folder {video.absolute().parent} does not exist")
    return fmt


def run_argv(ns: argparse.Namespace, checkpoint: Path, env_id: str, fmt: str | None) -> list[str]:
    """The ``mosaic run --worker cleanrl`` flags of this enjoy run."""
    extras: dict[str, Any] = {"mode": "policy_eval", "policy_path": str(checkpoint), "eval_episodes": ns.episodes,
                              "eval_batch_size": 1, "eval_deterministic": ns.deterministic}
    if fmt:
        extras.update(eval_capture_video=True, eval_video_format=fmt)
    if ns.live:
        extras.update(fastlane=True, eval_realtime=True)
    argv = ["--env-id", env_id, "--seed", str(ns.seed), "--extras", json.dumps(extras)]
    for flag, value in (("--runs-dir", ns.runs_dir), ("--run-id", ns.run_id)):
        if value:
            argv += [flag, value]
    return argv


def run(ns: argparse.Namespace) -> int:
    from mosaic_core import HostOptions, execute, host_parser, plugin_host, prepare_from_flags, worker_option_defaults
    from mosaic_core import find_worker, load_worker

    fmt = _check(ns)
    other = _other_worker_run(ns)
    if other is not None:
        return _enjoy_other(ns, *other)
    checkpoint, env_id = resolve_target(ns)
    item = find_worker("cleanrl")
    worker = load_worker(item)
    watched = not ns.json and sys.stdout.isatty()  # the run's own lines and bar at a terminal only: stdout stays ours
    argv = run_argv(ns, checkpoint, env_id, fmt) + ([] if watched else ["--quiet"])
    run_ns = host_parser("mosaic enjoy", "cleanrl", "").parse_args(argv)
    host = plugin_host()
    prepared = prepare_from_flags(item, worker, run_ns, worker_option_defaults(worker), host)
    run_dir = prepared.run.run_dir
    print(f"enjoy: run {prepared.config.run_id}: {checkpoint} on {env_id}"
          + (f"; watch it: mosaic fastlane watch {prepared.config.run_id}" if ns.live else ""), file=sys.stderr)
    code = execute(prepared, HostOptions(quiet=True, json=False), host)
    summary = _summary(run_dir)
    if summary is None:
        print(f"enjoy: the run ended with code {code} before any episode; see {run_dir / 'logs'}", file=sys.stderr)
        return code or 1
    if ns.video and code == 0:
        _copy_video(run_dir, summary, Path(ns.video))
    _print(summary, ns, run_dir)
    return code


# What a run's extras may not carry into its replay: the training run's mode and checkpoints.
_TRAINING_ONLY = ("mode", "checkpoint_path", "policy_path", "checkpoint_frequency", "eval_episodes")


def _other_worker_run(ns: argparse.Namespace) -> tuple[Path, dict[str, Any]] | None:
    """(run directory, recorded config) when the target is a run of another worker."""
    from mosaic_core import find_run_dir

    target = Path(ns.target).expanduser()
    if target.is_file() or target.suffix == SUFFIX:
        return None
    run_dir = target if (target / "config.json").is_file() else None
    if run_dir is None and os.sep not in ns.target:
        run_dir = find_run_dir(_runs_root(ns), ns.target)
    if run_dir is None:
        return None
    try:
        config = json.loads((run_dir / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    worker = config.get("worker") if isinstance(config, dict) else None
    return (run_dir, config) if isinstance(worker, str) and worker != "cleanrl" else None


def _enjoy_other(ns: argparse.Namespace, run_dir: Path, config: dict[str, Any]) -> int:
    """A run of another worker, replayed through that worker's ``policy_eval`` mode (the same
    ``mode`` / ``policy_path`` / ``eval_episodes`` extras the CleanRL worker reads) as a normal
    supervised run; its ``eval_summary.json`` is printed."""
    from mosaic_core import run_worker
    from mosaic_core.runstore.trust import refuse_untrusted

    refuse_untrusted(run_dir, f"mosaic enjoy {run_dir.name}")  # its config would run, its checkpoint may be code
    if ns.video or ns.live or ns.env_id:
        raise UsageError(f"run {run_dir.name} is a {config['worker']} run: --video, --live and --env-id are "
                         "for CleanRL runs (watch its frames with fastlane extras through mosaic run)")
    extras = {k: v for k, v in (config.get("extras") or {}).items() if k not in _TRAINING_ONLY}
    extras.update(mode="policy_eval", policy_path=str(run_dir.absolute()), eval_episodes=ns.episodes)
    watched = not ns.json and sys.stdout.isatty()  # at a terminal, the run's own lines say what it is doing
    argv = ["--algo", str(config.get("algo")), "--env-id", str(config.get("env_id")), "--total-timesteps", "1",
            "--seed", str(ns.seed), "--extras", json.dumps(extras), *([] if watched else ["--quiet"])]
    for flag, value in (("--runs-dir", ns.runs_dir), ("--run-id", ns.run_id)):
        if value:
            argv += [flag, value]
    code = run_worker(config["worker"], argv, prog="mosaic enjoy")
    summaries = sorted(_runs_root(ns).glob("*/eval_summary.json"), key=lambda p: p.stat().st_mtime)
    if code == 0 and summaries:
        summary = json.loads(summaries[-1].read_text(encoding="utf-8"))
        print(json.dumps(summary, indent=2) if ns.json else
              f"mean return {summary['return']['mean']:.2f} ± {summary['return']['std']:.2f} over "
              f"{summary['episodes']} episode(s); run: {summaries[-1].parent}")
    return code


def _summary(run_dir: Path) -> dict[str, Any] | None:
    try:
        summary = json.loads((run_dir / "eval_summary.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return summary if isinstance(summary, dict) and summary.get("returns") else None


def _copy_video(run_dir: Path, summary: dict[str, Any], out: Path) -> None:
    """The first episode's video to ``out`` (written beside it, then renamed: a link at ``out`` is
    replaced, never followed)."""
    videos = [run_dir / v for v in summary.get("videos") or [] if v.endswith(out.suffix.lower())]
    if not videos:
        raise UsageError(f"the run {run_dir.name} recorded no {out.suffix} video (see its logs/)")
    tmp = out.absolute().with_name(f".{out.name}.{os.getpid()}.tmp")
    try:
        shutil.copyfile(sorted(videos)[0], tmp)
        os.replace(tmp, out)
    finally:
        tmp.unlink(missing_ok=True)


def _print(summary: dict[str, Any], ns: argparse.Namespace, run_dir: Path) -> None:
    if ns.json:
        print(json.dumps({**summary, "run_dir": str(run_dir), "video": ns.video}, indent=2))
        return
    for index, (ret, length) in enumerate(zip(summary["returns"], summary["lengths"]), start=1):
        print(f"episode {index}: return {ret:.2f}, length {length}")
    stats, info = summary["return"], summary.get("checkpoint") or {}
    print(f"mean return {stats['mean']:.2f} ± {stats['std']:.2f} over {summary['episodes']} episode(s) of "
          f"{summary['env_id']} ({info.get('algo')} checkpoint at step {info.get('global_step')}; "
          f"{summary['status']})")
    if ns.video:
        print(f"video: {ns.video}")
    print(f"run: {run_dir}")
