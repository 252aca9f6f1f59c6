"""``run:RUN_ID[@STEP]``: a recorded run's policy in a seat, served from a process of its own.

The run is found under the match's runs root (an id or a unique prefix); an imported run nobody
trusted is refused; its checkpoint is its newest (or the one at ``STEP``) by its worker's
``checkpoint_layout``, checked by the worker (``check_checkpoint``), and its worker's
``policy_server`` command loads it (data only, as evaluation does) in a process of its own session,
so a Ctrl-C meant for the match reaches it only through :meth:`ServedPolicy.close`. The seat's
observation goes to it flattened as :func:`mosaic_arena.seated.flat_observation` makes it: the way
a policy trained in a seat (``mosaic/TicTacToe-vs-random-v0``) saw the board.
"""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import tempfile
import time
from typing import IO, Any

from mosaic_arena.operators import OperatorError, Seat

__all__ = ["READY_TIMEOUT_S", "ServedPolicy", "run_operator"]

READY_TIMEOUT_S = 300.0  # torch's import and the checkpoint's load, on a busy machine
ACT_TIMEOUT_S = 60.0
MAX_LINE = 1 << 20


def run_operator(argument: str, seat: Seat) -> ServedPolicy:
    """The operator ``run:RUN_ID[@STEP]`` for ``seat``."""
    from mosaic_core import UsageError

    ref, at, step_text = argument.partition("@")
    label = f"run:{argument}"
    if not ref:
        raise OperatorError(f"operator {label}: expected run:RUN_ID or run:RUN_ID@STEP")
    if at and not step_text.isdigit():
        raise OperatorError(f"operator {label}: the step after @ must be a whole number")
    try:
        command, summary = _server_command(ref, int(step_text) if at else None, seat)
    except (UsageError, OperatorError) as exc:
        raise OperatorError(f"operator {label}: {exc}") from None
    served = ServedPolicy(command, label)
    problem = served.fit_problem(seat)
    if problem:
        served.close()
        raise OperatorError(f"operator {label} ({summary}) does not fit seat {seat.agent} of {seat.game}: {problem}")
    return served


def _server_command(ref: str, step: int | None, seat: Seat) -> tuple[list[str], str]:
    """The worker's command serving the run's checkpoint, and a few words on the run."""
    from mosaic_core.contract import find_checkpoints, newest_checkpoint
    from mosaic_core.toolkit import default_runs_root, find_run_dir, recorded_run, worker_python

    run_dir = find_run_dir(seat.runs_root or default_runs_root(), ref)
    worker_name, worker, config = recorded_run(run_dir)
    layout = worker.checkpoint_layout(config)
    if layout is None:
        raise OperatorError(f"run {run_dir.name}: worker {worker_name!r} keeps no checkpoints the host can load")
    if step is None:
        found = newest_checkpoint(run_dir, layout, run_dir.name)
    else:
        found = next((c for c in find_checkpoints(run_dir, layout, run_dir.name) if c.step == step), None)
    if found is None:
        steps = [str(c.step) for c in find_checkpoints(run_dir, layout, run_dir.name)]
        at = f" at step {step} (it has {', '.join(steps) or 'none'})" if step is not None else ""
        raise OperatorError(f"run {run_dir.name} has no checkpoint{at} ({layout.pattern})")
    problem = worker.check_checkpoint(found, config)
    python = None if problem else worker_python(worker_name)  # its environment: missing or stale is said here
    command = None if python is None else worker.policy_server(found, config, agent=seat.agent, python=python)
    if problem or command is None:
        raise OperatorError(problem or f"worker {worker_name!r} cannot serve a policy for a seat")
    return command, f"{config.algo} on {config.env_id}, step {found.step}"


class ServedPolicy:
    """An operator whose actions come from a policy server process (``Worker.policy_server``)."""

    reusable = True  # greedy and stateless between calls: a league keeps it across its matches

    def __init__(self, command: list[str], label: str):
        self.label = label
        self.errors: IO[bytes] = tempfile.TemporaryFile()
        self.process = subprocess.Popen(
            command,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self.errors,
            start_new_session=True,  # its own process group: stopped by close(), never left behind
        )
        self.buffer = b""
        try:
            self.ready = self._receive(READY_TIMEOUT_S, "start")
        except BaseException:
            self.close()
            raise
        if self.ready.get("type") != "ready":
            self.close()
            raise OperatorError(f"operator {label}: its server said {str(self.ready)[:200]} instead of ready")

    def fit_problem(self, seat: Seat) -> str | None:
        """Why the served policy's spaces do not fit ``seat`` (flattened as a seated learner sees it)."""
        from mosaic_arena.seated import flat_space

        wanted_obs = list(flat_space(seat.observation_space).shape)
        obs, action = self.ready.get("observation_space") or {}, self.ready.get("action_space") or {}
        if obs.get("shape") != wanted_obs:
            return f"its observations have shape {obs.get('shape')}, the seat's (flattened) {wanted_obs}"
        wanted_n = getattr(seat.action_space, "n", None)
        if action.get("type") != "Discrete" or action.get("n") != wanted_n:
            return f"its actions are {action.get('type')}({action.get('n', '')}), the seat's {seat.action_space}"
        return None

    def reset(self, seed: int) -> None:
        pass  # a greedy policy: the same observation, the same action

    def act(self, observation: Any, info: dict[str, Any]) -> Any:
        from mosaic_arena.seated import flat_observation

        self._send({"cmd": "act", "observation": flat_observation(observation).tolist()})
        answer = self._receive(ACT_TIMEOUT_S, "act")
        if answer.get("type") != "act":
            raise RuntimeError(f"operator {self.label}: {answer.get('message') or answer}")
        return answer.get("action")

    def close(self) -> None:
        """Ask the server to stop; after a few seconds, end its process group."""
        if self.process.poll() is None:
            try:
                self._send({"cmd": "stop"})
                self.process.stdin.close()  # type: ignore[union-attr]
                self.process.wait(timeout=5)
            except (OSError, ValueError, subprocess.TimeoutExpired):
                pass
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait()
        self.errors.close()

    def _send(self, message: dict[str, Any]) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(json.dumps(message).encode() + b"\n")
        self.process.stdin.flush()

    def _receive(self, timeout: float, what: str) -> dict[str, Any]:
        """The server's next JSON line; :class:`OperatorError` (its stderr's last line) if it ends or stalls."""
        deadline = time.monotonic() + timeout
        out = self.process.stdout
        assert out is not None
        while b"\n" not in self.buffer:
            left = deadline - time.monotonic()
            if left <= 0 or len(self.buffer) > MAX_LINE:
                self.close()
                raise OperatorError(f"operator {self.label}: no answer to {what} within {timeout:.0f} s")
            readable, _, _ = select.select([out], [], [], min(left, 1.0))
            chunk = os.read(out.fileno(), 65536) if readable else b""
            if readable and not chunk:
                raise OperatorError(f"operator {self.label}: its server ended ({self._last_error()})")
            self.buffer += chunk
        line, _, self.buffer = self.buffer.partition(b"\n")
        try:
            message = json.loads(line)
        except ValueError:
            message = None
        if not isinstance(message, dict):
            raise OperatorError(f"operator {self.label}: its server sent a line that is not a JSON object")
        return message

    def _last_error(self) -> str:
        code = self.process.wait()
        self.errors.seek(0)
        lines = [line for line in self.errors.read()[-4000:].decode(errors="replace").splitlines() if line.strip()]
        return (lines[-1][:300] if lines else "no message") + f"; exit code {code}"
