"""Do the bundled algorithms learn? Train algo/env pairs over several seeds, in parallel processes.

Run by hand (it trains for real; use `nice`):
    nice .venv/bin/python bench/learning.py                       # ppo and dqn on CartPole-v1, 500k, 2 seeds
    nice .venv/bin/python bench/learning.py --pair ppo:CartPole-v1:100000 --seeds 3 --parallel 2
    nice .venv/bin/python bench/learning.py --pair "sac_continuous_action:Pendulum-v1:15000:--learning-starts 1000"
    nice .venv/bin/python bench/learning.py --via mosaic ...      # through `mosaic run` instead of the script
    nice .venv/bin/python bench/learning.py --agents MiniGrid-DoorKey-5x5-v0:100000 --seeds 3
                                      # PPO's --agent-arch documented vs original, same budget and seeds
    nice .venv/bin/python bench/learning.py --pair ppo_atari:BreakoutNoFrameskip-v4:200000 --seeds 1 \
        --cleanrl-home /tmp/cleanrl    # and the same pair from an upstream CleanRL checkout, side by side
    nice .venv/bin/python bench/learning.py --pair ppo_continuous_action:Pendulum-v1:100000 --preset tuned
                                                                  # each pair without and with a preset, side by side

A pair is ALGO:ENV_ID[:STEPS[:EXTRA FLAGS]]. Each run's score is the mean return of its last
`--last` (10) training episodes, read from its TensorBoard file; the table shows mean ± std of
that score over seeds, the mean SPS (the script's last charts/SPS), the mean wall time per
run, and CleanRL's published figure where there is one. Rows differ by algo, env, steps and
extra flags, so `--agents` puts the bundled PPO's agent architectures side by side. With
`--cleanrl-home DIR` every pair also
runs from that upstream checkout (through `mosaic run`, MOSAIC_CLEANRL_HOME=DIR, same seeds, steps
and flags; the bundled runs then go through `mosaic run` too), on a row of its own.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from pathlib import Path

BIN = Path(sys.executable).parent
ALGORITHMS = Path(__file__).resolve().parents[1] / "plugins" / "cleanrl_worker" / "algorithms"
PUBLISHED = {
    ("ppo", "CartPole-v1"): "≈490 (500k)",
    ("dqn", "CartPole-v1"): "≈489 (500k)",
    ("ppo", "Acrobot-v1"): "≈-86 (500k)",
    ("ppo_atari", "BreakoutNoFrameskip-v4"): "414.66 ± 28.09 (10M)",
    ("ppo_atari", "PongNoFrameskip-v4"): "20.36 ± 0.20 (10M)",
}
DEFAULT_PAIRS = ["ppo:CartPole-v1:500000", "dqn:CartPole-v1:500000"]


@dataclass
class Pair:
    algo: str
    env_id: str
    steps: int
    flags: list[str]
    source: str = "bundled"  # or "upstream" (from --cleanrl-home)
    preset: str | None = None  # --preset: the pair also runs with this preset (mosaic algos presets)

    @classmethod
    def parse(cls, text: str) -> Pair:
        parts = text.split(":", 3)
        if len(parts) < 2:
            raise SystemExit(f"error: --pair {text!r}: expected ALGO:ENV_ID[:STEPS[:FLAGS]]")
        steps = int(parts[2]) if len(parts) > 2 and parts[2] else 100000
        return cls(parts[0], parts[1], steps, shlex.split(parts[3]) if len(parts) > 3 else [])


@dataclass
class Outcome:
    pair: Pair
    seed: int
    score: float
    episodes: int
    sps: float
    wall: float
    error: str = ""


def agent_pairs(text: str) -> list[Pair]:
    """``ENV[:STEPS]`` → one PPO pair per ``--agent-arch`` (the same env, budget and seeds)."""
    from cleanrl_worker.agents import ARCHITECTURES

    env_id, _, steps = text.partition(":")
    return [Pair("ppo", env_id, int(steps or 100000), ["--agent-arch", arch]) for arch in ARCHITECTURES]


def flags_to_extras(flags: list[str]) -> dict:
    """``--learning-starts 1000 --no-anneal-lr`` → ``{"learning_starts": 1000, "anneal_lr": false}``."""
    extras, i = {}, 0
    while i < len(flags):
        name = flags[i].removeprefix("--").replace("-", "_")
        if i + 1 < len(flags) and not flags[i + 1].startswith("--"):
            try:
                extras[name] = json.loads(flags[i + 1])
            except json.JSONDecodeError:
                extras[name] = flags[i + 1]
            i += 2
        else:
            extras[name.removeprefix("no_")] = not name.startswith("no_")
            i += 1
    return extras


def preset_flags(pair: Pair) -> list[str]:
    """The preset's values as script flags, less those the pair's own flags set (the package's files)."""
    from cleanrl_worker.flags import extras_to_flags
    from cleanrl_worker.presets import apply_preset, find_preset, given_fields

    preset = find_preset(pair.preset, pair.algo, pair.env_id)
    return extras_to_flags(apply_preset(preset, given_fields(pair.flags)).flags)


def command(pair: Pair, seed: int, via: str, workdir: Path) -> list[str]:
    via = "mosaic" if pair.source == "upstream" else via
    base = ["--env-id", pair.env_id, "--total-timesteps", str(pair.steps), "--seed", str(seed)]
    if via == "direct":
        preset = preset_flags(pair) if pair.preset else []
        return [sys.executable, str(ALGORITHMS / f"{pair.algo}.py"), *base, "--no-cuda", *preset, *pair.flags]
    extras = {"cuda": False, **flags_to_extras(pair.flags)}
    return [
        str(BIN / "mosaic"),
        "run",
        "--worker",
        "cleanrl",
        "--algo",
        pair.algo,
        *base,
        "--quiet",
        "--runs-dir",
        str(workdir / "runs-root"),
        "--extras",
        json.dumps(extras),
        *(["--preset", pair.preset] if pair.preset else []),
    ]


def read_scalars(root: Path) -> dict[str, list[float]]:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    (events,) = list(root.rglob("events.out.tfevents.*"))
    acc = EventAccumulator(str(events.parent), size_guidance={"scalars": 0})
    acc.Reload()
    return {tag: [e.value for e in acc.Scalars(tag)] for tag in acc.Tags()["scalars"]}


def train(pair: Pair, seed: int, via: str, last: int, keep: Path | None, home: Path | None = None) -> Outcome:
    if keep is not None:
        prefix = f"{pair.algo}-{pair.env_id.replace('/', '_')}-{pair.source}-s{seed}-"
        return run_in(Path(tempfile.mkdtemp(prefix=prefix, dir=keep)), pair, seed, via, last, home)
    with tempfile.TemporaryDirectory() as tmp:
        return run_in(Path(tmp), pair, seed, via, last, home)


def run_in(workdir: Path, pair: Pair, seed: int, via: str, last: int, home: Path | None = None) -> Outcome:
    env = {k: v for k, v in os.environ.items() if k != "MOSAIC_CLEANRL_HOME"}
    if pair.source == "upstream":
        env["MOSAIC_CLEANRL_HOME"] = str(home)
    started = time.perf_counter()
    proc = subprocess.run(
        command(pair, seed, via, workdir),
        cwd=workdir,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    wall = time.perf_counter() - started
    if proc.returncode != 0:
        tail = proc.stderr.strip().splitlines()[-1:] or ["?"]
        return Outcome(pair, seed, float("nan"), 0, float("nan"), wall, error=tail[0])
    tags = read_scalars(workdir)
    returns = tags.get("charts/episodic_return", [])
    score = statistics.fmean(returns[-last:]) if returns else float("nan")
    return Outcome(pair, seed, score, len(returns), (tags.get("charts/SPS") or [float("nan")])[-1], wall)


def print_table(outcomes: list[Outcome], last: int) -> None:
    header = (
        f"{'algo':<24}{'source':<10}{'env':<26}{'preset':<8}{'flags':<26}{'steps':>9}{'seeds':>6}  "
        f"{f'return (last {last} eps)':<24}"
        f"{'SPS':>8}{'wall s':>9}  CleanRL"
    )
    print(header)
    print("-" * len(header))
    groups: dict[tuple, list[Outcome]] = {}
    for outcome in outcomes:
        pair = outcome.pair
        groups.setdefault(
            (pair.algo, pair.source, pair.env_id, pair.preset or "-", shlex.join(pair.flags), pair.steps), []
        ).append(outcome)
    for (algo, source, env_id, preset, flags, steps), group in groups.items():
        ok = [o for o in group if not o.error]
        scores = [o.score for o in ok]
        score = f"{statistics.fmean(scores):.1f} ± {statistics.pstdev(scores):.1f}" if scores else "failed"
        sps = statistics.fmean(o.sps for o in ok) if ok else float("nan")
        wall = statistics.fmean(o.wall for o in group)
        print(
            f"{algo:<24}{source:<10}{env_id:<26}{preset:<8}{flags or '-':<26}{steps:>9}{len(ok):>6}  {score:<24}"
            f"{sps:>8.0f}{wall:>9.0f}  {PUBLISHED.get((algo, env_id), '-')}"
        )
    for outcome in outcomes:
        detail = outcome.error or f"score {outcome.score:.1f} over {outcome.episodes} episodes"
        print(
            f"  {outcome.pair.algo} ({outcome.pair.source}) {outcome.pair.env_id} preset {outcome.pair.preset or '-'} "
            f"{shlex.join(outcome.pair.flags)} "
            f"seed {outcome.seed}: {detail}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pair", action="append", help="ALGO:ENV_ID[:STEPS[:FLAGS]] (repeatable)")
    parser.add_argument(
        "--agents",
        action="append",
        metavar="ENV[:STEPS]",
        help="PPO on ENV once per --agent-arch (repeatable), beside any --pair",
    )
    parser.add_argument("--seeds", type=int, default=2, help="seeds 1..K per pair")
    parser.add_argument("--parallel", type=int, default=2, help="training processes at a time")
    parser.add_argument(
        "--via", choices=("direct", "mosaic"), default="direct", help="run the scripts directly or through `mosaic run`"
    )
    parser.add_argument("--last", type=int, default=10, help="episodes averaged for a run's score")
    parser.add_argument("--keep", type=Path, default=None, help="keep run directories under this folder")
    parser.add_argument(
        "--cleanrl-home",
        type=Path,
        default=None,
        help="an upstream CleanRL checkout: run every pair from it too, side by side",
    )
    parser.add_argument("--preset", help="also run each pair with this preset (e.g. tuned): a row without, a row with")
    args = parser.parse_args()
    pairs = [Pair.parse(text) for text in (args.pair or ([] if args.agents else DEFAULT_PAIRS))]
    pairs += [pair for text in args.agents or [] for pair in agent_pairs(text)]
    if args.cleanrl_home is not None:
        args.via = "mosaic"
        pairs = [p for pair in pairs for p in (pair, Pair(pair.algo, pair.env_id, pair.steps, pair.flags, "upstream"))]
    if args.preset:
        pairs = [replace(pair, preset=preset) for pair in pairs for preset in (None, args.preset)]
    if args.keep:
        args.keep.mkdir(parents=True, exist_ok=True)
    jobs = [(pair, seed) for pair in pairs for seed in range(1, args.seeds + 1)]
    print(f"training {len(jobs)} runs, {args.parallel} at a time, via {args.via} ...", file=sys.stderr)
    with ThreadPoolExecutor(args.parallel) as pool:
        outcomes = list(pool.map(lambda job: train(*job, args.via, args.last, args.keep, args.cleanrl_home), jobs))
    print_table(outcomes, args.last)


if __name__ == "__main__":
    main()
