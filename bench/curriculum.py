"""Benchmark: what the curriculum wrapper adds to env.step and reset (prints figures).

    .venv/bin/python bench/curriculum.py [--steps N]

Runs CartPole-v1 bare and wrapped (real stage file, real side channel to a host process
whose receiver thread feeds a real controller), alone and in a SyncVectorEnv of 4, and
prints microseconds per step. Not a test: nothing is asserted.
"""

from __future__ import annotations

import argparse
import multiprocessing
import tempfile
import time
from pathlib import Path

import gymnasium as gym

from mosaic_core.channel import ChannelReceiver, ChannelSender, new_address
from mosaic_curriculum.control import CurriculumController
from mosaic_curriculum.schedule import load_schedule
from mosaic_curriculum.stagefile import StageFile, stage_path
from mosaic_curriculum.wrapper import CurriculumEnv

SCHEDULE = [{"env_id": "CartPole-v1", "steps": 10**12}, {"env_id": "CartPole-v0"}]


def per_step_us(env, steps: int, vector: bool) -> float:
    env.reset(seed=0)
    actions = [env.action_space.sample() for _ in range(1000)]
    started = time.perf_counter()
    for i in range(steps):
        _, _, terminated, truncated, _ = env.step(actions[i % 1000])
        if not vector and (terminated or truncated):
            env.reset()
    return (time.perf_counter() - started) / steps * 1e6


def host(address: str, run_dir: Path, stop, totals) -> None:
    """The host's part, in its own process as in a real run: receiver thread + controller."""
    schedule = load_schedule(SCHEDULE)
    controller = CurriculumController(schedule, StageFile.open(stage_path(run_dir)), lambda *a: None)
    receiver = ChannelReceiver(address, lambda kind, p: controller.on_report(p)).start()
    stop.wait()
    receiver.close()
    totals.put((controller.total_steps, controller.ignored_reports))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=20_000)
    parser.add_argument("--repeats", type=int, default=7)
    ns = parser.parse_args()
    run_dir = Path(tempfile.mkdtemp(prefix="mosaic-curriculum-bench-"))
    schedule = load_schedule(SCHEDULE)
    stage_file = StageFile.create(stage_path(run_dir))
    address = new_address("bench")
    context = multiprocessing.get_context("fork")
    stop, totals = context.Event(), context.Queue()
    host_process = context.Process(target=host, args=(address, run_dir, stop, totals))
    host_process.start()
    time.sleep(0.5)  # let the host bind its address
    sender = ChannelSender(address)
    reader = StageFile.open(stage_path(run_dir))

    def wrapped():
        return CurriculumEnv(
            gym.make("CartPole-v1"),
            schedule,
            reader.read,
            lambda payload, reliable: sender.send("curriculum", payload, reliable),
        )

    cases = {
        "single env, bare": lambda: gym.make("CartPole-v1"),
        "single env, curriculum": wrapped,
        "SyncVectorEnv(4), bare": lambda: gym.vector.SyncVectorEnv([lambda: gym.make("CartPole-v1")] * 4),
        "SyncVectorEnv(4), curriculum": lambda: gym.vector.SyncVectorEnv([wrapped] * 4),
    }
    print(f"gymnasium {gym.__version__}, {ns.steps} steps per case, best of {ns.repeats} (cases interleaved)")
    results: dict[str, float] = {}
    for _ in range(ns.repeats):  # interleaved, so load from other processes hits every case alike
        for name, build in cases.items():
            took = per_step_us(build(), ns.steps, "Vector" in name)
            results[name] = min(took, results.get(name, took))
    for name, best in results.items():
        print(f"{name:32s} {best:8.2f} us/step")
    for kind in ("single env", "SyncVectorEnv(4)"):
        extra = results[f"{kind}, curriculum"] - results[f"{kind}, bare"]
        print(f"{kind}: curriculum adds {extra:.2f} us per vector step")
    started = time.perf_counter()
    for _ in range(100_000):
        reader.read()
    print(f"stage word read: {(time.perf_counter() - started) * 10:.3f} us")
    stop.set()
    steps, ignored = totals.get(timeout=30)
    host_process.join()
    print(
        f"host counted {steps} env steps (reports ignored: {ignored}); datagrams the channel dropped "
        f"and the wrappers sent again later: {sender.dropped}"
    )
    reader.close()
    stage_file.remove()
    run_dir.rmdir()


if __name__ == "__main__":
    main()
