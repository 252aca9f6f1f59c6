"""On a cluster node: one prepared run supervised as ``mosaic run`` does it (a Ray actor running
``python -I -m mosaic_core.node`` on the caller's ``launch.json``: not prepared again).

The caller (:mod:`mosaic_ray.caller`) makes one :class:`RemoteRun` actor per attempt with the
run's resources, calls :meth:`start`, then :meth:`read` in a loop for the run's JSON event
lines (and, when asked, what plugins relay: ``mosaic_run_relay``, FastLane's frames), :meth:`snapshot`
for its run directory (at checkpoints and at the end), :meth:`cancel` on Ctrl-C and
:meth:`close` at the end. The run's host here dies with the actor
(``PR_SET_PDEATHSIG``), so a killed actor or a lost caller leaves nothing running.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tarfile
import threading
from pathlib import Path
from typing import Any

from mosaic_core import RunDirectory, files, procs
from mosaic_core.toolkit import HOST_DISTRIBUTION
from mosaic_ray.archives import unpack

NODE_ENV = "MOSAIC_RAY_NODE"
# Never handed to the run: the cluster's credentials and the actor's own Ray wiring.
_KEEP_OUT = ("RAY_AUTH_TOKEN", "RAY_AUTH_TOKEN_PATH", "RAY_ADDRESS", "RAY_JOB_ID", "RAY_RAYLET_PID")
# Thread pools that size themselves from the machine's cores unless told: from --num-cpus instead.
THREAD_VARS = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "NUMEXPR_NUM_THREADS", "TORCH_NUM_THREADS")
STDERR_TAIL = 40
WORK_PREFIX = "mosaic-ray-"
CANCEL_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


def _close_quietly(relay: Any) -> None:
    with contextlib.suppress(Exception):
        relay.close()


def _moved(launch: dict[str, Any], before: str, after: str) -> dict[str, Any]:
    """``launch.json`` with the caller's run directory, in its command and cwd, made this node's."""

    def move(value: Any) -> Any:
        if isinstance(value, str) and before and (value == before or value.startswith(before + os.sep)):
            return after + value[len(before) :]
        return value

    return {**launch, "command": [move(arg) for arg in launch.get("command") or []], "cwd": move(launch.get("cwd"))}


def _child_setup(parent_death: Any) -> Any:
    """The run's ``preexec_fn``: no blocked signal (Ray's threads block SIGINT, and a child
    inherits the mask: its Ctrl-C would never arrive), and SIGTERM when the actor dies."""

    def setup() -> None:
        signal.pthread_sigmask(signal.SIG_SETMASK, ())
        parent_death()

    return setup


_NO_MODULE = re.compile(r"^ModuleNotFoundError: No module named '([\w.]+)'")


def _missing_here(line: str) -> str:
    """A run that failed for a module this node's Python lacks (its dependencies are installed
    where the caller runs, not here): its ``run_failed`` names what to install on the node."""
    if '"run_failed"' not in line or "ModuleNotFoundError" not in line:
        return line
    with contextlib.suppress(ValueError, AttributeError, TypeError):
        record = json.loads(line)
        found = _NO_MODULE.match(record["payload"]["error"])
        if record["event"] == "run_failed" and found:
            module = found.group(1).split(".")[0]
            extra = _extra_providing(module)
            how = (
                f"{sys.executable} -m pip install '{HOST_DISTRIBUTION}[{extra}]'"
                if extra
                else "install the package that provides it into that Python"
            )
            record["payload"]["error"] = (
                f"ModuleNotFoundError on Ray node {socket.gethostname()}: its Python "
                f"({sys.executable}) has no module {module!r}, which the run imports; "
                f"on that node: {how}"
            )
            return json.dumps(record)
    return line


def _extra_providing(module: str) -> str | None:
    """The extra of MOSAIC's distribution whose requirements name ``module``'s distribution."""
    from importlib import metadata

    wanted = module.replace("_", "-").lower()
    with contextlib.suppress(metadata.PackageNotFoundError):
        for requirement in metadata.requires(HOST_DISTRIBUTION) or []:
            name = re.split(r"[\s\[<>=!~;(]", requirement, maxsplit=1)[0].replace("_", "-").lower()
            extra = re.search(r"extra\s*==\s*[\"']([\w-]+)", requirement)
            if name == wanted and extra:
                return extra.group(1)
    return None


class RemoteRun:
    def __init__(self) -> None:
        self.proc: subprocess.Popen[str] | None = None
        self.lines: list[str] = []
        self.stderr: list[str] = []
        self.lock = threading.Lock()
        self.changed = threading.Condition(self.lock)  # a line came, or the run's stdout ended
        self.stdout_done = False
        self.work: Path | None = None
        self.run_dir: Path | None = None
        self.relays: dict[str, Any] = {}  # plugin -> its RunRelay for this run (mosaic_run_relay, side "node")
        self.relay_failures: dict[str, str] = {}  # plugin -> why its relay stopped, for the caller to record

    def start(
        self,
        launch_text: str,
        config_text: str,
        env: dict[str, str],
        runs_dir: str | None,
        run_id: str,
        num_cpus: float,
        relaying: list[str] | None = None,
        caller_run_dir: str = "",
        host_flags: list[str] | None = None,
        seed: bytes = b"",
    ) -> dict[str, Any]:
        """Supervise the prepared run here (``python -I -m mosaic_core.node``: the command the
        caller's ``launch.json`` records, not prepared again); ``env`` (secrets included) only in
        its environment. ``runs_dir``: shared storage, else a private temp dir on this node; the
        caller's run directory in the plan's paths becomes this one. Plugins that relay live data
        of the run (FastLane) set up their side here first, those of ``relaying`` (the caller's;
        none: no plugin is loaded here). ``host_flags``: ``--heartbeat-interval``, ``--grace-period``.
        ``seed``: a gzip tar of the checkpoint a resumed run goes on from, put in its run directory
        here (``seeded``: those files, for the caller's next :meth:`snapshot`)."""
        import ray

        self.work = files.private_dir(WORK_PREFIX)  # 0700: the config holds no secret, still private
        runs = Path(runs_dir) if runs_dir else self.work / "runs"
        self.run_dir = runs / run_id
        runs.mkdir(parents=True, exist_ok=True, mode=0o700)
        self.run_dir.mkdir(mode=0o700)
        seeded = self._seed(seed)
        (self.run_dir / "config.json").write_text(config_text, encoding="utf-8")
        (self.run_dir / "launch.json").write_text(
            json.dumps(_moved(json.loads(launch_text), caller_run_dir, str(self.run_dir))), encoding="utf-8"
        )
        node = {
            "node_id": ray.get_runtime_context().get_node_id(),
            "address": ray.util.get_node_ip_address(),
            "hostname": socket.gethostname(),
        }
        threads = str(max(1, int(num_cpus)))
        child_env = {k: v for k, v in os.environ.items() if k not in _KEEP_OUT}
        child_env.update(env)  # the run's variables (mosaic_core.node.prepared_env), secrets included
        child_env.update({name: threads for name in THREAD_VARS})  # this node's share, not the caller's
        child_env[NODE_ENV] = json.dumps(node)
        if relaying:
            child_env.update(self._open_relays(run_id, config_text, relaying))
        command = procs.python_command(
            sys.executable, "-m", "mosaic_core.node", str(self.run_dir), *(host_flags or []), "--num-cpus", threads
        )
        self.proc = subprocess.Popen(
            command,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=child_env,
            cwd=self.work,
            start_new_session=True,
            preexec_fn=_child_setup(procs.parent_death_signal_setter(signal.SIGTERM)),
        )
        threading.Thread(target=self._pump, args=(self.proc.stdout, self.lines), daemon=True).start()
        threading.Thread(target=self._pump, args=(self.proc.stderr, self.stderr), daemon=True).start()
        return {**node, "run_dir": str(self.run_dir), "pid": self.proc.pid, "seeded": seeded}

    def _seed(self, seed: bytes) -> dict[str, list[int]]:
        """The caller's checkpoint into this run directory (no links, nothing outside it)."""
        assert self.run_dir is not None
        if not seed:
            return {}
        unpack(seed, self.run_dir)
        seeded = {}
        for path in self.run_dir.rglob("*"):
            if path.is_file() and not path.is_symlink():
                found = path.stat()
                seeded[str(path.relative_to(self.run_dir))] = [found.st_size, found.st_mtime_ns]
        return seeded

    def _pump(self, stream: Any, into: list[str]) -> None:
        for line in stream:
            with self.changed:
                into.append(line.rstrip("\n"))
                self.changed.notify_all()
        with self.changed:
            if into is self.lines:
                self.stdout_done = True
            self.changed.notify_all()

    def _open_relays(self, run_id: str, config_text: str, relaying: list[str]) -> dict[str, str]:
        from mosaic_core.toolkit import plugin_host

        extras = json.loads(config_text).get("extras") or {}
        env: dict[str, str] = {}
        for plugin, relay in plugin_host().run_relays(run_id, extras, "node").items():
            if plugin not in relaying:  # the caller has no side for it
                _close_quietly(relay)
                continue
            try:
                env.update(relay.node_env())
            except Exception as exc:  # isolate: that plugin relays nothing; the run goes on (the caller records it)
                self.relay_failures[plugin] = f"{type(exc).__name__}: {exc}"
                _close_quietly(relay)
                continue
            self.relays[plugin] = relay
        return env

    def read(self, since: int, marks: dict[str, Any] | None = None, wait: float = 0.0) -> dict[str, Any]:
        """Event lines from index ``since``; ``returncode`` once the run has ended (all lines read);
        with ``marks`` (plugin -> what the caller has), each plugin's relayed items. ``wait``: up to
        that many seconds for a line or the end when there is none yet (a long poll: each line
        reaches the caller as it comes, without the caller asking again and again)."""
        assert self.proc is not None
        with self.changed:
            self.changed.wait_for(lambda: len(self.lines) > since or self.stdout_done, timeout=wait)
            quiet_end = self.stdout_done and len(self.lines) <= since
        if quiet_end:  # its output ended: its exit is a moment away
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(timeout=wait)
        code = self.proc.poll()
        with self.changed:
            if code is not None and not self.stdout_done:  # its last lines are still in the pipe
                self.changed.wait_for(lambda: self.stdout_done, timeout=1.0)
            lines = [_missing_here(line) for line in self.lines[since:]]
            tail = self.stderr[-STDERR_TAIL:] if code is not None else []
        relayed = {}
        for plugin, mark in (marks or {}).items():
            relay = self.relays.get(plugin)
            try:
                relayed[plugin] = relay.collect(mark) if relay is not None else []
            except Exception as exc:  # isolate: a plugin whose relay fails relays nothing more (recorded by the caller)
                self.relay_failures[plugin] = f"{type(exc).__name__}: {exc}"
                _close_quietly(self.relays.pop(plugin))
        failures, self.relay_failures = self.relay_failures, {}
        return {"lines": lines, "returncode": code, "stderr_tail": tail, "relayed": relayed, "relay_failures": failures}

    def cancel(self, note: str | None, signum: int = signal.SIGINT) -> None:
        """Ask the run to stop as the caller was asked: ``note`` (a sweep's pruning decision) into
        its cancel note, then the caller's signal to its ``mosaic run`` host, which ends the
        training process and records ``run_cancelled`` with both."""
        if self.proc is None or self.proc.poll() is not None:
            return
        if note and self.run_dir is not None and self.run_dir.is_dir():
            with contextlib.suppress(OSError):
                RunDirectory.for_run(self.run_dir.parent, self.run_dir.name).cancel_note.write_text(
                    note.splitlines()[0] + "\n", encoding="utf-8"
                )
        os.kill(self.proc.pid, signum if signum in CANCEL_SIGNALS else signal.SIGINT)

    def snapshot(self, have: dict[str, list[int]] | None = None) -> dict[str, Any]:
        """The run directory as a gzip tar (``events.jsonl`` left out: the caller writes its own),
        less the files the caller ``have`` as they are now (path -> [size, mtime_ns]): a checkpoint
        crosses once. ``files``: what the tar holds, for the caller's next ``have``."""
        buffer, sent = io.BytesIO(), dict[str, list[int]]()
        if self.run_dir is None or not self.run_dir.is_dir():
            return {"tar": b"", "files": sent}
        # level 1: checkpoints hardly compress, and level 9 cost seconds on large ones
        with tarfile.open(fileobj=buffer, mode="w:gz", compresslevel=1) as tar:
            for path in sorted(self.run_dir.rglob("*")):
                rel = str(path.relative_to(self.run_dir))
                if rel == "events.jsonl" or path.is_symlink() or not (path.is_file() or path.is_dir()):
                    continue
                if path.is_file():
                    found = path.stat()
                    stamp = [found.st_size, found.st_mtime_ns]
                    if (have or {}).get(rel) == stamp:
                        continue
                    sent[rel] = stamp
                tar.add(path, arcname=rel, recursive=False)
        return {"tar": buffer.getvalue(), "files": sent}

    def close(self) -> None:
        """Stop what is left of the run and remove this node's private copy (a run directory on
        shared storage is not in it: the caller moves that one into place)."""
        if self.proc is not None and self.proc.poll() is None:
            procs.stop_group(self.proc.pid, 5.0, self.proc)
        for relay in self.relays.values():
            _close_quietly(relay)
        self.relays.clear()
        if self.work is not None:
            shutil.rmtree(self.work, ignore_errors=True)
