"""The worker contract suite: the run contract (docs/run-contract.md) checked for real, for any
worker, the way Hydra's ``LauncherTestSuite`` checks a launcher. A worker's tests subclass
:class:`WorkerContractSuite` and say how a short run of theirs looks; pytest collects the
inherited tests::

    from mosaic_core.testing.contract_suite import WorkerContractSuite

    class TestMyWorkerContract(WorkerContractSuite):
        worker = "my-worker"
        algo = "random"
        env_id = "CartPole-v1"
        total_timesteps = 4000          # long enough that a stop at its first report lands mid-run
        extras = {"checkpoint_frequency": 1000}

Every test runs the real ``mosaic`` command line in a fresh folder with its own runs root; nothing
is mocked. The suite has two tiers.

**The fast tier** starts no training: it runs dry runs, refusals and reads of files, calling the
CLI's ``main`` in the test's process (:meth:`host`: the same code from the arguments on, without
a Python start-up per case); ``test_a_bad_standard_key_is_refused_from_the_command_line`` is its
one case through the ``mosaic`` command itself.

- ``test_the_host_checks_the_standard_keys`` (in process) and
  ``test_a_bad_standard_key_is_refused_from_the_command_line`` (its first case, end to end): a bad value of a run-contract key (``mode``,
  ``checkpoint_frequency``, ``eval_*``, ``torch_threads``…) in a config file is refused by the
  host's one check (:func:`mosaic_core.contract.standard_key_problems`) in one line naming the key,
  the file and what was expected, exit code 2, nothing left behind; the same line for every worker
  (``checkpoint_frequency: 0`` is valid for every worker);
- ``test_checkpoints_follow_the_layout``: the completed run's checkpoints are found by the worker's
  ``checkpoint_layout`` (newest last), the newest passes its ``check_checkpoint``, and its events
  end with one terminal event;
- ``test_bad_input_is_one_line``'s first half, ``test_completed_run_is_not_resumed``'s refusal,
  ``test_evaluate_refuses_bad_input``: refusals, one line each, exit code 2, files untouched (the
  first and ``evaluate`` of a run that does not exist in process, the others through the command).

**The end-to-end tier** is one real run per clause, shared by the tests that only read it
(class-scoped fixtures): ``completed`` (a run trained to its budget; its copies serve the
completed-run and evaluate tests), ``restarted`` (a copy of it started over with ``--restart`` and
stopped once started), and ``stopped_and_resumed`` (a run stopped at :attr:`stop_step` and resumed).

- ``test_trains_with_metrics_and_a_checkpoint``, ``test_plugins_find_what_they_promise``: the
  completed run's events carry metric steps and checkpoints; every plugin's ``mosaic_check_run``
  finds what it promises;
- ``test_stop_and_resume_is_one_history``: SIGTERM once the training program reports a step at or
  past :attr:`stop_step` (its first report by default: the most budget left, on any machine) ends
  the run as a resumable ``run_cancelled``; ``mosaic resume`` continues it to the budget in the same
  directory, one history whose metric steps never go back;
- ``test_completed_run_is_not_resumed``: resuming a completed run is one line naming ``--restart``;
  ``--restart`` starts it over (one ``run_started`` in a new log);
- ``test_evaluate_writes_the_one_schema`` (only when :attr:`evaluate` is true);
- ``test_a_resume_starts_from_the_checkpoints_weights_and_step`` (only when :attr:`resume_state` is
  true: a worker whose resume cannot be bit for bit, docs/resume-and-evaluate-workers.md): the
  learner the worker's resume path restores from the stop's checkpoint has the checkpoint's step and
  exactly its weights (the subclass's :meth:`restored_state` against :meth:`checkpoint_weights`,
  read as data), and the resumed attempt updates on the completed run's steps (:meth:`update_steps`);
- ``test_bad_input_is_one_line``: the run stopped once started either kept a checkpoint (then it is
  resumable from it, said in its ``run_cancelled``) or did not (then it says why, and ``mosaic
  resume`` refuses it in one line naming the missing checkpoint, its log untouched).

Knobs (class attributes): ``worker``, ``algo``, ``env_id``, ``total_timesteps``, ``extras``,
``seed``, ``evaluate``, ``resume_state``, ``stop_step``, ``timeout`` (seconds per command), ``env`` (extra environment
variables for the CLI). A worker whose environment must be built first overrides the class-scoped
``worker_env`` fixture (the variables it returns are added to ``env``). Helpers a subclass may use
in its own tests: :meth:`cli`, :meth:`host`, :meth:`start`, :meth:`events`, :meth:`run_dir`,
:meth:`stop_at`, :meth:`copy_of` (a copy of the ``completed`` run in this test's runs root).
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import pytest

from mosaic_core.events import TERMINAL, event_step, metric_steps, one_history, read_events
from mosaic_core.runstore.index import list_runs

HOST_VARS = ("MOSAIC_CHILD", "MOSAIC_CHANNEL", "MOSAIC_RUNS_DIR")
ENDS = set(TERMINAL)

# A bad value of each kind of standard key, and the host's one line about it (the same for every
# worker). The last case gives checkpoint_frequency 0, valid everywhere: only eval_seed is refused.
BAD_STANDARD_KEYS: dict[str, tuple[dict[str, Any], str]] = {
    "negative checkpoint_frequency": (
        {"checkpoint_frequency": -1},
        "extras.checkpoint_frequency must be an integer >= 0, got -1",
    ),
    "zero eval_episodes": ({"eval_episodes": 0}, "extras.eval_episodes must be an integer >= 1, got 0"),
    "torch_threads as text": ({"torch_threads": "2"}, "extras.torch_threads must be an integer >= 1, got '2'"),
    "switch as text": ({"eval_deterministic": "yes"}, "extras.eval_deterministic must be true or false, got 'yes'"),
    "unknown mode": ({"mode": "play"}, "extras.mode must be one of train, resume, evaluate"),
    "evaluate without a checkpoint": (
        {"mode": "evaluate"},
        "extras.checkpoint_path is required for mode 'evaluate'",
    ),
    "a video in training": (
        {"eval_capture_video": True},
        "extras.eval_capture_video: a video is recorded in mode evaluate only",
    ),
    "checkpoint_frequency 0 is valid": (
        {"checkpoint_frequency": 0, "eval_seed": -1},
        "extras.eval_seed must be an integer >= 0, got -1",
    ),
}


@dataclass(frozen=True)
class StopAndResume:
    run_dir: Path
    stop_code: int
    stop_stderr: str
    cancelled: dict[str, Any]  # the stopped attempt's last event
    stopped_checked: list[str]  # the plugins' check_run of the stopped run
    resumed: subprocess.CompletedProcess[str]  # `mosaic resume`


def _same_array(a: Any, b: Any) -> bool:
    import numpy as np

    a, b = np.asarray(a), np.asarray(b)
    return a.shape == b.shape and a.dtype == b.dtype and bool(np.array_equal(a, b))


class WorkerContractSuite:
    worker: ClassVar[str] = ""
    algo: ClassVar[str] = ""
    env_id: ClassVar[str] = ""
    total_timesteps: ClassVar[int] = 4000
    seed: ClassVar[int] = 1
    extras: ClassVar[dict[str, Any]] = {}
    evaluate: ClassVar[bool] = False
    resume_state: ClassVar[bool] = False  # the clause of test_a_resume_starts_from_the_checkpoints_weights_and_step
    stop_step: ClassVar[int] = 1  # the stop test's SIGTERM: once a step at or past this is reported
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

    @classmethod
    def _maker(cls, tmp_path_factory: pytest.TempPathFactory, worker_env: dict[str, str], name: str) -> Any:
        """A suite object in a folder of its own, for a class-scoped fixture."""
        maker = cls()
        maker.folder = tmp_path_factory.mktemp(name)
        maker.runs_root = maker.folder / "runs"
        maker.env = {**maker.env, **worker_env}
        return maker

    @pytest.fixture(scope="class")
    @classmethod
    def completed(cls, tmp_path_factory: pytest.TempPathFactory, worker_env: dict[str, str]) -> Path:
        """The directory of this worker's short run (run id ``trained``), completed once per suite."""
        maker = cls._maker(tmp_path_factory, worker_env, "completed")
        result = maker.cli(*maker.run_args("trained"))
        assert result.returncode == 0, result.stderr[-3000:]
        return Path(maker.run_dir("trained"))

    @pytest.fixture(scope="class")
    @classmethod
    def restarted(
        cls, completed: Path, tmp_path_factory: pytest.TempPathFactory, worker_env: dict[str, str]
    ) -> tuple[Path, int, str]:
        """A copy of the completed run started over with ``--restart`` and stopped once started:
        (its directory, the host's exit code, its stderr), once per suite."""
        maker = cls._maker(tmp_path_factory, worker_env, "restarted")
        run_id = maker.copy_of(completed)
        code, err = maker.stop_at(maker.start(*maker.run_args(run_id, "--restart")), run_id, None)
        return Path(maker.run_dir(run_id)), code, err

    @pytest.fixture(scope="class")
    @classmethod
    def stopped_and_resumed(cls, tmp_path_factory: pytest.TempPathFactory, worker_env: dict[str, str]) -> StopAndResume:
        """The run (id ``stopped``) SIGTERMed once it reports :attr:`stop_step`, then ``mosaic resume``d
        to its budget, once per suite."""
        from mosaic_core.plugins import plugin_host

        maker = cls._maker(tmp_path_factory, worker_env, "stopped")
        code, err = maker.stop_at(maker.start(*maker.run_args("stopped")), "stopped", cls.stop_step)
        cancelled = maker.events("stopped")[-1]
        checked = plugin_host().check_run(maker.run_dir("stopped"))
        resumed = maker.cli("resume", "stop", "--runs-dir", str(maker.runs_root), "--json", "--quiet")
        return StopAndResume(maker.run_dir("stopped"), code, err, cancelled, checked, resumed)

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

    def host(self, *args: str) -> subprocess.CompletedProcess[str]:
        """``mosaic ARGS`` in this process: the CLI's ``main`` with the suite's folder as the working
        directory and its environment (the plugins loaded as that environment says), stdout and
        stderr captured, for commands that start no training (a refusal, a dry run); the process's
        environment, folder and plugin host are put back after."""
        from mosaic_core.cli.main import main

        out, err = io.StringIO(), io.StringIO()
        with _environment(self._env()), contextlib.chdir(self.folder), _own_plugin_host():
            with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
                try:
                    code = main(list(args))
                except SystemExit as stopped:  # argparse's usage errors
                    code = stopped.code if isinstance(stopped.code, int) else 1
        return subprocess.CompletedProcess(["mosaic", *args], code, out.getvalue(), err.getvalue())

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
        a checkpoint; None: once it started), or once it ends; (exit code, stderr). What triggers
        the stop is a step the training program wrote, never a time."""
        deadline = time.monotonic() + self.timeout
        while process.poll() is None and time.monotonic() < deadline:
            events = self.events(run_id) if self.run_dir(run_id).is_dir() else []
            names = [e["event"] for e in events]
            if step is None and "run_started" in names and not set(names[names.index("run_started") :]) & ENDS:
                break  # started and not ended (a restarted run's old log ended: it waits for the new one)
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

    def test_stop_and_resume_is_one_history(self, stopped_and_resumed: StopAndResume) -> None:
        from mosaic_core.plugins import plugin_host

        run, end = stopped_and_resumed, stopped_and_resumed.cancelled
        assert end["event"] == "run_cancelled" and run.stop_code != 0, (run.stop_code, end, run.stop_stderr[-2000:])
        assert run.stopped_checked == []  # a cancelled run's plugins find what they promise too
        assert end["payload"]["resumable"] is True, end
        from_step = end["payload"]["from_step"]
        assert 0 < from_step < self.total_timesteps and Path(end["payload"]["checkpoint"]).exists()

        assert run.resumed.returncode == 0, run.resumed.stderr[-3000:]
        assert f"from step {from_step}" in run.resumed.stderr
        events = read_events(run.run_dir / "events.jsonl")
        marks = [e for e in events if e["event"] == "run_resumed"]
        assert [m["payload"]["attempt"] for m in marks] == [1] and marks[0]["payload"]["from_step"] == from_step
        assert events[-1]["event"] == "run_completed"
        assert plugin_host().check_run(run.run_dir) == []
        history = one_history(events)
        steps = metric_steps(history)
        assert steps and all(a <= b for a, b in zip(steps, steps[1:])), steps  # never back (a closing
        # metrics event may repeat the last step)
        assert self.total_timesteps * 0.9 <= max(steps) <= self.total_timesteps, steps  # the budget (its last batch)

    def test_a_resume_starts_from_the_checkpoints_weights_and_step(
        self, stopped_and_resumed: StopAndResume, completed: Path
    ) -> None:
        """The optional clause (:attr:`resume_state`): a worker that cannot resume bit for bit (its
        env runners' or samplers' random state is not restored) holds the closest property:
        the learner its resume path restores from the stop's checkpoint has exactly the weights
        saved in that checkpoint (read as data) and the checkpoint's step, and the resumed attempt
        updates on the steps the uninterrupted run updated on."""
        if not self.resume_state:
            pytest.skip(f"worker {self.worker!r}: the resume-state clause is off (resume_state = False)")
        checkpoint = Path(stopped_and_resumed.cancelled["payload"]["checkpoint"])
        from_step = stopped_and_resumed.cancelled["payload"]["from_step"]
        saved = self.checkpoint_weights(checkpoint)
        step, restored = self.restored_state(checkpoint)
        assert step == from_step, (step, from_step)
        assert saved and sorted(restored) == sorted(saved), (sorted(restored), sorted(saved))
        unequal = [name for name in saved if not _same_array(restored[name], saved[name])]
        assert not unequal, f"restored weights differ from the checkpoint's: {unequal[:5]}"
        after = [s for s in self.update_steps(stopped_and_resumed.run_dir) if s > from_step]
        whole = [s for s in self.update_steps(completed) if s > from_step]
        assert after and after == whole, (after, whole)

    def update_steps(self, run_dir: Path) -> list[int]:
        """The env steps at which the run's learner updated, in order (of a resumed run, both
        attempts'), read from the run's files; a worker that turns :attr:`resume_state` on says
        where (metric events come by time, not per update)."""
        raise NotImplementedError(f"worker {self.worker!r}: resume_state needs update_steps")

    def checkpoint_weights(self, checkpoint: Path) -> dict[str, Any]:
        """The learner's weights saved in ``checkpoint``, by name, read as data (nothing in the
        file runs). A worker that turns :attr:`resume_state` on says how."""
        raise NotImplementedError(f"worker {self.worker!r}: resume_state needs checkpoint_weights")

    def restored_state(self, checkpoint: Path) -> tuple[int, dict[str, Any]]:
        """The worker's own resume path run on ``checkpoint`` in its environment: the step it
        resumes from and its learner's weights (and any copies it samples with), by name, as
        restored. A worker that turns :attr:`resume_state` on says how."""
        raise NotImplementedError(f"worker {self.worker!r}: resume_state needs restored_state")

    def test_completed_run_is_not_resumed(self, completed: Path, restarted: tuple[Path, int, str]) -> None:
        done = self.copy_of(completed)
        log = (self.run_dir(done) / "events.jsonl").read_bytes()
        again = self.cli("resume", done, "--runs-dir", str(self.runs_root))
        self.one_line(again, "completed", "--restart")
        assert (self.run_dir(done) / "events.jsonl").read_bytes() == log
        run_dir, code, err = restarted  # `mosaic run --restart` of the same copy: stopped once started
        started = [e["event"] for e in read_events(run_dir / "events.jsonl")].count("run_started")
        assert started == 1, (code, err[-3000:])  # started over, not appended

    def test_evaluate_writes_the_one_schema(self, completed: Path) -> None:
        if not self.evaluate:
            pytest.skip(f"worker {self.worker!r}: the suite's evaluate test is off (evaluate = False)")
        played = self.copy_of(completed)
        listed = {s.run_id: s for s in list_runs(self.runs_root)}[self.run_dir(played).name]  # its row sealed
        result = self.cli("evaluate", played, "--episodes", "2", "--runs-dir", str(self.runs_root))
        assert result.returncode == 0, result.stderr[-3000:]
        (found,) = (self.run_dir(played) / "evaluations").glob("eval-*/eval.json")  # mosaic evaluate's (not a save's)
        document = json.loads(found.read_text())
        assert document["schema"] == "mosaic.eval/1" and len(document["episodes"]) == 2
        assert document["worker"] == self.worker and document["env_id"] == self.env_id
        scored = {s.run_id: s for s in list_runs(self.runs_root)}[listed.run_id].score  # the listing follows it
        assert scored == {"value": document["mean"], "source": "eval", "episodes": 2, "step": document["global_step"]}
        assert listed.score != scored, listed.score

    def test_bad_input_is_one_line(self, restarted: tuple[Path, int, str]) -> None:
        self.one_line(self.host("resume", "no-such-run", "--runs-dir", str(self.runs_root)), "no-such-run")
        run_dir = restarted[0]  # stopped once started: with or without a checkpoint
        events = read_events(run_dir / "events.jsonl")
        end = events[-1]
        assert end["event"] == "run_cancelled", (end, restarted[2][-2000:])
        saved = [e["payload"] for e in events if e["event"] == "checkpoint_saved"]
        if saved:  # the worker saved on the stop: the run goes on from that checkpoint
            assert end["payload"]["resumable"] is True, end
            assert Path(end["payload"]["checkpoint"]).exists(), end
            assert end["payload"]["from_step"] == max(self._saved_step(p) for p in saved), (end, saved)
            return
        assert end["payload"].get("resumable") is False and isinstance(end["payload"].get("not_resumable"), str), end
        log = (run_dir / "events.jsonl").read_bytes()
        self.one_line(self.cli("resume", run_dir.name, "--runs-dir", str(run_dir.parent)), "no checkpoint")
        assert (run_dir / "events.jsonl").read_bytes() == log

    @staticmethod
    def _saved_step(payload: dict[str, Any]) -> int:
        step = payload.get("step", payload.get("global_step"))
        assert isinstance(step, int), payload
        return step

    # -------------------------------------------------------------------------------- the fast tier
    @pytest.mark.parametrize("case", BAD_STANDARD_KEYS)
    def test_the_host_checks_the_standard_keys(self, case: str) -> None:
        self._bad_standard_key(case, self.host)

    def test_a_bad_standard_key_is_refused_from_the_command_line(self) -> None:
        self._bad_standard_key(next(iter(BAD_STANDARD_KEYS)), self.cli)

    def _bad_standard_key(self, case: str, mosaic: Any) -> None:
        bad, said = BAD_STANDARD_KEYS[case]
        config = self.folder / "bad.json"
        data = {"algo": self.algo, "env_id": self.env_id, "total_timesteps": self.total_timesteps}
        config.write_text(json.dumps({**data, "seed": self.seed, "extras": {**self.extras, **bad}}))
        done = mosaic(
            "run", "--worker", self.worker, "--config", str(config), "--run-id", "bad",
            "--runs-dir", str(self.runs_root), "--dry-run",
        )  # fmt: skip
        self.one_line(done, said, f"invalid config in {config}")
        assert "checkpoint_frequency" not in done.stderr or "checkpoint_frequency" in said, done.stderr
        assert not self.run_dir("bad").exists()

    def test_checkpoints_follow_the_layout(self, completed: Path) -> None:
        from mosaic_core.config import FIELDS, WorkerConfig
        from mosaic_core.contract import find_checkpoints
        from mosaic_core.worker import load_worker
        from mosaic_core.workers import find_worker

        worker = load_worker(find_worker(self.worker))
        recorded = json.loads((completed / "config.json").read_text())
        config = WorkerConfig.from_dict({k: v for k, v in recorded.items() if k in FIELDS})
        layout = worker.checkpoint_layout(config)
        assert layout is not None, f"worker {self.worker!r} declares no checkpoint layout: nothing can be resumed"
        found = find_checkpoints(completed, layout, config.run_id)
        assert found and worker.check_checkpoint(found[-1], config) is None, found
        events = read_events(completed / "events.jsonl")
        saved = {self._saved_step(e["payload"]) for e in events if e["event"] == "checkpoint_saved"}
        assert {c.step for c in found} <= saved, (found, saved)  # each announced when it was written
        terminal = [e["event"] for e in events if e["event"] in ENDS]
        assert terminal == ["run_completed"] and events[-1]["event"] == "run_completed", terminal

    def test_evaluate_refuses_bad_input(self) -> None:
        self.runs_root.mkdir(mode=0o700)
        self.one_line(self.host("evaluate", "nope", "--runs-dir", str(self.runs_root)), "no run 'nope'")
        self.one_line(  # the clause's case through the command itself
            self.cli("evaluate", "any", "--episodes", "0", "--runs-dir", str(self.runs_root)), "--episodes must be"
        )
        assert list(self.runs_root.iterdir()) == []


@contextlib.contextmanager
def _environment(wanted: dict[str, str]) -> Iterator[None]:
    """``os.environ`` is ``wanted`` inside, as it was after."""
    before = dict(os.environ)
    os.environ.clear()
    os.environ.update(wanted)
    try:
        yield
    finally:
        os.environ.clear()
        os.environ.update(before)


@contextlib.contextmanager
def _own_plugin_host() -> Iterator[None]:
    """The process's plugin host loaded afresh inside (from the environment there), and after."""
    from mosaic_core.plugins import plugin_host

    plugin_host.cache_clear()
    try:
        yield
    finally:
        plugin_host.cache_clear()
