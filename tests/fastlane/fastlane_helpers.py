"""Drive FastLane's hooks through a real PluginHost, and start real training processes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import mosaic_fastlane.plugin as fastlane_plugin
from mosaic_core.channel import ChannelSender
from mosaic_core.childenv import CHILD_VAR as CHILD_ENV_VAR
from mosaic_core.config import build_config
from mosaic_core.plugins import PluginHost
from mosaic_core.runs import RunContext, RunDirectory
from mosaic_core.types import ChildContext

REPO = Path(__file__).resolve().parents[2]
SCRIPTS = Path(__file__).resolve().parent / "scripts"
BOOT = REPO / "mosaic_core" / "_boot"


def plugin_host(*extra_modules) -> PluginHost:
    host = PluginHost()
    host.register_module(fastlane_plugin, "fastlane")
    for index, module in enumerate(extra_modules):
        host.register_module(module, f"extra{index}")
    return host


def run_context(tmp_path: Path, run_id: str, extras: dict, env_id: str = "CartPole-v1") -> RunContext:
    config = build_config(
        {"run_id": run_id, "algo": "loop", "env_id": env_id, "total_timesteps": 100, "extras": extras}
    )
    directory = RunDirectory.for_run(tmp_path / "runs", run_id).create()
    return RunContext(config=config, directory=directory, worker="cleanrl")


def child_context(run: RunContext, num_envs: int | None = None) -> ChildContext:
    return ChildContext(
        run_id=run.run_id,
        run_dir=run.run_dir,
        extras=run.config.extras,
        channel=ChannelSender(None),
        env_id=run.config.env_id,
        num_envs=num_envs,
    )


def child_environ(run: RunContext, host: PluginHost, num_envs: int | None = None) -> dict[str, str]:
    """The environment the host gives a training process: its own + child_env hooks + MOSAIC_CHILD."""
    env = {**os.environ, **host.child_env(run)}
    env[CHILD_ENV_VAR] = child_context(run, num_envs).describe()
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(BOOT), env.get("PYTHONPATH", "")) if p)
    return env


LAUNCH = (
    "import runpy, sys; from mosaic_core.child import connect; connect(); "
    "sys.argv = sys.argv[1:]; runpy.run_path(sys.argv[0], run_name='__main__')"
)


def start_training(
    run: RunContext,
    host: PluginHost,
    script: str,
    *args: str,
    num_envs: int | None = None,
    env: dict[str, str] | None = None,
) -> subprocess.Popen:
    """Start a training process the way the host does: install() then the script as __main__."""
    return subprocess.Popen(
        [sys.executable, "-c", LAUNCH, str(SCRIPTS / script), *args],
        cwd=run.run_dir,
        env={**child_environ(run, host, num_envs), **(env or {})},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def shm_leftovers(run_id: str) -> list[str]:
    from mosaic_fastlane import layout

    return [p.name for p in layout.shm_dir().glob(f"{layout.NAME_PREFIX}{run_id}*")]


def manifest(run: RunContext, host: PluginHost, status: str = "completed") -> dict:
    return json.loads(json.dumps(host.build_manifest(run, status)))


# ------------------------------------------------------------------------------ real runs
MOSAIC = Path(sys.executable).parent / "mosaic"
CLEANRL_SCRIPT = SCRIPTS / "fastlane_cleanrl.py"


def run_command(
    run_id: str,
    extras: dict,
    *,
    algo: str | None = None,
    env_id: str = "CartPole-v1",
    total: int = 400,
    more: tuple[str, ...] = (),
) -> list[str]:
    return [
        str(MOSAIC),
        "run",
        "--worker",
        "cleanrl",
        "--algo",
        algo or str(CLEANRL_SCRIPT),
        "--env-id",
        env_id,
        "--total-timesteps",
        str(total),
        "--run-id",
        run_id,
        "--extras",
        json.dumps(extras),
        *more,
    ]


def clean_environ(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("WANDB_", "CLEANRL_FASTLANE_"))}
    env.pop(CHILD_ENV_VAR, None)
    return {**env, "PYTHONUNBUFFERED": "1", **extra}


def start_run(
    workdir: Path, run_id: str, extras: dict, *, env: dict[str, str] | None = None, **kwargs
) -> subprocess.Popen:
    """``mosaic run`` in the background (its own session, so tests can signal it alone)."""
    return subprocess.Popen(
        run_command(run_id, extras, **kwargs),
        cwd=workdir,
        env=clean_environ(**(env or {})),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )


def wait_for_frames(run_id: str, proc: subprocess.Popen, frames: int = 1, timeout: float = 60):
    """A reader of the run once it has published ``frames`` frames."""
    import time

    from mosaic_fastlane.reader import FastLaneReader
    from mosaic_fastlane.segment import SegmentMissing

    deadline = time.monotonic() + timeout
    reader = None
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"the run ended before {frames} frame(s): {proc.communicate()}")
        try:
            reader = reader or FastLaneReader(run_id)
            if reader.frames_published() >= frames:
                return reader
        except SegmentMissing:
            pass
        time.sleep(0.02)
    raise AssertionError(f"no {frames} frame(s) from run {run_id} within {timeout} s")


def finish(proc: subprocess.Popen, timeout: float = 120) -> tuple[list[dict], str]:
    out, err = proc.communicate(timeout=timeout)
    return [json.loads(line) for line in out.splitlines() if line.strip()], err
