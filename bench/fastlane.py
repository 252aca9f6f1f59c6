"""FastLane benchmarks; prints figures (nothing here is asserted).

    python bench/fastlane.py [--quick] [--ppo]

1. publish cost per frame next to a plain numpy copy of the same frame (84x84x3, 400x600x3,
   1024x1024x3);
2. reader latency, publish -> visible in another process (median, p99);
3. training SPS with FastLane off / single / grid at the default interval, side by side:
   a CleanRL-shaped random-action loop (SyncVectorEnv, 4 CartPole envs; the worst case, as
   no learning dilutes FastLane's cost) run as a training process through the real patch
   point (``mosaic_core.child.connect``), modes interleaved, per wall and per CPU second;
   with ``--ppo`` also the bundled PPO through ``mosaic run`` (its ``charts/SPS``);
4. how grid mode's cost grows with num_envs (1, 4, 16).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]


def _owner(run_id: str, max_dim: int, slots: int = 1, mode: str = "single"):
    from mosaic_fastlane.layout import Mode
    from mosaic_fastlane.segment import SegmentOwner

    return SegmentOwner(
        run_id, mode=Mode.GRID if mode == "grid" else Mode.SINGLE, slot_count=slots, max_dim=max_dim, interval_ms=100
    )


# ------------------------------------------------------------------------------ 1. publish cost
def bench_publish(repeats: int) -> None:
    from mosaic_fastlane.segment import open_segment
    from mosaic_fastlane.writer import SlotWriter

    print("\n1. publish cost per frame (seqlock + metrics + pixel copy into shared memory)")
    print(f"   {'frame':>14} {'publish us':>11} {'numpy copy us':>14} {'ratio':>6}")
    owner = _owner(f"bench-pub-{os.getpid()}", max_dim=1024)
    writer = SlotWriter(open_segment(name=owner.name, writable=True), 0, 0)
    try:
        for shape in ((84, 84, 3), (400, 600, 3), (1024, 1024, 3)):
            frame = np.random.default_rng(0).integers(0, 256, shape, dtype=np.uint8)
            target = np.empty_like(frame)
            count = max(20, min(repeats, int(2e9 / frame.nbytes)))
            publish, copy = [], []
            for _round in range(5):  # interleave so both see the same machine load
                start = time.perf_counter()
                for i in range(count):
                    writer.publish(frame, tick=i, global_step=i, last_reward=1.0)
                publish.append((time.perf_counter() - start) / count)
                start = time.perf_counter()
                for _ in range(count):
                    np.copyto(target, frame)
                copy.append((time.perf_counter() - start) / count)
            p, c = min(publish) * 1e6, min(copy) * 1e6
            print(f"   {'x'.join(map(str, shape)):>14} {p:>11.1f} {c:>14.1f} {p / c:>6.2f}")
    finally:
        writer.close()
        owner.remove()


# ------------------------------------------------------------------------------ 2. latency
LATENCY_READER = """
import json, sys, time
from mosaic_fastlane.reader import FastLaneReader
reader = FastLaneReader(name=sys.argv[1]); frames = int(sys.argv[2]); seen = 0; lat = []
print("ready", flush=True)
while seen < frames:
    published = reader.frames_published()
    if published > seen:
        frame = reader.latest()
        now = time.time()
        if frame.frame_number > seen:
            lat.append(now - frame.timestamp); seen = frame.frame_number
print(json.dumps(lat))
"""


def bench_latency(frames: int) -> None:
    from mosaic_fastlane.segment import open_segment
    from mosaic_fastlane.writer import SlotWriter

    print("\n2. reader latency: frame published -> copied out by a reader in another process (busy polling)")
    for shape in ((84, 84, 3), (341, 512, 3)):
        owner = _owner(f"bench-lat-{os.getpid()}", max_dim=512)
        writer = SlotWriter(open_segment(name=owner.name, writable=True), 0, 0)
        reader = subprocess.Popen(
            [sys.executable, "-c", LATENCY_READER, owner.name, str(frames)], stdout=subprocess.PIPE, text=True
        )
        try:
            assert reader.stdout.readline().strip() == "ready"
            frame = np.random.default_rng(1).integers(0, 256, shape, dtype=np.uint8)
            for i in range(frames):
                writer.publish(frame, tick=i, global_step=i)
                time.sleep(0.004)
            latencies = np.array(json.loads(reader.communicate(timeout=60)[0])) * 1e6
        finally:
            writer.close()
            owner.remove()
        print(
            f"   {'x'.join(map(str, shape)):>10}: median {np.median(latencies):7.1f} us, "
            f"p99 {np.percentile(latencies, 99):7.1f} us over {len(latencies)} frames"
        )


# ------------------------------------------------------------------------------ 3/4. training SPS
SPS_CHILD = """
import json, sys, time
from mosaic_core.child import connect as install
install()
import gymnasium as gym
num_envs, seconds = int(sys.argv[1]), float(sys.argv[2])
envs = gym.vector.SyncVectorEnv([lambda: gym.wrappers.RecordEpisodeStatistics(gym.make("CartPole-v1"))
                                 for _ in range(num_envs)])
envs.reset(seed=0); envs.action_space.seed(0)
actions = [envs.action_space.sample() for _ in range(64)]
for i in range(300):
    envs.step(actions[i % 64])  # warm-up: first frames, imports
def fastlane_counters():
    wrapper = sys.modules.get("mosaic_fastlane.wrapper")
    if wrapper is None:
        return 0.0, 0
    return wrapper._render_seconds[0], sum(p.frames_rendered for p in wrapper.active.values())
spent, rendered = fastlane_counters()
wall, cpu, steps = time.perf_counter(), time.process_time(), 0
while steps % 256 or time.perf_counter() - wall < seconds:
    envs.step(actions[steps % 64])
    steps += 1
wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
spent_after, rendered_after = fastlane_counters()
print(json.dumps({"wall": steps * num_envs / wall, "cpu": steps * num_envs / cpu,
                  "share": (spent_after - spent) / wall, "fps": (rendered_after - rendered) / wall}))
envs.close()
"""


def _sps(mode: str, num_envs: int, seconds: float) -> dict:
    """Env steps per wall second and per CPU second of one training process, and frames published."""
    from mosaic_core.channel import ChannelSender
    from mosaic_core.child import ChildContext
    from mosaic_fastlane import layout, settings
    from mosaic_fastlane.reader import FastLaneReader

    run_id = f"bench-sps-{os.getpid()}-{mode}-{num_envs}"
    env = {k: v for k, v in os.environ.items() if not k.startswith("CLEANRL_FASTLANE_")}
    owner = None
    with tempfile.TemporaryDirectory() as run_dir:
        if mode != "off":
            extras = {"fastlane_video_mode": mode, "num_envs": num_envs}
            resolved = settings.resolve(extras, layout.segment_name(run_id), str(layout.shm_dir()), environ={})
            owner = _owner(run_id, resolved.max_dim, resolved.slots, mode)
            env[settings.CHILD_VAR] = resolved.to_env()
        env["MOSAIC_CHILD"] = ChildContext(run_id, Path(run_dir), {}, ChannelSender(None), num_envs=num_envs).describe()
        env["PYTHONPATH"] = str(REPO / "mosaic_core" / "_boot")
        try:
            out = subprocess.run(
                [sys.executable, "-c", SPS_CHILD, str(num_envs), str(seconds)],
                env=env,
                cwd=run_dir,
                capture_output=True,
                text=True,
                timeout=600,
            )
            if out.returncode:
                raise RuntimeError(out.stderr[-2000:])
            result = json.loads(out.stdout.splitlines()[-1])
            result["frames"] = 0
            if owner is not None:
                with FastLaneReader(name=owner.name) as reader:
                    result["frames"] = reader.frames_published()
            return result
        finally:
            if owner is not None:
                owner.remove()


def _median(runs: list[dict], key: str) -> float:
    return statistics.median(r[key] for r in runs)


def bench_training(seconds: float, repeats: int) -> None:
    print("\n3. training SPS: CleanRL-shaped random-action loop, SyncVectorEnv of 4 CartPole-v1, run as a")
    print("   training process through mosaic_core.child.connect(); default interval (100 ms) and budget;")
    print(f"   modes interleaved, median of {repeats} windows of {seconds:g} s. Per CPU second is the cost that")
    print("   FastLane adds (wall SPS on this shared 2-core machine moves with other people's load).")
    print("   'in FastLane' = share of the loop's wall time spent rendering + downscaling + publishing.")
    print(f"   {'mode':>7} {'SPS (wall)':>11} {'SPS (CPU)':>10} {'cost (CPU)':>11} {'in FastLane':>12} {'frames/s':>9}")
    results: dict[str, list[dict]] = {"off": [], "single": [], "grid": []}
    for _ in range(repeats):
        for mode in results:
            results[mode].append(_sps(mode, 4, seconds))
    base = _median(results["off"], "cpu")
    for mode, runs in results.items():
        cpu = _median(runs, "cpu")
        print(
            f"   {mode:>7} {_median(runs, 'wall'):>11.0f} {cpu:>10.0f} {100 * (1 - cpu / base):>10.1f}% "
            f"{100 * _median(runs, 'share'):>11.1f}% {_median(runs, 'fps'):>9.1f}"
        )


def bench_grid_scaling(seconds: float, repeats: int) -> None:
    print("\n4. grid mode vs num_envs (SyncVectorEnv: every tile rendered in the training process)")
    print("   the render budget (5 %) stretches the interval when a tick's tiles cost more; 'fps' = ticks per second")
    print(f"   {'num_envs':>8} {'off SPS (CPU)':>14} {'grid SPS (CPU)':>15} {'cost':>7} {'in FastLane':>12} {'fps':>5}")
    for num_envs in (1, 4, 16):
        runs = {"off": [], "grid": []}
        for _ in range(repeats):
            for mode in runs:
                runs[mode].append(_sps(mode, num_envs, seconds))
        off, grid = _median(runs["off"], "cpu"), _median(runs["grid"], "cpu")
        fps = _median(runs["grid"], "fps") / num_envs
        print(
            f"   {num_envs:>8} {off:>14.0f} {grid:>15.0f} {100 * (1 - grid / off):>6.1f}% "
            f"{100 * _median(runs['grid'], 'share'):>11.1f}% {fps:>5.1f}"
        )


def bench_ppo(total: int, algo: str, repeats: int) -> None:
    print(f"\n3b. PPO ({algo}) through `mosaic run`, {total} steps of CartPole-v1, 4 envs (SyncVectorEnv):")
    print(f"    charts/SPS at the end and the manifest's render_seconds; modes interleaved, median of {repeats}")
    results: dict[str, list[dict]] = {"off": [], "single": [], "grid": []}
    for _ in range(repeats):
        for mode in results:
            results[mode].append(_ppo_run(mode, total, algo))
    base = _median(results["off"], "sps")
    print(f"   {'mode':>7} {'SPS':>7} {'change':>7} {'in FastLane':>12} {'frames':>7}")
    for mode, runs in results.items():
        sps = _median(runs, "sps")
        print(
            f"   {mode:>7} {sps:>7.0f} {100 * (sps / base - 1):>+6.1f}% {100 * _median(runs, 'share'):>11.1f}% "
            f"{_median(runs, 'frames'):>7.0f}"
        )
    if not _median(results["single"], "frames"):
        print("   (no frames published: does the script choose a render_mode other than rgb_array?)")


def _ppo_run(mode: str, total: int, algo: str) -> dict:
    extras = {} if mode == "off" else {"fastlane_video_mode": mode, "num_envs": 4}
    with tempfile.TemporaryDirectory() as workdir:
        subprocess.run(
            [
                str(Path(sys.executable).parent / "mosaic"),
                "run",
                "--worker",
                "cleanrl",
                "--algo",
                algo,
                "--env-id",
                "CartPole-v1",
                "--total-timesteps",
                str(total),
                "--run-id",
                f"bench-ppo-{mode}",
                "--extras",
                json.dumps(extras),
                "--quiet",
            ],
            cwd=workdir,
            capture_output=True,
            timeout=900,
        )
        run_dir = Path(workdir) / "var/trainer/runs" / f"bench-ppo-{mode}"
        events = [json.loads(line) for line in (run_dir / "events.jsonl").read_text().splitlines()]
        sps = [e["payload"]["sps"] for e in events if e["event"] == "metrics" and e["payload"].get("sps")]
        wall = events[-1]["timestamp"] - events[0]["timestamp"]
        section = json.loads((run_dir / "manifest.json").read_text()).get("fastlane", {})
    return {
        "sps": sps[-1] if sps else float("nan"),
        "frames": section.get("frames_published", 0),
        "share": section.get("render_seconds", 0.0) / wall,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="fewer repeats (a rough look)")
    parser.add_argument("--ppo", action="store_true", help="also train PPO through `mosaic run`")
    parser.add_argument("--algo", default="ppo", help="--ppo: the algorithm or script to run (default ppo)")
    parser.add_argument("--sections", default="1234", help="which numbered sections to run (default 1234)")
    args = parser.parse_args()
    quick = args.quick
    print(f"FastLane benchmark; python {sys.version.split()[0]}, numpy {np.__version__}, {os.cpu_count()} CPUs")
    if "1" in args.sections:
        bench_publish(200 if quick else 1000)
    if "2" in args.sections:
        bench_latency(300 if quick else 1000)
    if "3" in args.sections:
        bench_training(1.0 if quick else 3.0, 1 if quick else 5)
    if "4" in args.sections:
        bench_grid_scaling(1.0 if quick else 3.0, 1 if quick else 3)
    if args.ppo:
        bench_ppo(20000 if quick else 40000, args.algo, 1 if quick else 3)


if __name__ == "__main__":
    main()
