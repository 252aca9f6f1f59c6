"""A real daemon process whose runs are the fake worker: ``python daemon_main.py --state-dir D
[--heartbeat-timeout S] [--max-concurrent N] [--on-shutdown cancel|wait]``. Prints the ready line."""

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
ns = parser.parse_args()
options = DaemonOptions(state_dir=Path(ns.state_dir), listen="127.0.0.1:0", gpus=0, worker_command=command,
                        heartbeat_timeout=ns.heartbeat_timeout, max_concurrent=ns.max_concurrent,
                        on_shutdown=ns.on_shutdown, grace_period=ns.grace_period)
sys.exit(serve(options, on_ready=lambda d: print(json.dumps({"listen_address": d.address, "pid": d.pid}), flush=True)))
