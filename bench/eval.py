"""Episodes per second of batched policy evaluation (policy_eval mode) for several batch sizes.

    python bench/eval.py [--policy-path P] [--env-id CartPole-v1] [--episodes 32]
                         [--batch-sizes 1,4,16] [--repeats 3] [--sample]

Without ``--policy-path`` a PPO checkpoint is made first (bundled ppo, 4,096 steps, in a
temporary folder). Each batch size runs the same ``run_evaluation`` that
``python -m cleanrl_worker.policy_eval`` runs (summary, TensorBoard scalars and all), in
this process, after one warm-up. Greedy actions by default, so every batch size plays the
very same episodes (``--sample`` samples like CleanRL's evaluation instead). Prints the
median over ``--repeats`` of episodes/s and env steps/s, and the speed-up over batch size 1.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def make_checkpoint(workdir: Path, env_id: str) -> Path:
    script = REPO / "plugins" / "cleanrl_worker" / "algorithms" / "ppo.py"
    subprocess.run(
        [sys.executable, str(script), "--env-id", env_id, "--total-timesteps", "4096", "--save-model", "--no-cuda"],
        cwd=workdir,
        check=True,
        capture_output=True,
    )
    return next(workdir.glob("runs/*/ppo.cleanrl_model"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--policy-path", type=Path)
    parser.add_argument("--env-id", default="CartPole-v1")
    parser.add_argument("--episodes", type=int, default=32)
    parser.add_argument("--batch-sizes", default="1,4,16")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--sample", action="store_true", help="sample actions instead of greedy ones")
    ns = parser.parse_args()

    import torch

    from cleanrl_worker.policy_eval import EvalOptions, load_policy, run_evaluation

    torch.set_num_threads(1)  # as policy_eval does
    with tempfile.TemporaryDirectory(prefix="mosaic-bench-eval-") as tmp:
        tmp_path = Path(tmp)
        path = ns.policy_path or make_checkpoint(tmp_path, ns.env_id)
        policy = load_policy(str(path), ns.env_id, seed=1, deterministic=not ns.sample)
        print(
            f"policy_eval bench: {ns.env_id}, {ns.episodes} episodes per run, median of {ns.repeats}, "
            f"{'sampled' if ns.sample else 'greedy'} actions, torch threads 1"
        )
        print(f"{'batch':>5} {'episodes/s':>11} {'steps/s':>9} {'mean len':>9} {'mean return':>12} {'speed-up':>9}")
        baseline = None
        run = 0
        for batch in (int(b) for b in ns.batch_sizes.split(",")):
            options = EvalOptions(
                env_id=ns.env_id,
                seed=1,
                episodes=ns.episodes,
                batch_size=min(batch, ns.episodes),
                deterministic=not ns.sample,
            )
            run_evaluation(
                policy,
                EvalOptions(env_id=ns.env_id, episodes=batch, batch_size=batch),
                out_dir=tmp_path / f"warmup{batch}",
            )
            rates, summary = [], {}
            for _ in range(ns.repeats):
                run += 1
                started = time.perf_counter()
                summary = run_evaluation(policy, options, out_dir=tmp_path / f"run{run}")
                rates.append(summary["episodes"] / (time.perf_counter() - started))
            rate = statistics.median(rates)
            baseline = baseline or rate
            mean_length = summary["length"]["mean"]
            print(
                f"{batch:>5} {rate:>11.1f} {rate * mean_length:>9.0f} {mean_length:>9.1f} "
                f"{summary['return']['mean']:>12.1f} {rate / baseline:>8.2f}x"
            )


if __name__ == "__main__":
    main()
