"""FastLane benchmarks; prints figures (nothing here is asserted).

    python bench/fastlane.py [--quick] [--ppo]

1. publish cost per frame next to a plain numpy copy of the same frame (84x84x3, 400x600x3,
   1024x1024x3);
2. reader latency, publish -> visible in another process (median, p99);
3. training SPS with FastLane off / single / grid at the default interval, side by side:
   a CleanRL-shaped random-action loop (SyncVectorEnv, 4 CartPole envs) run as a training
   process through the real patch point (``mosaic_core.child.install``), modes interleaved;
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

    return SegmentOwner(run_id, mode=Mode.GRID if mode == "grid" else Mode.SINGLE, slot_count=slots,
                        max_dim=max_dim, interval_ms=100)


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
        reader = subprocess.Popen([sys.executable, "-c", LATENCY_READER, owner.name, str(frames)],
                                  stdout=subprocess.PIPE, text=True)
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
        print(f"   {'x'.join(map(str, shape)):>10}: median {np.median(latencies):7.1f} us, "
              f"p99 {np.percentile(latencies, 99):7.1f} us over {len(latencies)} frames")


# ------------------------------------------------------------------------------ 3/4. training SPS
SPS_CHILD = """
import sys, time
from mosaic_core.child import install
install()
import gymnasium as gym
num_envs, steps, vector = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
cls = gym.vector.AsyncVectorEnv if vector == "async" else gym.vector.SyncVectorEnv
envs = cls([lambda: gym.wrappers.RecordEpisodeStatistics(gym.make("CartPole-v1")) for _ in range(num_envs)])
envs.reset(seed=0); envs.action_space.seed(0)
actions = [envs.action_space.sample() for _ in range(64)]
for i in range(200):
    envs.step(actions[i % 64])  # warm-up: first frames, imports
start = time.perf_counter()
for i in range(steps):
    envs.step(actions[i % 64])
print(steps * num_envs / (time.perf_counter() - start))
envs.close()
"""


def _sps(mode: str, num_envs: int, steps: int, vector: str = "sync") -> tuple[float, int]:
    """Env steps per second of one training process; returns (sps, frames published)."""
    from mosaic_core.child import ChildContext
    from mosaic_core.channel import ChannelSender

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
            out = subprocess.run([sys.executable, "-c", SPS_CHILD, str(num_envs), str(steps), vector], env=env,
                                 cwd=run_dir, capture_output=True, text=True, timeout=600)
            if out.returncode:
                raise RuntimeError(out.stderr[-2000:])
            frames = 0
            if owner is not None:
                with FastLaneReader(name=owner.name) as reader:
                    frames = reader.frames_published()
            return float(out.stdout.split()[-1]), frames
        finally:
            if owner is not None:
                owner.remove()


def bench_training(steps: int, repeats: int) -> None:
    print("\n3. training SPS, random-action loop, SyncVectorEnv of 4 CartPole-v1, default interval (100 ms);")
    print(f"   modes interleaved, {repeats} repeats of {steps} vector steps, median (frames published)")
    results: dict[str, list[tuple[float, int]]] = {"off": [], "single": [], "grid": []}
    for _ in range(repeats):
        for mode in results:
            results[mode].append(_sps(mode, 4, steps))
    base = statistics.median(s for s, _ in results["off"])
    for mode, runs in results.items():
        sps = statistics.median(s for s, _ in runs)
        frames = statistics.median(f for _, f in runs)
        print(f"   {mode:>7}: {sps:9.0f} SPS  {100 * (sps / base - 1):+6.1f}%  ({frames:.0f} frames)")


def bench_grid_scaling(steps: int, repeats: int) -> None:
    print("\n4. grid mode vs num_envs (SyncVectorEnv, one tile per env, default interval)")
    print(f"   {'num_envs':>8} {'off SPS':>9} {'grid SPS':>9} {'cost':>7} {'frames':>7}")
    for num_envs in (1, 4, 16):
        n_steps = max(200, steps * 4 // num_envs)
        off = [_sps("off", num_envs, n_steps)[0] for _ in range(repeats)]
        grid = [_sps("grid", num_envs, n_steps) for _ in range(repeats)]
        o, g = statistics.median(off), statistics.median(s for s, _ in grid)
        print(f"   {num_envs:>8} {o:>9.0f} {g:>9.0f} {100 * (g / o - 1):>+6.1f}% {grid[0][1]:>7}")


def bench_ppo(total: int) -> None:
    print(f"\n3b. bundled PPO through `mosaic run` ({total} steps, CartPole-v1, 4 envs): charts/SPS of the last update")
    for mode in ("off", "single", "grid"):
        extras = {} if mode == "off" else {"fastlane_video_mode": mode}
        with tempfile.TemporaryDirectory() as workdir:
            out = subprocess.run([str(Path(sys.executable).parent / "mosaic"), "run", "--worker", "cleanrl", "--algo",
                                  "ppo", "--env-id", "CartPole-v1", "--total-timesteps", str(total), "--run-id",
                                  f"bench-ppo-{mode}", "--extras", json.dumps(extras)], cwd=workdir,
                                 capture_output=True, text=True, timeout=900)
            events = [json.loads(line) for line in out.stdout.splitlines() if line.strip()]
            sps = [e["payload"].get("sps") for e in events if e["event"] == "metrics" and e["payload"].get("sps")]
            manifest = json.loads((Path(workdir) / "var/trainer/runs" / f"bench-ppo-{mode}" / "analytics.json").read_text())
            frames = manifest.get("fastlane", {}).get("frames_published", 0)
        print(f"   {mode:>7}: {sps[-1] if sps else float('nan'):8.0f} SPS  ({frames} frames)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="fewer repeats (a rough look)")
    parser.add_argument("--ppo", action="store_true", help="also run the bundled PPO through `mosaic run`")
    args = parser.parse_args()
    quick = args.quick
    print(f"FastLane benchmark; python {sys.version.split()[0]}, numpy {np.__version__}, {os.cpu_count()} CPUs")
    bench_publish(200 if quick else 1000)
    bench_latency(300 if quick else 1000)
    bench_training(1500 if quick else 5000, 1 if quick else 3)
    bench_grid_scaling(1500 if quick else 4000, 1 if quick else 3)
    if args.ppo:
        bench_ppo(20000 if quick else 50000)


if __name__ == "__main__":
    main()
