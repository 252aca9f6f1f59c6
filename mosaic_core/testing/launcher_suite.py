"""The launcher contract suite: what every launcher must do with a run, checked for real, the way
Hydra's ``LauncherTestSuite`` checks a launcher. A launcher's tests subclass
:class:`LauncherContractSuite`, name the launcher and give the flags (and environment) that reach
its place; pytest collects the inherited tests::

    from mosaic_core.testing.launcher_suite import LauncherContractSuite

    class TestKubeLauncherContract(LauncherContractSuite):
        launcher = "kube"
        bad_options = [(("--kube-namespace", "Nope!"), "--kube-namespace")]

        @pytest.fixture
        def launcher_flags(self, kube_cluster):      # where the runs go
            return ["--launcher", "kube", "--kube-namespace", kube_cluster.namespace]

The clauses, in process where they can be (the seam's own functions, no run), else through the
real path (the ``mosaic`` command line in a fresh folder, its own runs root, nothing mocked):

- ``test_it_is_registered_and_sound`` (in process): the launcher is discovered active, its
  methods' signatures are the base's (:func:`mosaic_core.launchers.check`), its options are
  flags, and its choice passes on as flags that choose it again (``choice.argv()``);
- ``test_bad_options_are_refused_before_anything_starts`` (in process): each of
  :attr:`bad_options` is refused by the seam (the launcher's ``validate``), naming the option;
- ``test_bad_options_are_one_line_exit_2``: the same, and :attr:`refused_at_place`, through
  ``mosaic run``: one line, exit
  code 2, no traceback, no run directory, nothing left at the place;
- ``test_a_run_reaches_its_one_terminal_event``: a short run completes; its events on stdout,
  in order (``seq`` 1..n), are exactly its ``events.jsonl`` (the relay: one history), with one
  terminal event, the last; its manifest says completed; nothing is left behind;
- ``test_a_stop_signal_cancels_it_resumable_and_resume_finishes_it``: SIGTERM to the ``mosaic
  run`` that follows a run mid-way ends it ``run_cancelled`` (naming SIGTERM), exit code 130,
  resumable from the checkpoint the stop saved, nothing left behind; ``mosaic resume`` through
  the same launcher goes on from that step to the budget, one history;
- ``test_a_sweeps_trials_run_through_it``: ``mosaic sweep run`` (the [sweep] extra) runs a
  study's trials through the launcher, each run completed.

Knobs: :attr:`launcher`, :attr:`bad_options` (refused before anything starts),
:attr:`refused_at_place` (refused when the place is asked: no such node), :attr:`sweep_trials`,
:attr:`sweep_flags`, :attr:`timeout`; the fixtures ``launcher_flags`` and ``launcher_env`` (the
place: a cluster's address, its token); :meth:`environment` (the CLI's),
:meth:`left_at_place` (what the place still holds of a run: a job) and :meth:`check_sweep` (what
a launcher's sweep shows of its own).
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
from typing import Any, ClassVar

import pytest

from mosaic_core import launchers
from mosaic_core.errors import UsageError
from mosaic_core.events import TERMINAL, metric_steps, one_history

HOST_VARS = ("MOSAIC_CHILD", "MOSAIC_CHANNEL", "MOSAIC_RUNS_DIR", "MOSAIC_LAUNCHER")
RUN = ("run", "--worker", "example", "--env-id", "CartPole-v1")
SLOW_POLICY = """import time


def act(observation, action_space):
    time.sleep(0.001)  # at most 1,000 steps a second: a signal lands mid-run
    return action_space.sample()
"""


def sweep_spec(
    study_name: str, *, max_trials: int = 4, total_timesteps: int = 512, pruner: str = 'type = "none"'
) -> str:
    """A small study of the bundled CleanRL ppo on CartPole (its learning rate sampled): the one
    sweep spec the launchers' tests share. ``pruner``: the ``[pruner]`` table's lines."""
    return f"""
study_name = "{study_name}"
algo = "ppo"
env_id = "CartPole-v1"
total_timesteps = {total_timesteps}
seeds = 1
max_trials = {max_trials}
extras = {{ num_envs = 1, num_steps = 128 }}

[objective]
metric = "charts/episodic_return"
last_n = 5

[sampler]
type = "random"
seed = 0

[pruner]
{pruner}

[params.learning_rate]
type = "float"
low = 1e-4
high = 1e-2
log = true
"""


def events_of(stdout: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in stdout.splitlines() if line.strip().startswith("{")]


class LauncherContractSuite:
    launcher: ClassVar[str] = "local"
    bad_options: ClassVar[list[tuple[tuple[str, ...], str]]] = []  # (flags, what the one line names)
    refused_at_place: ClassVar[list[tuple[tuple[str, ...], str]]] = []  # as bad_options, found when it starts
    sweep_trials: ClassVar[int] = 2
    sweep_flags: ClassVar[tuple[str, ...]] = ()  # more flags of `mosaic sweep run` (--parallel 2)
    timeout: ClassVar[float] = 300.0

    # -------------------------------------------------------------------------------- the place
    @pytest.fixture
    def launcher_flags(self) -> list[str]:
        """The flags that send a run to the launcher's place (a subclass overrides this fixture)."""
        return ["--launcher", self.launcher]

    @pytest.fixture
    def launcher_env(self) -> dict[str, str]:
        """Environment variables the CLI needs to reach the place (a cluster's token)."""
        return {}

    def left_at_place(self, run_id: str) -> list[str]:
        """What the place still holds of ``run_id`` (a job, an actor); processes are checked for every launcher."""
        return []

    def check_sweep(self, done: subprocess.CompletedProcess[str], run_dirs: list[Path]) -> None:
        """What the launcher's own sweep shows besides the suite's checks (its trials on each node)."""

    @pytest.fixture(autouse=True)
    def _place(self, tmp_path: Path, launcher_flags: list[str], launcher_env: dict[str, str]) -> None:
        self.folder, self.runs_root = tmp_path, tmp_path / "runs"
        self.flags, self.env = list(launcher_flags), dict(launcher_env)

    # -------------------------------------------------------------------------------- helpers
    def environment(self) -> dict[str, str]:
        """The CLI's environment: this process's, less the host's own variables, with ``launcher_env``."""
        env = {k: v for k, v in os.environ.items() if k not in HOST_VARS}
        return {**env, "PYTHONUNBUFFERED": "1", **self.env}

    def _argv(self, *args: str) -> list[str]:
        return [str(Path(sys.executable).parent / "mosaic"), *args]

    def cli(self, *args: str) -> subprocess.CompletedProcess[str]:
        """``mosaic ARGS`` run to its end in the suite's folder."""
        return subprocess.run(
            self._argv(*args),
            cwd=self.folder,
            env=self.environment(),
            capture_output=True,
            text=True,
            timeout=self.timeout,
        )

    def start(self, *args: str) -> subprocess.Popen[str]:
        return subprocess.Popen(
            self._argv(*args),
            cwd=self.folder,
            env=self.environment(),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )

    def run_args(self, total: int, *more: str) -> list[str]:
        return [*RUN, "--total-timesteps", str(total), "--runs-dir", str(self.runs_root), "--json", *more, *self.flags]

    def recorded(self, run_id: str) -> list[dict[str, Any]]:
        return [json.loads(line) for line in (self.runs_root / run_id / "events.jsonl").read_text().splitlines()]

    def run_dirs(self) -> list[Path]:
        return [p for p in self.runs_root.iterdir() if not p.name.startswith(".")] if self.runs_root.exists() else []

    def nothing_left(self, run_id: str, wait_s: float = 30.0) -> None:
        """No process names the run and the place holds nothing of it (given ``wait_s`` to let go)."""
        deadline = time.monotonic() + wait_s
        while (processes_naming(run_id) or self.left_at_place(run_id)) and time.monotonic() < deadline:
            time.sleep(0.3)
        assert not processes_naming(run_id), f"processes of run {run_id} outlived it"
        assert not self.left_at_place(run_id), f"the place still holds run {run_id}: {self.left_at_place(run_id)}"

    def flags_as_env(self) -> dict[str, str]:
        """The launcher's flags as the environment variables that give their defaults."""
        parser, installed = self._parser()
        choice = launchers.select(parser.parse_known_args(self.flags)[0], installed)
        env = {launchers.LAUNCHER_ENV: choice.name}
        for option in (*launchers.COMMON_OPTIONS, *(choice.launcher.options if choice.launcher else ())):
            value = choice.settings.get(option.dest)
            if option.switch and value:
                env[option.env] = "1"
            elif not option.switch and value not in (None, ""):
                env[option.env] = str(value)
        return env

    def _parser(self) -> tuple[argparse.ArgumentParser, list[launchers.Launcher]]:
        installed = launchers.active()
        parser = argparse.ArgumentParser()
        parser.add_argument("--num-cpus", type=int)
        launchers.add_arguments(parser, installed)
        return parser, installed

    # -------------------------------------------------------------------------------- in process
    def test_it_is_registered_and_sound(self) -> None:
        parser, installed = self._parser()
        choice = launchers.select(parser.parse_known_args(self.flags)[0], installed)
        assert choice.name == self.launcher
        if self.launcher != launchers.LOCAL:
            (item,) = [i for i in launchers.discover() if i.name == self.launcher]
            assert item.status == "active", item.error
            registered: launchers.Launcher = item.obj
            launchers.check(registered)
            assert type(choice.launcher) is type(registered)
            flags = {action for a in parser._actions for action in a.option_strings}
            assert {o.flag for o in registered.options} <= flags
        again = launchers.select(parser.parse_known_args(choice.argv())[0], installed)
        assert again == choice  # passed on as flags (a sweep's, the daemon's runs), it chooses the same

    def test_bad_options_are_refused_before_anything_starts(self) -> None:
        parser, installed = self._parser()
        for flags, words in self.bad_options:
            ns = parser.parse_known_args([*self.flags, *flags])[0]
            try:
                problems = launchers.select(ns, installed).problems(ns.num_cpus)
            except UsageError as refused:
                problems = [str(refused)]
            assert any(words in problem for problem in problems), (flags, problems)

    # -------------------------------------------------------------------------------- the real path
    def test_bad_options_are_one_line_exit_2(self) -> None:
        for flags, words in [*self.bad_options, *self.refused_at_place]:
            done = self.cli(*self.run_args(1000), *flags)
            assert done.returncode == 2, (flags, done.stderr)
            lines = [line for line in done.stderr.strip().splitlines() if not line.startswith("mosaic: note:")]
            assert len(lines) == 1 and lines[0].startswith("mosaic: error: ") and words in lines[0], (flags, lines)
            assert "Traceback" not in done.stderr and done.stdout == ""
            assert not self.run_dirs(), f"{flags}: a refused run left a directory"

    def test_a_run_reaches_its_one_terminal_event(self) -> None:
        done = self.cli(*self.run_args(2000))
        assert done.returncode == 0, done.stderr[-3000:]
        events = events_of(done.stdout)
        names = [e["event"] for e in events]
        assert names[0] == "run_started" and names[-1] == "run_completed" and "metrics" in names, names
        assert [name for name in names if name in TERMINAL] == ["run_completed"]
        assert [e["seq"] for e in events] == list(range(1, len(events) + 1))
        run_id = events[0]["run_id"]
        assert self.recorded(run_id) == events  # relayed in order: stdout is the run's events.jsonl
        assert json.loads((self.runs_root / run_id / "manifest.json").read_text())["status"] == "completed"
        self.nothing_left(run_id)

    def test_a_stop_signal_cancels_it_resumable_and_resume_finishes_it(self) -> None:
        total = 6000
        (self.folder / "slow_policy.py").write_text(SLOW_POLICY)
        argv = self.run_args(total, "--algo", str(self.folder / "slow_policy.py"), "--log-every", "500")
        stopped, code, stderr = self._stopped_mid_run(argv, at_step=1000)
        assert code == 130, stderr[-3000:]
        last = stopped[-1]
        assert last["event"] == "run_cancelled" and "SIGTERM" in last["payload"]["reason"], last
        assert last["payload"]["resumable"], last
        run_id, from_step = stopped[0]["run_id"], last["payload"]["from_step"]
        assert (self.runs_root / run_id / "checkpoints" / f"step_{from_step}.json").is_file()
        self.nothing_left(run_id)
        self.env.update(self.flags_as_env())  # `mosaic resume` takes the launcher from the environment
        done = self.cli("resume", run_id, "--runs-dir", str(self.runs_root), "--json")
        assert done.returncode == 0, done.stderr[-3000:]
        resumed = events_of(done.stdout)
        assert [e["event"] for e in resumed[:2]] == ["run_resumed", "run_started"], resumed[:2]
        assert resumed[-1]["event"] == "run_completed" and resumed[0]["payload"]["from_step"] == from_step
        history = self.recorded(run_id)
        assert [e["seq"] for e in history] == list(range(1, len(history) + 1))  # one log, numbered on
        steps = metric_steps(one_history(history))
        assert steps == sorted(set(steps)) and steps[-1] == total
        self.nothing_left(run_id)

    def _stopped_mid_run(self, argv: list[str], at_step: int) -> tuple[list[dict[str, Any]], int, str]:
        """``mosaic ARGV`` sent SIGTERM once it reported a metric at ``at_step``; its events, exit code, stderr."""
        proc = self.start(*argv)
        lines: list[str] = []
        try:
            assert proc.stdout is not None
            for line in proc.stdout:
                lines.append(line)
                record = json.loads(line)
                if record["event"] == "metrics" and record["payload"].get("global_step", 0) >= at_step:
                    break
            proc.send_signal(signal.SIGTERM)
            out, err = proc.communicate(timeout=self.timeout)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        return events_of("".join(lines) + out), proc.returncode, err

    def test_a_sweeps_trials_run_through_it(self) -> None:
        optuna = pytest.importorskip("optuna", reason="the [sweep] extra (optuna) is not installed")
        spec = self.folder / "spec.toml"
        spec.write_text(sweep_spec("contract", max_trials=self.sweep_trials), encoding="utf-8")
        storage = f"sqlite:///{self.folder / 'study.db'}"
        where = ["--storage", storage, "--runs-dir", str(self.runs_root)]
        done = self.cli("sweep", "run", str(spec), *where, *self.flags, *self.sweep_flags)
        assert done.returncode == 0, done.stderr[-3000:]
        trials = optuna.load_study(study_name="contract", storage=storage).trials
        assert [t.state for t in trials] == [optuna.trial.TrialState.COMPLETE] * self.sweep_trials
        run_dirs = self.run_dirs()
        assert len(run_dirs) == self.sweep_trials
        for run_dir in run_dirs:
            assert json.loads((run_dir / "manifest.json").read_text())["status"] == "completed"
            self.nothing_left(run_dir.name)
        self.check_sweep(done, run_dirs)


def processes_naming(run_id: str) -> list[int]:
    """Processes on this machine whose command line or working folder names the run."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            cmdline = Path(f"/proc/{entry}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            cwd = os.readlink(f"/proc/{entry}/cwd")
        except OSError:
            continue
        if run_id in cmdline or run_id in cwd:
            found.append(int(entry))
    return found
