"""``mosaic evaluate RUN|CHECKPOINT [--episodes N] [--deterministic] [--video out.mp4] [--seed S]``:
one evaluation protocol for every worker (docs/run-contract.md).

The run's worker plays the checkpoint (the run's newest, by the worker's ``checkpoint_layout``,
or the file given) in mode ``evaluate``: a supervised run like any other, whose directory is
``RUN_DIR/evaluations/<id>/`` (so ``mosaic runs`` never lists it as a training run; ``mosaic
runs show RUN`` does, under its run). Its training program writes ``eval.json``
(``mosaic.eval/1``); this command prints its summary.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import shutil
import sys
from pathlib import Path
from typing import Any

from mosaic_core.errors import UsageError
from mosaic_core.files import atomic_output, check_output, open_private
from mosaic_core.jsontext import dumps

EVALUATIONS = "evaluations"


def configure(parser: argparse.ArgumentParser) -> None:
    from mosaic_core.contract import EVAL_EPISODES, EVAL_SEED_OFFSET

    parser.add_argument(
        "target",
        metavar="RUN|CHECKPOINT",
        help="a run id (any unique prefix) or directory: its newest checkpoint; or a checkpoint inside a run directory",
    )
    parser.add_argument("--episodes", type=int, default=EVAL_EPISODES, help=f"episodes (default {EVAL_EPISODES})")
    parser.add_argument("--deterministic", action="store_true", help="the greedy / mean action")
    parser.add_argument(
        "--seed",
        type=int,
        help=f"the first episode's seed (default: the run's seed + {EVAL_SEED_OFFSET:,}, never one training used)",
    )
    parser.add_argument("--video", metavar="OUT.mp4", help="record the first episode to this file")
    parser.add_argument("--runs-dir", help="runs root (default var/trainer/runs, or $MOSAIC_RUNS_DIR)")
    parser.add_argument("--json", action="store_true", help="print eval.json instead of a summary line")


def resolve(target: str, root: Path) -> tuple[Path, Path | None]:
    """(run directory, checkpoint file or None for the newest) that ``target`` names."""
    from mosaic_core.runs import find_run_dir

    given = Path(target).expanduser()
    if "/" in target or given.exists():
        if not given.exists():
            raise UsageError(f"checkpoint {target}: no such file or directory")
        if given.is_dir() and (given / "config.json").is_file() and (given / "events.jsonl").exists():
            return given.absolute(), None  # a run directory: its newest checkpoint
        for folder in given.absolute().parents:
            if (folder / "config.json").is_file() and (folder / "events.jsonl").exists():
                return folder, given.absolute()
        raise UsageError(
            f"checkpoint {target} is not inside a run directory (no config.json above it): "
            "evaluate a checkpoint of a recorded run"
        )
    return find_run_dir(root, target), None


def run(ns: argparse.Namespace) -> int:
    if ns.video and not ns.video.endswith(".mp4"):
        raise UsageError(f"--video {ns.video}: the file's name must end in .mp4")
    code, result, result_file = play(ns, video_format="mp4" if ns.video else None, live=False, prog="mosaic evaluate")
    if result is None:
        return code
    if ns.json:
        print(dumps(result, indent=2))
    else:
        print(
            f"{result['algo']} on {result['env_id']} at step {result['global_step']}: {len(result['episodes'])} "
            f"episodes, return {result['mean']:.2f} ± {result['std']:.2f} (IQM {result['iqm']:.2f}); {result_file}"
        )
    return 0


def play(
    ns: argparse.Namespace, *, video_format: str | None, live: bool, prog: str
) -> tuple[int, dict[str, Any] | None, Path]:
    """Evaluate ``ns.target`` (``ns.episodes``, ``ns.seed``, ``ns.deterministic``, ``ns.video``,
    ``ns.runs_dir``) through its worker's ``evaluate`` mode, recording the first episode as
    ``video_format`` and, with ``live``, streaming it through FastLane: (exit code, the
    evaluation's ``eval.json`` or None when it wrote none, that file's path)."""
    from mosaic_core import hostsignals
    from mosaic_core.config import new_run_id
    from mosaic_core.contract import eval_seeds
    from mosaic_core.pipeline import run_worker
    from mosaic_core.runstore.index import record_run

    _check_play_flags(ns)
    run_dir, given, worker_name, worker, config = _recorded_run(ns)
    showing = worker.enjoy_extras(video_format=video_format, live=live)
    if showing is None:
        asked = " and ".join(what for what, on in ((f"a .{video_format} video", video_format), ("--live", live)) if on)
        raise UsageError(f"run {run_dir.name}: worker {worker_name!r} cannot play with {asked}")
    found = _checkpoint_to_play(run_dir, given, worker, worker_name, config)
    seed = ns.seed if ns.seed is not None else eval_seeds(1, config.seed)[0]
    extras: dict[str, Any] = {
        "mode": "evaluate",
        "checkpoint_path": str(found.path),
        "eval_episodes": ns.episodes,
        "eval_deterministic": ns.deterministic,
        **showing,
    }
    evaluation_id = f"eval-{new_run_id()}"
    argv = [
        "--config",
        str(run_dir / "config.json"),
        "--run-id",
        evaluation_id,
        "--runs-dir",
        str(run_dir / EVALUATIONS),
        "--seed",
        str(seed),
        "--extras",
        json.dumps(extras),
        "--quiet",
    ]
    print(
        f"mosaic: evaluating {found.path.name} of run {run_dir.name} ({ns.episodes} episodes, first seed {seed})"
        + (f"; its live frames: run {evaluation_id} (the dashboard, or your frame viewer)" if live else ""),
        file=sys.stderr,
    )
    try:
        with hostsignals.guarded(), contextlib.redirect_stdout(sys.stderr):  # stdout: the result only
            code = run_worker(worker_name, argv, prog=prog)
    finally:
        record_run(run_dir)  # its score may change: its listed row is read again
    where = run_dir / EVALUATIONS / evaluation_id
    result_file = where / "eval.json"
    if code != 0 or not result_file.is_file():
        if code == 0:
            print(f"mosaic: error: worker {worker_name!r} wrote no eval.json in {where}", file=sys.stderr)
        return code or 1, None, result_file
    result = json.loads(result_file.read_text(encoding="utf-8"))
    if ns.video:
        _copy_video(where, Path(ns.video))
    return 0, result, result_file


def _check_play_flags(ns: argparse.Namespace) -> None:
    if ns.episodes < 1:
        raise UsageError(f"--episodes must be at least 1, got {ns.episodes}")
    if ns.seed is not None and ns.seed < 0:
        raise UsageError(f"--seed must be at least 0, got {ns.seed}")
    if ns.video:
        check_output(ns.video, "--video")  # before the evaluation: a link or a foreign folder there is refused now


def _recorded_run(ns: argparse.Namespace) -> tuple[Path, Path | None, str, Any, Any]:
    """The run ``ns.target`` names (and the checkpoint file it names, if it does), its worker's
    name and implementation, and its recorded config (:func:`~mosaic_core.workers.recorded_run`)."""
    from mosaic_core.runs import default_runs_root
    from mosaic_core.workers import recorded_run

    root = Path(ns.runs_dir).absolute() if ns.runs_dir else default_runs_root()
    run_dir, given = resolve(ns.target, root)
    return (run_dir, given, *recorded_run(run_dir))


def _checkpoint_to_play(run_dir: Path, given: Path | None, worker: Any, worker_name: str, config: Any) -> Any:
    """The checkpoint given, else the run's newest; one the worker cannot play is a usage error."""
    from mosaic_core.contract import Checkpoint, newest_checkpoint

    layout = worker.checkpoint_layout(config)
    if given is None:
        found = newest_checkpoint(run_dir, layout, run_dir.name) if layout else None
        if found is None:
            what = f"no checkpoint ({layout.pattern})" if layout else f"no checkpoint layout (worker {worker_name!r})"
            raise UsageError(f"run {run_dir.name} has {what} to evaluate; give a checkpoint file instead")
    else:
        found = Checkpoint(given, -1, layout.format if layout else "", bool(layout and layout.code))
    problem = worker.check_checkpoint(found, config)
    if problem:
        raise UsageError(f"cannot evaluate: {problem}")
    return found


def _copy_video(where: Path, out: Path) -> None:
    """The evaluation's first video (encoded in the run's own evaluation folder) to ``out``,
    through the one writer of user-named outputs: never through a link, never into a name
    another user made."""
    videos = sorted(where.rglob("*" + out.suffix.lower()))
    if not videos:
        print(f"mosaic: warning: the evaluation recorded no {out.suffix} in {where}", file=sys.stderr)
        return
    with open_private(videos[0]) as source, atomic_output(out, flag="--video") as target:
        shutil.copyfileobj(source, target)
