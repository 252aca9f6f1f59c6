"""The CleanRL worker's command line: ``python -m cleanrl_worker.cli``, ``cleanrl-worker`` and
``mosaic run --worker cleanrl`` all land here.

Exit codes: 0 success, the training process's return code on failure, 2 bad usage/config,
130 cancelled.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from mosaic_core.cli.errors import run_cli_command
from mosaic_core.config import build_config, parse_extras_json, read_config_file
from mosaic_core.errors import UsageError
from mosaic_core.plugins import plugin_host
from mosaic_core.runs import RunContext, RunDirectory

WORKER = "cleanrl"


def build_parser(prog: str = "cleanrl-worker") -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=prog,
        description="Run a CleanRL algorithm (bundled, from a checkout, an entry point or a script path) "
                    "under MOSAIC supervision. Lifecycle events are printed as JSON lines on stdout.")
    parser.add_argument("--config", help="worker config JSON (flat, or nested at metadata.worker.config)")
    parser.add_argument("--algo", help="algorithm name (see `mosaic algos`) or path to a script")
    parser.add_argument("--env-id", help="gymnasium environment id")
    parser.add_argument("--total-timesteps", type=int, help="environment steps to train for")
    parser.add_argument("--seed", type=int)
    parser.add_argument("--worker-id")
    parser.add_argument("--run-id", help="run id (letters, digits, - and _); a ULID is generated when absent")
    parser.add_argument("--runs-dir", help="runs root (default var/trainer/runs, or $MOSAIC_RUNS_DIR)")
    parser.add_argument("--extras", help="JSON object merged into the config's extras (wins per key)")
    parser.add_argument("--dry-run", action="store_true", help="resolve and validate everything; run nothing")
    parser.add_argument("--emit-summary", action="store_true", help="with --dry-run: print the resolved launch as JSON")
    parser.add_argument("--interactive", action="store_true", help="JSON-lines stepping over stdin/stdout")
    parser.add_argument("--grpc", action="store_true", help="register with a trainer daemon before running")
    parser.add_argument("--grpc-target", default="127.0.0.1:50055", help="trainer daemon address (HOST:PORT)")
    parser.add_argument("--heartbeat-interval", type=float, default=30.0, help="seconds between heartbeats")
    parser.add_argument("--grace-period", type=float, default=10.0, help="seconds between SIGTERM and SIGKILL on cancel")
    parser.add_argument("--quiet", action="store_true", help="no progress on stderr")
    parser.add_argument("--verbose", action="store_true", help="show tracebacks")
    return parser


def load_config(ns: argparse.Namespace, host: Any):
    data, source = None, None
    if ns.config:
        data, source = read_config_file(ns.config), ns.config
    overrides = {"algo": ns.algo, "env_id": ns.env_id, "total_timesteps": ns.total_timesteps, "seed": ns.seed,
                 "worker_id": ns.worker_id, "run_id": ns.run_id}
    extras = parse_extras_json(ns.extras) if ns.extras else None
    from cleanrl_worker.launcher import mode_defaults

    def defaults(merged: dict[str, Any]) -> dict[str, Any]:
        return {**mode_defaults(merged, ns.interactive), **host.config_defaults(merged)}

    return build_config(data, source=source, overrides=overrides, extras=extras, generate_run_id=True,
                        defaults=defaults)


def run(ns: argparse.Namespace) -> int:
    from cleanrl_worker.launcher import plan_launch

    host = plugin_host()
    config = load_config(ns, host)
    directory = RunDirectory.for_run(ns.runs_dir, config.run_id)
    run_ctx = RunContext(config=config, directory=directory, worker=WORKER, quiet=ns.quiet)
    plan = plan_launch(config, run_ctx, host, interactive=ns.interactive)
    if ns.dry_run:
        if ns.emit_summary:
            print(json.dumps(plan.summary(), indent=2, default=str))
        else:
            print(f"dry run ok: {plan.algorithm.name} from {plan.algorithm.source} ({plan.algorithm.script})",
                  file=sys.stderr)
        return 0
    return _execute(ns, plan, run_ctx, host)


def _execute(ns: argparse.Namespace, plan: Any, run_ctx: RunContext, host: Any) -> int:
    from mosaic_core.supervisor import Supervisor, SupervisorOptions

    options = SupervisorOptions(heartbeat_interval=ns.heartbeat_interval, grace_period=ns.grace_period,
                                passthrough_stdio=plan.mode == "interactive", num_envs=plan.num_envs,
                                started_payload={"algo_source": plan.algorithm.source,
                                                 "script": str(plan.algorithm.script)})
    session = None
    if ns.grpc:
        from mosaic_core.trainer.client import WorkerSession

        extras = run_ctx.config.extras
        session = WorkerSession.register(
            ns.grpc_target, run_id=run_ctx.run_id, worker_id=run_ctx.config.worker_id or "",
            worker_kind=WORKER, schema_id=str(extras.get("schema_id") or f"cleanrl.{plan.algorithm.name}"),
            schema_version=int(extras.get("schema_version") or 1),
            supports_pause=bool(extras.get("supports_pause", False)),
            supports_checkpoint=bool(extras.get("supports_checkpoint", True)))
        options.heartbeat_extra = lambda: {"grpc_heartbeat": session.heartbeat()}
        options.started_payload["grpc"] = {"target": ns.grpc_target, "accepted_version": session.accepted_version}
    if run_ctx.directory.events.exists():
        raise UsageError(f"run {run_ctx.run_id!r} already exists in {run_ctx.directory.root}; "
                         "choose another --run-id (or leave it out to get a new one)")
    directory = run_ctx.directory.create()
    directory.write_config(run_ctx.config, {"worker": WORKER, "argv": plan.script_argv,
                                            "algo_source": plan.algorithm.source})
    try:
        return Supervisor(run_ctx, host, plan.command, plan.env, options).execute()
    finally:
        if session is not None:
            session.close()


def main(argv: list[str] | None = None, prog: str = "cleanrl-worker") -> int:
    parser = build_parser(prog)
    ns = parser.parse_args(argv)
    if ns.emit_summary and not ns.dry_run:
        parser.error("--emit-summary needs --dry-run")
    return run_cli_command(lambda: run(ns), verbose=ns.verbose)


if __name__ == "__main__":
    sys.exit(main(prog="python -m cleanrl_worker.cli"))
