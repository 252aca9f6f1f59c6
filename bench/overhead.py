"""The cost of running under MOSAIC: the same training run launched directly
(`python script.py ...`) and through `mosaic run`, side by side, alternating.

Run by hand: .venv/bin/python bench/overhead.py [--algo ppo] [--steps 20000] [--repeat 3]
                                                [--compare OTHER_VENV_BIN]
Prints wall time and SPS (the script's last charts/SPS) per launch, the ratios mosaic / direct
(goal: wall ratio <= 1.03, SPS ratio >= 0.97) and the fixed cost of `mosaic run` (median of the
paired wall-time differences; goal < 0.2 s on a 512-step run), plus the dry-run wall time next
to `python -c pass`. `--compare` adds a third launch per round through another installation's
`mosaic` (e.g. an older checkout's .venv/bin), so before and after are measured side by side.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

BIN = Path(sys.executable).parent
ALGORITHMS = Path(__file__).resolve().parents[1] / "plugins" / "cleanrl_worker" / "algorithms"


def last_sps(root: Path) -> float:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    values = []
    for events in root.rglob("events.out.tfevents.*"):
        acc = EventAccumulator(str(events.parent), size_guidance={"scalars": 0})
        acc.Reload()
        if "charts/SPS" in acc.Tags()["scalars"]:
            values.append(acc.Scalars("charts/SPS")[-1].value)
    return max(values) if values else float("nan")


def timed(cmd: list[str], cwd: Path) -> float:
    started = time.perf_counter()
    subprocess.run(cmd, cwd=cwd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--algo", default="ppo")
    parser.add_argument("--env-id", default="CartPole-v1")
    parser.add_argument("--steps", type=int, default=20000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--compare", type=Path, help="another installation's bin folder (its mosaic runs too)")
    args = parser.parse_args()
    flags = ["--env-id", args.env_id, "--total-timesteps", str(args.steps), "--seed", "1"]
    launches = ["direct", "mosaic"] + (["compare"] if args.compare else [])
    rows: dict[str, dict[str, list[float]]] = {how: {"wall": [], "sps": []} for how in launches}
    for _ in range(args.repeat):
        for how in launches:
            with tempfile.TemporaryDirectory() as tmp:
                cwd = Path(tmp)
                if how == "direct":
                    cmd = [sys.executable, str(ALGORITHMS / f"{args.algo}.py"), *flags]
                else:
                    bin_dir = BIN if how == "mosaic" else args.compare
                    cmd = [
                        str(bin_dir / "mosaic"),
                        "run",
                        "--worker",
                        "cleanrl",
                        "--algo",
                        args.algo,
                        *flags,
                        "--runs-dir",
                        str(cwd / "runs-root"),
                        "--quiet",
                    ]
                rows[how]["wall"].append(timed(cmd, cwd))
                rows[how]["sps"].append(last_sps(cwd))
    print(f"{args.algo} on {args.env_id}, {args.steps} steps, {args.repeat} alternating launches each")
    print(f"{'launch':8} {'wall s (median)':>16} {'SPS (median)':>14}")
    med = {how: {k: statistics.median(v) for k, v in r.items()} for how, r in rows.items()}
    for how in rows:
        print(f"{how:8} {med[how]['wall']:16.2f} {med[how]['sps']:14.0f}")
    for how in launches[1:]:
        fixed = statistics.median(m - d for m, d in zip(rows[how]["wall"], rows["direct"]["wall"]))
        print(
            f"{how}: wall ratio to direct {med[how]['wall'] / med['direct']['wall']:.3f}, "
            f"SPS ratio {med[how]['sps'] / med['direct']['sps']:.3f}, fixed cost {fixed:+.3f} s (paired median)"
        )
    dry = [str(BIN / "mosaic"), "run", "--worker", "cleanrl", "--algo", args.algo, *flags, "--dry-run"]
    bare = statistics.median(timed([sys.executable, "-c", "pass"], Path.cwd()) for _ in range(5))
    dry_s = statistics.median(timed(dry, Path.cwd()) for _ in range(5))
    print(f"dry run: {dry_s:.3f} s; python -c pass: {bare:.3f} s; ratio {dry_s / bare:.1f}")


if __name__ == "__main__":
    main()
