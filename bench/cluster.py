"""Benchmark: a fixed sweep here vs on a two-node loopback Ray cluster, and what going through
Ray adds to one run (prints figures; nothing is asserted).

    .venv/bin/python bench/cluster.py [--trials 4] [--timesteps 1024] [--runs 3]

Starts a real two-node Ray cluster on loopback (tests/ray_launcher/loopback.py: own temp dirs,
free ports, a fresh token; stopped by pid at the end), then:
1. per-run overhead: the example worker with a tiny budget, ``mosaic run`` here vs with
   ``--ray-address`` (median wall seconds of ``--runs`` runs each);
2. trials per minute: the same 4-trial ppo sweep (1 seed, ``--timesteps`` steps) with
   ``--parallel 2`` here, and with ``--parallel 2 --ray-address`` (1 CPU per run).
On one machine both sides share the same cores: the cluster shows its overhead, not a speed-up;
on N machines the trial rate scales with the nodes' cores.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests.ray_launcher.loopback import LoopbackCluster  # noqa: E402

BIN = Path(sys.executable).parent
RAY_GOAL_S = 1.0  # what going through Ray may add to one run
SPEC = """
study_name = "bench"
algo = "ppo"
env_id = "CartPole-v1"
total_timesteps = {timesteps}
seeds = 1
max_trials = {trials}
[objective]
metric = "charts/episodic_return"
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


def timed(
    command: list[str], env: dict[str, str], cwd: Path, phases: list[tuple[float, float, float]] | None = None
) -> float:
    """Wall seconds of ``command``; with ``phases``, also appends (start to run_started, run_started
    to the terminal event, terminal event to exit) read from the JSON events it printed."""
    started, wall_started = time.monotonic(), time.time()
    done = subprocess.run(command, env=env, cwd=cwd, capture_output=True, text=True, timeout=1800)
    if done.returncode != 0:
        raise SystemExit(f"failed ({done.returncode}): {' '.join(command)}\n{done.stderr[-2000:]}")
    seconds = time.monotonic() - started
    if phases is not None:
        events = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
        first, last = events[0]["timestamp"], events[-1]["timestamp"]
        phases.append((first - wall_started, last - first, wall_started + seconds - last))
    return seconds


def medians(phases: list[tuple[float, float, float]]) -> str:
    start, run, end = (statistics.median(values) for values in zip(*phases))
    return f"start {start:.2f} s, run {run:.2f} s, end {end:.2f} s"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=4)
    parser.add_argument("--timesteps", type=int, default=1024)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="mosaic-bench-cluster-"))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MOSAIC_", "RAY_"))}
    started = time.monotonic()
    cluster = LoopbackCluster(cpus_per_node=1).start()
    print(f"two-node loopback cluster up in {time.monotonic() - started:.1f} s ({cluster.address})", flush=True)
    ray_env = {**env, **cluster.client_env()}
    try:
        run = [
            str(BIN / "mosaic"),
            "run",
            "--worker",
            "example",
            "--env-id",
            "CartPole-v1",
            "--total-timesteps",
            "2000",
            "--json",
        ]
        here, ray, here_phases, ray_phases = [], [], [], []
        for _ in range(args.runs):  # alternated: the machine's noise hits both alike
            here.append(timed([*run, "--runs-dir", str(work / "runs-here")], env, work, here_phases))
            ray.append(
                timed(
                    [*run, "--runs-dir", str(work / "runs-ray"), "--ray-address", cluster.address],
                    ray_env,
                    work,
                    ray_phases,
                )
            )
        h, r = statistics.median(here), statistics.median(ray)
        print(
            f"one run (example worker, 2000 steps), median of {args.runs}, load {os.getloadavg()[0]:.1f}: here "
            f"{h:.2f} s, through Ray {r:.2f} s, overhead {r - h:+.2f} s per run ({r / h:.2f}x; goal <= "
            f"+{RAY_GOAL_S:.0f} s: {'ok' if r - h <= RAY_GOAL_S else 'OVER'})",
            flush=True,
        )
        print(
            f"  here: {medians(here_phases)}; through Ray: {medians(ray_phases)} (start: to run_started; "
            "end: the terminal event to the exit)",
            flush=True,
        )
        spec = work / "spec.toml"
        spec.write_text(SPEC.format(timesteps=args.timesteps, trials=args.trials), encoding="utf-8")
        rates = {}
        for name, extra, run_env in (("here", [], env), ("ray", ["--ray-address", cluster.address], ray_env)):
            sweep = [
                str(BIN / "mosaic"),
                "sweep",
                "run",
                str(spec),
                "--parallel",
                "2",
                "--storage",
                f"sqlite:///{work / f'{name}.db'}",
                "--runs-dir",
                str(work / f"sweep-{name}"),
                *extra,
            ]
            seconds = timed(sweep, run_env, work)
            rates[name] = args.trials / seconds * 60
            print(
                f"sweep {name}: {args.trials} trials ({args.timesteps} ppo steps each) in {seconds:.1f} s = "
                f"{rates[name]:.2f} trials/min",
                flush=True,
            )
        print(
            f"trials per minute: here {rates['here']:.2f}, 2-node loopback Ray {rates['ray']:.2f} "
            f"(ratio {rates['ray'] / rates['here']:.2f})"
        )
    finally:
        left = cluster.stop()
        shutil.rmtree(work, ignore_errors=True)
        if left:
            print(f"warning: Ray processes left: {left}", file=sys.stderr)


if __name__ == "__main__":
    main()
