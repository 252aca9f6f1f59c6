"""A real trainer daemon (``mosaic_core.trainer.daemon.serve``) that starts each run as the original
MOSAIC's daemon started it: ``python -m <worker package>.cli --config <the run's config> --grpc
--grpc-target <daemon>`` (plus the run's directory and our host flags), instead of ``mosaic run``.
``python original_spawn_daemon.py --state-dir D``; prints the ready line as ``mosaic daemon`` does."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from mosaic_core.trainer.daemon import DaemonOptions, serve

PACKAGES = {"cleanrl": "cleanrl_worker", "xuance": "xuance_worker", "rllib": "ray_worker"}


def original_command(spec) -> list[str]:
    return [
        sys.executable,
        "-P",
        "-m",
        f"{PACKAGES[spec.worker]}.cli",
        "--config",
        str(spec.config_path),
        "--grpc",
        "--grpc-target",
        spec.target,
        "--runs-dir",
        str(spec.runs_dir),
        "--quiet",
        "--heartbeat-interval",
        f"{spec.heartbeat_interval:g}",
    ]


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--state-dir", required=True)
    ns = parser.parse_args()
    options = DaemonOptions(
        state_dir=Path(ns.state_dir),
        listen="127.0.0.1:0",
        gpus=0,
        worker_command=original_command,
        log=lambda message: print(f"mosaic daemon: {message}", file=sys.stderr, flush=True),
    )

    def ready(daemon) -> None:
        token_file = str(daemon.state_dir / "client.token") if daemon.token else None
        line = {"listen_address": daemon.address, "pid": daemon.pid, "state_dir": str(daemon.state_dir)}
        print(json.dumps({**line, "token_file": token_file}), flush=True)

    return serve(options, on_ready=ready)


if __name__ == "__main__":
    sys.exit(main())
