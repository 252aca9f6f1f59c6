"""``mosaic enjoy RUN|CHECKPOINT [--episodes N] [--video OUT.gif|OUT.mp4] [--live] [--seed S] [--deterministic]``:
watch a trained policy (RL Zoo's ``enjoy.py``), for every worker.

The same contract as ``mosaic evaluate`` (:mod:`mosaic_core.cli.evaluate`): the run's worker plays
its newest checkpoint (or the one given) in mode ``evaluate`` as an evaluation of the run
(``RUN_DIR/evaluations/<id>/``, never a new training run), and this command prints the
per-episode returns of that evaluation's own ``eval.json``. ``--video`` and ``--live`` (FastLane
frames at the env's pace: ``mosaic fastlane watch ID``) are asked of the worker through its
``enjoy_extras``; a worker that cannot record or stream is refused in one line.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from mosaic_core.errors import UsageError
from mosaic_core.jsontext import dumps

EPISODES = 3  # a look at the policy, not a measurement (mosaic evaluate's default is the protocol's)
FORMATS = ("gif", "mp4")


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "target",
        metavar="RUN|CHECKPOINT",
        help="a run id (any unique prefix) or directory: its newest checkpoint; or a checkpoint inside a run directory",
    )
    parser.add_argument("--episodes", type=int, default=EPISODES, help=f"episodes to play (default {EPISODES})")
    parser.add_argument("--video", metavar="OUT", help="write the first episode to OUT (.gif or .mp4)")
    parser.add_argument(
        "--live",
        action="store_true",
        help="publish live frames at the env's frame rate (to the run's frame source: the dashboard shows them)",
    )
    parser.add_argument("--seed", type=int, help="the first episode's seed (default: mosaic evaluate's)")
    parser.add_argument("--deterministic", action="store_true", help="greedy / mean actions instead of sampling")
    parser.add_argument("--runs-dir", help="runs root (default var/trainer/runs, or $MOSAIC_RUNS_DIR)")
    parser.add_argument("--json", action="store_true", help="print the evaluation's eval.json")


def run(ns: argparse.Namespace) -> int:
    from mosaic_core.cli.evaluate import play

    video_format = None
    if ns.video:
        video_format = Path(ns.video).suffix.lower().lstrip(".")
        if video_format not in FORMATS:
            raise UsageError(f"--video {ns.video}: give a .gif or .mp4 file name")
    code, result, result_file = play(ns, video_format=video_format, live=ns.live, prog="mosaic enjoy")
    if result is None:
        return code
    if ns.json:
        print(dumps(result, indent=2))
        return 0
    for index, episode in enumerate(result["episodes"], start=1):
        print(f"episode {index}: return {episode['return']:.2f}, length {episode['length']}")
    print(
        f"mean return {result['mean']:.2f} ± {result['std']:.2f} over {len(result['episodes'])} episode(s) of "
        f"{result['env_id']} ({result['algo']} checkpoint at step {result['global_step']})"
    )
    if ns.video:
        print(f"video: {ns.video}")
    print(f"evaluation: {result_file}")
    return 0
