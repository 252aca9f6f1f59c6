"""A tiny real training program for daemon tests: registers over gRPC, prints lifecycle JSONL.

Behaviour comes from the config's ``worker_id``, ``fake:<JSON object>``:
``duration`` (s, default 0.3), ``register`` (default true), ``heartbeats`` (default true),
``exit_code`` (default 0), ``terminal`` (print a terminal event, default true),
``report_run_dir`` (the run_dir it claims), ``grandchild`` (start a sleeping process in its own session with cwd = the run dir, as the
real supervisor does with the training process), ``ignore_sigterm``, ``publish_steps`` (n).
The run dir gets ``pids.json`` with this process's and the grandchild's pids, and (when it does not
register itself) ``registration.secret``, the secret the daemon gave it, for a test to play its worker.
Events go to stdout and to the run dir's ``events.jsonl``, as ``mosaic run``'s do.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

seq = 0
SCRIPT = Path(__file__).resolve()


def command(spec) -> list[str]:
    """The daemon's worker command for this fake (a ``worker_command`` for DaemonOptions)."""
    return [
        sys.executable,
        str(SCRIPT),
        "--config",
        str(spec.config_path),
        "--runs-dir",
        str(spec.runs_dir),
        "--grpc-target",
        spec.target,
        "--heartbeat-interval",
        f"{spec.heartbeat_interval:g}",
    ]


EVENTS: list[Path] = []


def emit(run_id: str, event: str, payload: dict | None = None) -> None:
    global seq
    seq += 1
    line = json.dumps(
        {"event": event, "run_id": run_id, "seq": seq, "timestamp": time.time(), "payload": payload or {}}
    )
    for path in EVENTS:
        with open(path, "a") as fh:
            fh.write(line + "\n")
    try:
        print(line, flush=True)
    except BrokenPipeError:  # the daemon is gone; events.jsonl still says how the run ended
        pass


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--config", required=True)
    parser.add_argument("--runs-dir", required=True)
    parser.add_argument("--grpc-target", required=True)
    parser.add_argument("--heartbeat-interval", type=float, default=1.0)
    ns = parser.parse_args()
    config = json.loads(Path(ns.config).read_text())
    fake = json.loads(config["worker_id"].removeprefix("fake:")) if config.get("worker_id") else {}
    run_id = config["run_id"]
    run_dir = Path(ns.runs_dir) / run_id
    run_dir.mkdir(parents=True, exist_ok=True)
    EVENTS.append(run_dir / "events.jsonl")

    stopping = []
    if fake.get("ignore_sigterm"):
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    else:
        signal.signal(signal.SIGTERM, lambda *_: stopping.append(True))

    session = None
    secret = os.environ.pop("MOSAIC_REGISTRATION_SECRET", None)
    if fake.get("register", True):
        from mosaic_core.trainer.client import RunSession

        session = RunSession.register(
            ns.grpc_target,
            run_id=run_id,
            worker_id="fake-1",
            worker_kind="cleanrl",
            schema_id="fake.test",
            schema_version=1,
            registration_secret=secret,
        )
    elif secret:
        (run_dir / "registration.secret").write_text(secret)
    pids = {"worker": os.getpid()}
    grandchild = None
    if fake.get("grandchild"):
        grandchild = subprocess.Popen(
            [sys.executable, "-c", "import time; time.sleep(600)"], cwd=run_dir, start_new_session=True
        )
        pids["grandchild"] = grandchild.pid
    (run_dir / "pids.json").write_text(json.dumps(pids))
    emit(run_id, "run_started", {"run_dir": fake.get("report_run_dir", str(run_dir)), "pids": pids})
    if fake.get("publish_steps") and session is not None:
        from mosaic_core.trainer import trainer_pb2 as pb

        session.publish_steps(pb.RunStep(run_id=run_id, step_index=i, reward=1.0) for i in range(fake["publish_steps"]))

    deadline = time.monotonic() + float(fake.get("duration", 0.3))
    next_beat = time.monotonic()
    while time.monotonic() < deadline and not stopping:
        if fake.get("heartbeats", True) and time.monotonic() >= next_beat:
            extra = session.heartbeat() if session is not None else {}
            emit(run_id, "heartbeat", {"grpc_heartbeat": extra})
            next_beat = time.monotonic() + ns.heartbeat_interval
        time.sleep(0.02)
    if grandchild is not None:
        grandchild.terminate()
        grandchild.wait()
    code = 130 if stopping else int(fake.get("exit_code", 0))
    if fake.get("terminal", True):
        if stopping:
            emit(run_id, "run_cancelled", {"reason": "received SIGTERM"})
        elif code == 0:
            emit(run_id, "run_completed", {"returncode": 0})
        else:
            emit(run_id, "run_failed", {"error": f"fake failure {code}", "returncode": code})
    if session is not None:
        session.close()
    return code


if __name__ == "__main__":
    sys.exit(main())
