"""The worker contract suite: the run contract (docs/run-contract.md) checked for real, for any
worker, the way Hydra's ``LauncherTestSuite`` checks a launcher. A worker's tests subclass
:class:`WorkerContractSuite` and say how a short run of theirs looks; pytest collects the
inherited tests::

    from mosaic_core.testing.contract_suite import WorkerContractSuite

    class TestMyWorkerContract(WorkerContractSuite):
        worker = "my-worker"
        algo = "random"
        env_id = "CartPole-v1"
        total_timesteps = 4000          # long enough that a SIGTERM lands mid-run
        extras = {"checkpoint_frequency": 1000}

Every test runs the real ``mosaic`` command line in a fresh folder (``tmp_path``) with its own
runs root; nothing is mocked. The tests that need only a finished run (the first, the completed one,
evaluate) each get a copy of one run, completed once per suite (the ``completed`` fixture), rather
than training again. What the suite checks:

- ``test_trains_with_metrics_and_a_checkpoint``: a run completes, its events carry metric
  steps, and the worker's ``checkpoint_layout`` finds a checkpoint at the end;
- ``test_plugins_find_what_they_promise``: every installed plugin's ``mosaic_check_run`` finds
  what it promises in the completed run (the analytics plugin: MOSAIC's ``analytics.json``, in its
  shape, carried by ``run_completed``), so a plugin's promise holds for every worker;
- ``test_stop_and_resume_is_one_history``: SIGTERM near the middle ends the run as a resumable
  ``run_cancelled`` (``from_step``, ``checkpoint``; the plugins' checks pass on it too);
  ``mosaic resume`` continues it in the same
  directory (``run_resumed``) to the budget, and the metric steps, read as one history, never go
  back;
- ``test_completed_run_is_not_resumed``: resuming a completed run is one line naming
  ``--restart``, exit code 2, the run's files untouched; ``--restart`` starts it over (a new
  event log, stopped once started);
- ``test_evaluate_writes_the_one_schema``: (only when :attr:`evaluate` is true) ``mosaic
  evaluate RUN --episodes 2`` writes ``mosaic.eval/1`` under ``RUN_DIR/evaluations/``;
- ``test_bad_input_is_one_line``: a run with no checkpoint to resume (its ``run_cancelled``
  says why, ``not_resumable``) and an unknown run id: one line, exit code 2, no traceback.

Knobs (class attributes): ``worker``, ``algo``, ``env_id``, ``total_timesteps``, ``extras``,
``seed``, ``evaluate``, ``timeout`` (seconds per command), ``env`` (extra environment
variables for the CLI). A worker whose environment must be built first overrides the class-scoped
``worker_env`` fixture (the variables it returns are added to ``env``). Helpers a subclass may use
in its own tests: :meth:`cli`, :meth:`start`, :meth:`events`, :meth:`run_dir`, :meth:`stop_at`,
:meth:`copy_of` (a copy of the ``completed`` run in this test's runs root).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, ClassVar

import pytest

from mosaic_core.events import event_step, metric_steps, one_history, read_events

HOST_VARS = ("MOSAIC_CHILD", "MOSAIC_CHANNEL", "MOSAIC_RUNS_DIR")


class WorkerContractSuite:
    worker: ClassVar[str] = ""
    algo: ClassVar[str] = ""
    env_id: ClassVar[str] = ""
    total_timesteps: ClassVar[int] = 4000
    seed: ClassVar[int] = 1
    extras: ClassVar[dict[str, Any]] = {}
    evaluate: ClassVar[bool] = False
    timeout: ClassVar[float] = 300.0
    env: dict[str, str] = {}  # reassigned per test (never changed in place)

    # -------------------------------------------------------------------------------- helpers
    @pytest.fixture(scope="class")
    @classmethod
    def worker_env(cls) -> dict[str, str]:
        """Environment variables the CLI needs beyond ``env``: a subclass overrides this fixture
        (class-scoped) to build its worker's environment first."""
        return {}

    @pytest.fixture(autouse=True)
    def _folder(self, tmp_path: Path, worker_env: dict[str, str]) -> None:
        self.folder = tmp_path
        self.runs_root = tmp_path / "runs"
        self.env = {**self.env, **worker_env}

    @pytest.fixture(scope="class")
    @classmethod
    def completed(cls, tmp_path_factory: pytest.TempPathFactory, worker_env: dict[str, str]) -> Path:
        """The directory of this worker's short run (run id ``trained``), completed once per suite."""
        maker = cls()
        maker.folder = tmp_path_factory.mktemp("completed")
        maker.runs_root = maker.folder / "runs"
        maker.env = {**maker.env, **worker_env}
        result = maker.cli(*maker.run_args("trained"))
        assert result.returncode == 0, result.stderr[-3000:]
        return maker.run_dir("trained")

    def copy_of(self, completed: Path) -> str:
        """Copy the ``completed`` run into this test's runs root; its run id."""
        shutil.copytree(completed, self.run_dir(completed.name), symlinks=True)
        return completed.name

    def _env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if k not in HOST_VARS}
        return {**env, "PYTHONUNBUFFERED": "1", **self.env}

    def _argv(self, *args: str) -> list[str]:
        return [str(Path(sys.executable).parent / "mosaic"), *args]

    def cli(self, *args: str) -> subprocess.CompletedProcess[str]:
        """``mosaic ARGS`` run to its end in the suite's folder."""
        return subprocess.run(
            self._argv(*args), cwd=self.folder, env=self._env(), capture_output=True, text=True, timeout=self.timeout
        )

    def run_args(self, run_id: str, *more: str) -> list[str]:
        """``mosaic run`` of this worker's short run, with ``run_id``."""
        return [
            "run",
            "--worker",
            self.worker,
            "--algo",
            self.algo,
            "--env-id",
            self.env_id,
            "--total-timesteps",
            str(self.total_timesteps),
            "--seed",
            str(self.seed),
            "--run-id",
            run_id,
            "--runs-dir",
            str(self.runs_root),
            "--json",
            "--quiet",
            "--extras",
            json.dumps(self.extras),
            *more,
        ]

    def start(self, *args: str) -> subprocess.Popen[str]:
        """``mosaic ARGS`` started, not waited for."""
        return subprocess.Popen(
            self._argv(*args),
            cwd=self.folder,
            env=self._env(),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )

    def run_dir(self, run_id: str) -> Path:
        return self.runs_root / run_id

    def events(self, run_id: str) -> list[dict[str, Any]]:
        return read_events(self.run_dir(run_id) / "events.jsonl")

    def stop_at(self, process: subprocess.Popen[str], run_id: str, step: int | None) -> tuple[int, str]:
        """SIGTERM the host once the run reports a step at or past ``step`` (a metric event or
        a checkpoint; None: once it started), or once it ends; (exit code, stderr)."""
        deadline = time.monotonic() + self.timeout
        while process.poll() is None and time.monotonic() < deadline:
            events = self.events(run_id) if self.run_dir(run_id).is_dir() else []
            if step is None and any(e["event"] == "run_started" for e in events):
                break
            reported = [event_step(e) or (e.get("payload") or {}).get("step") for e in events]
            if step is not None and any(isinstance(s, int) and s >= step for s in reported):
                break
            time.sleep(0.05)
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
        _out, err = process.communicate(timeout=self.timeout)
        return process.returncode, err

    @staticmethod
    def one_line(result: subprocess.CompletedProcess[str], *words: str) -> None:
        lines = [line for line in result.stderr.splitlines() if line.strip()]
        assert result.returncode == 2, result.stderr[-2000:]
        assert len(lines) == 1 and "Traceback" not in result.stderr, result.stderr[-2000:]
        for word in words:
            assert word in lines[0], (word, lines[0])

    # -------------------------------------------------------------------------------- the contract
    def test_trains_with_metrics_and_a_checkpoint(self, completed: Path) -> None:
        events = read_events(completed / "events.jsonl")
        assert events[-1]["event"] == "run_completed"
        assert any(event_step(e) is not None for e in events), "no metric event carried a global_step"
        saved = [e["payload"] for e in events if e["event"] == "checkpoint_saved"]
        assert saved, "no checkpoint_saved event"
        assert all(Path(p["path"]).exists() for p in saved)

    def test_plugins_find_what_they_promise(self, completed: Path) -> None:
        from mosaic_core.plugins import plugin_host

        assert plugin_host().check_run(completed) == []

    def test_stop_and_resume_is_one_history(self) -> None:
        from mosaic_core.plugins import plugin_host

        process = self.start(*self.run_args("stopped"))
        code, err = self.stop_at(process, "stopped", self.total_timesteps // 2)
        events = self.events("stopped")
        end = events[-1]
        assert end["event"] == "run_cancelled" and code != 0, (code, end, err[-2000:])
        assert plugin_host().check_run(self.run_dir("stopped")) == []  # a cancelled run's too
        assert end["payload"]["resumable"] is True, end
        from_step = end["payload"]["from_step"]
        assert 0 < from_step < self.total_timesteps and Path(end["payload"]["checkpoint"]).exists()

        resumed = self.cli("resume", "stopped"[:4], "--runs-dir", str(self.runs_root), "--json", "--quiet")
        assert resumed.returncode == 0, resumed.stderr[-3000:]
        assert f"from step {from_step}" in resumed.stderr
        events = self.events("stopped")
        marks = [e for e in events if e["event"] == "run_resumed"]
        assert [m["payload"]["attempt"] for m in marks] == [1] and marks[0]["payload"]["from_step"] == from_step
        assert events[-1]["event"] == "run_completed"
        history = one_history(events)
        steps = metric_steps(history)
        assert steps and all(a <= b for a, b in zip(steps, steps[1:])), steps  # never back (a closing
        # metrics event may repeat the last step)
        assert self.total_timesteps * 0.9 <= max(steps) <= self.total_timesteps, steps  # the budget (its last batch)

    def test_completed_run_is_not_resumed(self, completed: Path) -> None:
        done = self.copy_of(completed)
        log = (self.run_dir(done) / "events.jsonl").read_bytes()
        again = self.cli("resume", done, "--runs-dir", str(self.runs_root))
        self.one_line(again, "completed", "--restart")
        assert (self.run_dir(done) / "events.jsonl").read_bytes() == log
        restarted = self.start(*self.run_args(done, "--restart"))
        code, err = self.stop_at(restarted, done, None)  # stopped once it started: training is tested above
        started = [e["event"] for e in self.events(done)].count("run_started")
        assert started == 1, (code, err[-3000:])  # started over, not appended

    def test_evaluate_writes_the_one_schema(self, completed: Path) -> None:
        if not self.evaluate:
            pytest.skip(f"worker {self.worker!r}: the suite's evaluate test is off (evaluate = False)")
        played = self.copy_of(completed)
        result = self.cli("evaluate", played, "--episodes", "2", "--runs-dir", str(self.runs_root))
        assert result.returncode == 0, result.stderr[-3000:]
        (found,) = (self.run_dir(played) / "evaluations").glob("eval-*/eval.json")  # mosaic evaluate's (not a save's)
        document = json.loads(found.read_text())
        assert document["schema"] == "mosaic.eval/1" and len(document["episodes"]) == 2
        assert document["worker"] == self.worker and document["env_id"] == self.env_id

    def test_bad_input_is_one_line(self) -> None:
        self.one_line(self.cli("resume", "no-such-run", "--runs-dir", str(self.runs_root)), "no-such-run")
        process = self.start(*self.run_args("early"))
        self.stop_at(process, "early", None)  # once started: before its first checkpoint, as a rule
        if any(e["event"] == "checkpoint_saved" for e in self.events("early")):
            return  # the worker saved on the stop already: nothing to refuse
        end = self.events("early")[-1]["payload"]  # it says why it cannot be continued
        assert end.get("resumable") is False and isinstance(end.get("not_resumable"), str), end
        log = (self.run_dir("early") / "events.jsonl").read_bytes()
        self.one_line(self.cli("resume", "early", "--runs-dir", str(self.runs_root)), "no checkpoint")
        assert (self.run_dir("early") / "events.jsonl").read_bytes() == log
