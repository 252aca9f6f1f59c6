"""What a sweep costs: trials per minute with 1 and 2 sweep processes (--parallel) for tiny budgets, and the
overhead per trial next to the same `mosaic run`s done by hand, measured side by side.

Run by hand: nice .venv/bin/python bench/sweep.py [--trials 6] [--steps 1024] [--seeds 1]

Prints, per mode, wall time, trials per minute and seconds per trial:
  by hand     the trials' `mosaic run`s one after another (what a user would type)
  1 at a time `mosaic sweep run` on the default SQLite study
  2 at a time the same with --parallel 2
then the overhead per trial (1 at a time minus by hand, and its share), the start-up checks of a
sweep (spec, dry run, study creation: `mosaic sweep run` on an already-finished study), and the
study's own round trips (budget count, ask, heartbeat, tell) per trial on SQLite, without
training, from an in-process loop of 50 trials.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

BIN = Path(sys.executable).parent
SPEC = """
study_name = "{name}"
algo = "ppo"
env_id = "CartPole-v1"
total_timesteps = {steps}
seeds = {seeds}
max_trials = {trials}
[objective]
last_n = 5
[sampler]
type = "random"
seed = 0
[pruner]
type = "none"
[params.learning_rate]
type = "float"
low = 1e-4
high = 1e-2
log = true
"""


def timed(cmd: list[str], cwd: Path) -> float:
    started = time.perf_counter()
    subprocess.run(cmd, cwd=cwd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - started


def by_hand(workdir: Path, trials: int, seeds: int, steps: int) -> float:
    started = time.perf_counter()
    for trial in range(trials):
        for seed in range(1, seeds + 1):
            extras = json.dumps({"algo_params": {"learning_rate": 10 ** (-4 + 2 * trial / max(trials - 1, 1))}})
            subprocess.run(
                [
                    str(BIN / "mosaic"),
                    "run",
                    "--worker",
                    "cleanrl",
                    "--algo",
                    "ppo",
                    "--env-id",
                    "CartPole-v1",
                    "--total-timesteps",
                    str(steps),
                    "--seed",
                    str(seed),
                    "--quiet",
                    "--extras",
                    extras,
                ],
                cwd=workdir,
                check=True,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
    return time.perf_counter() - started


def sweep(workdir: Path, name: str, trials: int, seeds: int, steps: int, parallel: int) -> float:
    spec = workdir / f"{name}.toml"
    spec.write_text(SPEC.format(name=name, steps=steps, seeds=seeds, trials=trials))
    return timed([str(BIN / "mosaic"), "sweep", "run", str(spec), "--parallel", str(parallel)], workdir)


def round_trips(workdir: Path, trials: int = 50) -> float:
    """Seconds per trial of the study bookkeeping a sweep process does, on SQLite, with no training."""
    import optuna

    from mosaic_sweep.loop import counted
    from mosaic_sweep.storage import open_storage, resolve

    location = resolve(f"sqlite:///{workdir}/trips.db", "trips")
    storage = open_storage(location, heartbeat_s=10)
    study = optuna.create_study(study_name="trips", storage=storage, direction="maximize")
    objective = lambda trial: trial.suggest_float("x", 0, 1)
    started = time.perf_counter()
    for _ in range(trials):
        optuna.storages.fail_stale_trials(study)
        counted(study)
        study.optimize(objective, n_trials=1)
    return (time.perf_counter() - started) / trials


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=6)
    parser.add_argument("--steps", type=int, default=1024)
    parser.add_argument("--seeds", type=int, default=1)
    ns = parser.parse_args()
    trials, seeds, steps = ns.trials, ns.seeds, ns.steps
    with tempfile.TemporaryDirectory(prefix="bench-sweep-") as tmp:
        workdir = Path(tmp)
        hand = by_hand(workdir, trials, seeds, steps)
        one = sweep(workdir, "one", trials, seeds, steps, 1)
        two = sweep(workdir, "two", trials, seeds, steps, 2)
        startup = statistics.median(sweep(workdir, "one", trials, seeds, steps, 1) for _ in range(3))
        trip = round_trips(workdir)
    print(f"ppo on CartPole-v1, {steps} steps x {seeds} seed(s) per trial, {trials} trials")
    print(f"{'mode':<10} {'wall s':>8} {'trials/min':>11} {'s/trial':>8}")
    for label, wall in (("by hand", hand), ("1 at a time", one), ("2 at a time", two)):
        print(f"{label:<10} {wall:>8.1f} {60 * trials / wall:>11.2f} {wall / trials:>8.2f}")
    overhead = (one - hand) / trials
    print(f"overhead per trial, 1 at a time vs by hand: {overhead:+.2f} s ({100 * (one - hand) / hand:+.1f}%)")
    print(f"2 at a time vs 1: x{one / two:.2f} trials per minute")
    print(f"sweep start-up checks (spec, dry run, study) on a finished study: {startup:.2f} s (median of 3)")
    print(
        f"study round trips per trial (SQLite: stale check, budget count, ask, heartbeat, tell): {1000 * trip:.1f} ms"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
