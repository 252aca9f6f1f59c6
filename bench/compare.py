"""Benchmark: what `mosaic compare` costs on 1,000 runs × 200 points, and how often its 95% CIs
cover the truth on synthetic seeds (prints figures; nothing is asserted).

    .venv/bin/python bench/compare.py [--runs 1000] [--points 200] [--draws 200]

1. aggregation (goal ≤ 2 s): each run's score from its 200 (step, return) points (the one
   score's window), the 1,000 runs on one step grid, the IQM curve with its bootstrap band
   (200 replications), and the table (IQM, median, mean, optimality gap, 2,000 replications);
2. the dashboard's Compare page with 50 live runs (5 groups × 10 seeds, 500 episodes each in
   their TensorBoard files): the time of one refresh of its numbers (``GET /api/groups``: every
   episode read, the first time and then from where the last look ended, IQM bands, scores);
3. coverage: seeds drawn from N(100, 20²) (IQM 100), the IQM's 95% CI computed ``--draws``
   times for 5, 10 and 20 seeds; the share of CIs that hold 100.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "plugins"))
sys.path.insert(0, str(REPO))


def aggregation(runs: int, points: int) -> None:
    import numpy as np

    from mosaic_core.runstore.score import training_score
    from mosaic_experiments import report, stats

    rng = np.random.default_rng(0)
    series = []
    for _ in range(runs):  # episodes end at uneven steps; returns climb with noise
        steps = np.sort(rng.integers(1, 100_000, points))
        series.append(list(zip(steps.tolist(), (500 * steps / 100_000 + rng.normal(0, 40, points)).tolist())))
    started = time.perf_counter()
    scores = [training_score(s).value for s in series]
    scored = time.perf_counter()
    grid, values = report.score_matrix(series)
    aligned = time.perf_counter()
    stats.iqm_curve(values)
    curved = time.perf_counter()
    stats.aggregate(np.array(scores)[:, None], gamma=475.0)
    tabled = time.perf_counter()
    print(
        f"aggregating {runs} runs × {points} points: {tabled - started:.2f} s (goal ≤ 2 s): scores "
        f"{scored - started:.2f} s, step grid {aligned - scored:.2f} s, IQM curve + band "
        f"({stats.CURVE_REPS} reps) {curved - aligned:.2f} s, table ({stats.REPS} reps) {tabled - curved:.2f} s"
    )


def live_page(runs: int = 50, episodes: int = 500) -> None:
    import json
    import tempfile

    from torch.utils.tensorboard import SummaryWriter

    from mosaic_dashboard.groups import group_view

    with tempfile.TemporaryDirectory() as scratch:
        dirs = []
        for index in range(runs):
            run_dir = Path(scratch) / f"live-{index}"
            run_dir.mkdir()
            (run_dir / "config.json").write_text(
                json.dumps(
                    {
                        "run_id": run_dir.name,
                        "worker": "cleanrl",
                        "algo": "ppo",
                        "env_id": "CartPole-v1",
                        "total_timesteps": 100_000,
                        "seed": index,
                        "extras": {"algo_params": {"learning_rate": index % 5}},
                    }
                )
            )
            started = {"event": "run_started", "run_id": run_dir.name, "seq": 0, "timestamp": 0, "payload": {}}
            (run_dir / "events.jsonl").write_text(json.dumps(started) + "\n")
            writer = SummaryWriter(str(run_dir / "runs" / run_dir.name))
            for i in range(episodes):
                writer.add_scalar("charts/episodic_return", float(i % 200), 100 * i)
            writer.close()
            dirs.append(run_dir)
        for look in ("first", "next"):
            started = time.perf_counter()
            view = group_view(dirs)
            print(
                f"dashboard Compare page, {runs} live runs in {len(view['groups'])} groups × {episodes} episodes: "
                f"{time.perf_counter() - started:.2f} s a refresh, the {look} look (it refreshes every 3 s)"
            )


def coverage(draws: int) -> None:
    import numpy as np

    from mosaic_experiments import stats

    rng = np.random.default_rng(1)
    for seeds in (5, 10, 20):
        started = time.perf_counter()
        hits = 0
        for draw in range(draws):
            estimate = stats.aggregate(rng.normal(100, 20, size=(seeds, 1)), reps=1000, seed=draw)["IQM"]
            hits += estimate.low <= 100 <= estimate.high
        print(
            f"coverage of the IQM's 95% CI, {seeds:2d} seeds: {hits / draws:.1%} of {draws} draws "
            f"({time.perf_counter() - started:.0f} s)"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=1000)
    parser.add_argument("--points", type=int, default=200)
    parser.add_argument("--draws", type=int, default=200, help="coverage draws per seed count (0: none)")
    ns = parser.parse_args()
    import rliable.library  # noqa: F401  (imported before the clock starts, as in a long-lived process)

    aggregation(ns.runs, ns.points)
    live_page()
    if ns.draws:
        coverage(ns.draws)


if __name__ == "__main__":
    main()
