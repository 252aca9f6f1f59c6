"""A real daemon process whose runs are the fake worker: ``python daemon_main.py --state-dir D
[--heartbeat-timeout S] [--max-concurrent N] [--on-shutdown cancel|wait] [--insecure]``. Prints the
ready line (with the client token's file, as ``mosaic daemon`` does)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from fake_worker import command

from mosaic_core.trainer.daemon import DaemonOptions, serve

parser = argparse.ArgumentParser()
parser.add_argument("--state-dir", required=True)
parser.add_argument("--heartbeat-timeout", type=float, default=30.0)
parser.add_argument("--max-concurrent", type=int, default=4)
parser.add_argument("--on-shutdown", default="cancel")
parser.add_argument("--grace-period", type=float, default=1.0)
parser.add_argument("--insecure", action="store_true")
ns = parser.parse_args()
options = DaemonOptions(
    state_dir=Path(ns.state_dir),
    listen="127.0.0.1:0",
    gpus=0,
    worker_command=command,
    heartbeat_timeout=ns.heartbeat_timeout,
    max_concurrent=ns.max_concurrent,
    on_shutdown=ns.on_shutdown,
    grace_period=ns.grace_period,
    insecure=ns.insecure,
)


def ready(daemon) -> None:
    token_file = str(daemon.state_dir / "client.token") if daemon.token else None
    print(
        json.dumps(
            {
                "listen_address": daemon.address,
                "pid": daemon.pid,
                "state_dir": str(daemon.state_dir),
                "token_file": token_file,
            }
        ),
        flush=True,
    )


sys.exit(serve(options, on_ready=ready))
