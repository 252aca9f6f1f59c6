"""The cost of the live metric bridge (analytics plugin), three figures:

1. add_scalar cost: in a training process with MOSAIC's patch and the bridge installed
   (``mosaic_core.child.connect`` with a real side channel to this process, whose host side
   feeds the plugin's hooks), ``SummaryWriter.add_scalar`` (torch.utils.tensorboard) patched
   and the original, timed in interleaved blocks so both see the same load; also the hook
   call alone and the bridge's ``ScalarBuffer.add`` alone.
2. training SPS: ``mosaic run --algo ppo`` with the analytics plugin and without it
   (``MOSAIC_DISABLE_PLUGINS=analytics``), alternating launches; SPS is the script's last
   ``charts/SPS``. Goal: ratio >= 0.99. Launch-to-launch noise on a shared machine is far
   larger than the bridge's cost, so the ratio is also derived from the measured per-call
   overhead and the number of scalars a run writes.
3. host memory in a burst: a training process writes 100k scalars (100k distinct tags, then
   100k of one tag) as fast as it can; the host's traced memory before and after.

Run by hand: .venv/bin/python bench/metric_bridge.py [--calls 100000] [--steps 20000] [--repeat 5]
"""

from __future__ import annotations

import argparse
import io
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

BIN = Path(sys.executable).parent

MICRO = r"""
import json, statistics, sys, tempfile, time
calls, block = int(sys.argv[1]), 500
from mosaic_core import child
assert child.connect() is not None
from torch.utils.tensorboard import SummaryWriter
writer = SummaryWriter(tempfile.mkdtemp())
patched = type(writer).add_scalar
original = patched.__wrapped__
ctx, host = child.current(), child._state["host"]
tags = ["charts/episodic_return", "charts/episodic_length", "losses/value_loss", "charts/SPS"]

def timed(call):
    started = time.perf_counter()
    for i in range(block):
        call(tags[i & 3], float(i), i)
    return (time.perf_counter() - started) / block * 1e9

ways = {"plain": lambda t, v, s: original(writer, t, v, s), "bridged": lambda t, v, s: patched(writer, t, v, s),
        "hook": lambda t, v, s: host.on_scalar(ctx, t, v, s)}
results = {name: [] for name in ways}
names = list(ways)
for round_ in range(max(1, calls // block)):  # interleaved blocks in a rotating order: all see the same load
    for name in names[round_ % 3:] + names[:round_ % 3]:
        results[name].append(timed(ways[name]))
writer.close()
print(json.dumps({name: statistics.median(values[1:] or values) for name, values in results.items()}))
"""

BURST = r"""
import json, sys, tempfile, time
from mosaic_core import child
assert child.connect() is not None
from torch.utils.tensorboard import SummaryWriter
writer = SummaryWriter(tempfile.mkdtemp())
for i in range(100_000):
    writer.add_scalar(f"debug/tag_{i}", float(i), i)
for i in range(100_000):
    writer.add_scalar("charts/episodic_return", float(i % 500), 100_000 + i)
writer.close()
"""


class Host:
    """The host side of a run, as the supervisor wires it: channel -> plugin hooks -> events."""

    def __init__(self, tmp: Path):
        from mosaic_analytics import plugin
        from mosaic_core.channel import ChannelReceiver, ChannelSender, new_address
        from mosaic_core.child import ChildContext
        from mosaic_core.config import build_config
        from mosaic_core.events import EventEmitter
        from mosaic_core.runs import RunContext, RunDirectory

        config = build_config({"run_id": "bench", "algo": "ppo", "env_id": "CartPole-v1", "total_timesteps": 200_000})
        self.run = RunContext(config, RunDirectory(tmp, "bench").create(), "cleanrl", quiet=True)
        self.stream = io.StringIO()
        self.run.emitter = EventEmitter("bench", stream=self.stream)
        self.messages = 0

        def on_message(kind, payload):
            self.messages += 1
            plugin.mosaic_on_child_message(self.run, kind, payload)

        self.receiver = ChannelReceiver(new_address("bench"), on_message).start()
        child = ChildContext("bench", self.run.run_dir, {}, ChannelSender(self.receiver.address))
        self.env = {**os.environ, "MOSAIC_CHILD": child.describe()}

    def close(self):
        self.receiver.close()


def child_run(code: str, env: dict[str, str], *args: str) -> str:
    proc = subprocess.run([sys.executable, "-c", code, *args], env=env, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise SystemExit(f"benchmark child failed:\n{proc.stderr[-2000:]}")
    return proc.stdout


def add_scalar_cost(calls: int, tmp: Path) -> float:
    host = Host(tmp / "micro")
    result = json.loads(child_run(MICRO, host.env, str(calls)))
    host.close()
    assert host.messages > 0, "the bridge sent nothing"
    from mosaic_analytics.bridge import ScalarBuffer

    buffer = ScalarBuffer(lambda *a: True)
    tags = ["charts/episodic_return", "charts/episodic_length", "losses/value_loss", "charts/SPS"]
    started = time.perf_counter()
    for i in range(calls):
        buffer.add(tags[i & 3], float(i), i)
    alone = (time.perf_counter() - started) / calls * 1e9
    plain, bridged = result["plain"], result["bridged"]
    print(f"1. add_scalar (torch SummaryWriter), {calls:,} calls each, interleaved blocks in one process (median)")
    print(f"   plain add_scalar                    {plain:9.0f} ns/call")
    print(
        f"   patched: hooks + metric bridge      {bridged:9.0f} ns/call   (+{bridged - plain:.0f} ns, x{bridged / plain:.3f})"
    )
    print(f"   the hook call alone (no writer)     {result['hook']:9.0f} ns/call")
    print(f"   ScalarBuffer.add alone              {alone:9.0f} ns/call;  {host.messages} batches reached the host")
    return max(bridged - plain, result["hook"])


def read_run(root: Path) -> tuple[float, int]:
    """The last charts/SPS of the run under ``root`` and how many scalars it wrote."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    sps, scalars = float("nan"), 0
    for events in root.rglob("events.out.tfevents.*"):
        if "wandb" in events.parts:
            continue
        acc = EventAccumulator(str(events), size_guidance={"scalars": 0})
        acc.Reload()
        tags = acc.Tags()["scalars"]
        scalars += sum(len(acc.Scalars(tag)) for tag in tags)
        if "charts/SPS" in tags:
            sps = acc.Scalars("charts/SPS")[-1].value
    return sps, scalars


def training_sps(steps: int, repeat: int, tmp: Path, overhead_ns: float) -> None:
    rows: dict[str, list[float]] = {"without analytics": [], "with analytics": []}
    metrics_events, scalars = [], 0
    for i in range(repeat):
        for how in rows:
            cwd = tmp / f"train-{i}-{how.split()[0]}"
            cwd.mkdir()
            env = {k: v for k, v in os.environ.items() if k not in ("MOSAIC_CHILD", "MOSAIC_DISABLE_PLUGINS")}
            if how == "without analytics":
                env["MOSAIC_DISABLE_PLUGINS"] = "analytics"
            cmd = [
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
                "1",
                "--quiet",
                "--run-id",
                "r",
            ]
            out = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, check=True).stdout
            sps, scalars = read_run(cwd)
            rows[how].append(sps)
            if how == "with analytics":
                metrics_events.append(sum(1 for line in out.splitlines() if '"event": "metrics"' in line))
    med = {how: statistics.median(v) for how, v in rows.items()}
    print(f"2. training: ppo on CartPole-v1, {steps:,} steps, {repeat} alternating launches each (median SPS)")
    for how, values in rows.items():
        print(f"   {how:18} {med[how]:8.0f} SPS   runs: {', '.join(f'{v:.0f}' for v in values)}")
    print(
        f"   measured SPS ratio with/without: {med['with analytics'] / med['without analytics']:.3f}  "
        f"(goal >= 0.99; launches on a shared machine vary by more than the bridge costs); "
        f"metrics events per run: {metrics_events}"
    )
    seconds = steps / med["without analytics"]
    added = scalars * overhead_ns * 1e-9
    print(
        f"   derived: {scalars} scalars per run x {overhead_ns:.0f} ns = {added * 1e3:.2f} ms over {seconds:.1f} s "
        f"of training -> SPS ratio {seconds / (seconds + added):.5f}"
    )


def burst_memory(tmp: Path) -> None:
    tracemalloc.start()
    host = Host(tmp / "burst")
    before = tracemalloc.get_traced_memory()[0]
    child_run(BURST, host.env)
    host.close()
    after, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    board = host.run.state["analytics"].board
    snap = board.snapshot()
    print("3. burst: 100k distinct tags, then 100k scalars of one tag, as fast as the process can")
    print(
        f"   host traced memory: +{(after - before) / 1024:.0f} KiB after, peak +{(peak - before) / 1024:.0f} KiB; "
        f"{host.messages} batches received; tags kept {len(board._latest)}, dropped {snap['dropped_tags']}; "
        f"episodes {snap['episodes']:,}; events emitted {host.stream.getvalue().count(chr(10))}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--calls", type=int, default=100_000, help="add_scalar calls per variant")
    parser.add_argument("--steps", type=int, default=20_000, help="PPO steps per training launch")
    parser.add_argument("--repeat", type=int, default=5, help="training launches per variant")
    parser.add_argument("--skip-training", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as name:
        tmp = Path(name)
        overhead_ns = add_scalar_cost(args.calls, tmp)
        if not args.skip_training:
            training_sps(args.steps, args.repeat, tmp, overhead_ns)
        burst_memory(tmp)


if __name__ == "__main__":
    main()
