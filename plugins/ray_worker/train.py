"""The training program of an RLlib run (the Ray driver), in the worker's environment::

    python -m ray_worker.train --algo PPO --env CartPole-v1 --total-timesteps 200000 [--params JSON]

It starts a local Ray cluster of the run's own (``address="local"``: a bare ``ray.init()``
attaches to whatever cluster ``$RAY_TMPDIR`` records), with its files in a private directory
(the run's ``ray/`` when Ray's unix socket paths fit under it, else a private temporary one,
removed at the end), or joins ``--ray-address``. Then ``algo.train()`` until the env steps are
done, each iteration reported by :class:`ray_worker.report.Reporter`.

Modes (the run contract, docs/run-contract.md): ``train``; ``resume`` (``Algorithm.from_checkpoint``:
iteration, lifetime counters, learner, optimizer and connector states; the env runners sample with
the restored weights from the first iteration; steps continue from the checkpoint's);
``evaluate`` (:mod:`ray_worker.evaluation`: ``mosaic.eval/1`` to ``--eval-out``; without Ray).

Checkpoints (:mod:`ray_worker.checkpoints`): ``checkpoints/step_<N>/`` every
``--checkpoint-frequency`` env steps, at the end and on a stop. A stop (SIGTERM, SIGUSR1, SIGINT)
saves the state of the last completed iteration at once, kept in memory after each iteration
(:class:`LastIteration`), from a thread the signal wakes (:func:`watch_for_stop`), and ends the run
as killed by the signal without waiting for the iteration under way (on a busy 2-core machine one
PPO iteration outlasted the host's grace period); a stop after the last iteration lets the run
complete. Ray's processes of the run's own cluster are in process groups of their own, so the host's
SIGTERM to the run's group does not end them before the checkpoint is written.
Threads: the run's budget (``OMP_NUM_THREADS``, else 1)
one torch thread in the learner (the driver; ``--torch-threads`` for more: with the run's budget of
2 on a busy 2-core machine PPO sampled 6 env steps/s instead of 95) and one in every env runner
(inherited on a local cluster, RLlib's ``extra_python_environs_for_worker`` on an existing one).
Ray is shut down on completion and failure; a cancelled local cluster is killed, its workers
included; when the host SIGKILLs the driver, Ray's processes of a local cluster die with it
(kernel fate sharing), their workers with their raylet.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import pickle
import shutil
import signal
import sys
import threading
import time
from argparse import Namespace
from pathlib import Path
from typing import Any, NoReturn

from mosaic_core import THREAD_VARS, procs
from mosaic_core.child import HostCancel, Stopped
from mosaic_core.contract import STOP_SIGNALS, run_at_stop_exit
from ray_worker.catalog import local_cluster_cpus
from ray_worker.checkpoints import LAYOUT, SAVING, save, saved_step
from ray_worker.multiagent import is_multiagent

TENSORBOARD = "tensorboard"
# Ray's longest unix socket path under its temp dir (session_<date>_<time>_<pid>/sockets/plasma_store)
# must stay under the kernel's 107 characters.
SESSION_PATH_LEN = 64
# Env runners that sample nothing in this many iterations in a row, for this long, are lost. Both: an
# async algorithm's iteration (IMPALA's, APPO's) ends at its minimum time with or without samples, and
# on a busy machine an env runner's first samples can take tens of seconds (its start-up alone imports
# RLlib and torch); RLlib's own sample timeout is a minute.
EMPTY_ITERATIONS_MAX = 5
EMPTY_SECONDS_MIN = 60.0
SOCKET_PATH_MAX = 107
# Ray's switch that makes a node's address loopback (ray._private.services.get_node_ip_address)
LOOPBACK_NODE_VAR = "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"
KILL_WAIT_S = 3.0  # for the local cluster's processes to be stopped
DEFAULT_GRACE_S = 10.0  # the host's default --grace-period, when it does not say
SYNC_WAIT_S = 60.0  # for the env runners to take the restored weights before the first iteration
SIGNAL_WAIT_S = 1.0  # for a failure on the run's own cluster: the signal that killed it may be on its way
_SIGNALLED = threading.Event()  # a stop reached watch_for_stop's thread
_LOOPING = threading.Event()  # the training loop runs: a stop saves its last completed iteration
_FINISHING = threading.Event()  # the loop did the whole budget: a stop lets the final checkpoint be saved
_KEPT = threading.Event()  # the stop's thread saved the last completed iteration
_TAKEN = threading.Event()  # the stop's thread has the stop in hand (it holds SAVING until it is done)
_FINISHED = threading.Event()  # the final checkpoint is saved: Ray is shut down as after any completed run
_ENDING = threading.Lock()
_ALGO: dict[str, Any] = {}  # the run's Algorithm, once built (the stop's thread saves from it)


def parse_args(argv: list[str] | None) -> Namespace:
    from mosaic_core.contract import add_host_arguments

    parser = add_host_arguments(argparse.ArgumentParser(prog="python -m ray_worker.train"))
    parser.add_argument("--env", required=True)
    parser.add_argument("--params", default="{}", help="a JSON object of RLlib config options")
    parser.add_argument("--setup", default="{}", help="a multi-agent env's policies or self_play (JSON)")
    parser.add_argument("--ray-address", help="an existing cluster (default: a local cluster of the run's own)")
    return parser.parse_args(argv)


def private_temp_dir() -> tuple[Path, Path | None]:
    """(Ray's temp dir for a local cluster, the folder to remove at the end, if any). Ray makes its
    temp dir world-writable (0777), so it lies inside a folder only we can enter: the run directory
    when the path is short enough for Ray's sockets, else a 0700 folder of this process in the
    temp dir (:func:`mosaic_core.files.private_dir`, which also removes those of killed runs)."""
    from mosaic_core.files import private_dir

    here = Path("ray").absolute()  # the cwd is the run directory
    if len(str(here)) + SESSION_PATH_LEN <= SOCKET_PATH_MAX:
        return here, None
    folder = private_dir("rllib-")
    return folder / "r", folder


def without_boot_path() -> None:
    """Ray's processes inherit this environment: they get the run's context (``MOSAIC_CHILD``, for
    the public API) but not the host's ``sitecustomize`` patch points, so ``gym.make`` in each env
    runner is RLlib's own (frames come from the callback, from one env runner)."""
    parts = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p and Path(p).name != "_boot"]
    os.environ["PYTHONPATH"] = os.pathsep.join(parts)


def say(text: str) -> None:
    """A line the person at the run's terminal sees (a ``note`` event) before a step that can
    take long (tens of seconds on a loaded machine): otherwise the run is silent meanwhile."""
    from mosaic_core.child import emit_event

    emit_event("note", {"text": text})


def start_ray(ns: Namespace, temp: Path | None) -> None:
    """Join ``--ray-address`` (``temp`` None) or start a local cluster with its files in ``temp``."""
    if not ns.ray_address:
        # The local cluster's node address is loopback, so its servers (GCS, raylet, object manager,
        # agents, workers) listen on 127.0.0.1 only: Ray binds all interfaces for any other address.
        # Read when Ray is imported (ray._private.ray_constants), and by the processes it starts.
        os.environ[LOOPBACK_NODE_VAR] = "0"
    say(
        f"joining the Ray cluster at {ns.ray_address}…"
        if ns.ray_address
        else "starting Ray (a local cluster of the run's own)…"
    )
    import ray

    if ns.ray_address:  # the plan checked that it answers (catalog.check_answers)
        ray.init(
            address=ns.ray_address,
            logging_level=logging.WARNING,
            configure_logging=False,
            job_config=job_config(ns.ray_address),
        )
        return
    without_boot_path()
    own_process_groups()
    # The driver's disconnect waits this long to flush task events to the GCS (5 s by default: a
    # cancelled run, whose GCS is dying, spent them past a short grace period). We keep none.
    os.environ.setdefault("RAY_task_events_shutdown_flush_timeout_ms", "500")
    # The raylet starts an idle worker per CPU (up to the machine's cores) when the first driver
    # joins, for tasks that may come. A run's own cluster gets none but its env runners, which start
    # their own workers: on 64 cores that was 64 processes importing Ray for nothing at each run.
    os.environ.setdefault("RAY_prestart_worker_first_driver", "0")
    driver = {name: os.environ[name] for name in THREAD_VARS if name in os.environ}
    os.environ.update({name: "1" for name in THREAD_VARS})  # what Ray's worker processes inherit
    try:
        ray.init(
            address="local",
            _temp_dir=str(temp),
            include_dashboard=False,
            logging_level=logging.WARNING,
            configure_logging=False,
            num_cpus=local_cluster_cpus(),  # the plan fitted the env runners to them
            job_config=job_config("local"),
        )
    finally:
        os.environ.update(driver)


def own_process_groups() -> None:
    """Ray's processes of the run's own cluster (GCS, raylet, log monitor, agents) start in process
    groups of their own: the host's SIGTERM to the run's group reaches the driver alone, so the
    cluster lives on while the iteration under way finishes and is saved. They still die with the
    driver (Ray's kernel fate sharing on Linux, ``PR_SET_PDEATHSIG``), its workers with their raylet;
    a cancel ends them all (:func:`end_cancelled_local_run`)."""
    from ray._private import services

    started = services.ConsolePopen
    if getattr(started, "own_process_group", False):
        return

    class OwnGroupPopen(started):  # type: ignore[misc, valid-type]
        own_process_group = True

        def __init__(self, *args: Any, **kwargs: Any) -> None:
            kwargs.setdefault("process_group", 0)
            super().__init__(*args, **kwargs)

    services.ConsolePopen = OwnGroupPopen  # type: ignore[misc]  # replacing Ray's class is the point


def job_config(address: str) -> Any:
    """The driver's job config: the cluster's workers get no folder of ours first on sys.path
    (Ray's driver otherwise gives them its cwd, the run directory, which on another node of an
    existing cluster is a path another user may make). Through Ray Client (``ray://``) Ray adds none."""
    if address.startswith("ray://"):
        return None
    from ray.job_config import JobConfig

    class WithoutDriverPaths(JobConfig):
        @property
        def _py_driver_sys_path(self) -> list[str]:
            return []  # what Ray extends (ray._private.worker.connect) is a new list each time

        @_py_driver_sys_path.setter
        def _py_driver_sys_path(self, _paths: list[str]) -> None:
            pass

    return WithoutDriverPaths()


def grace_period() -> float:
    """The host's seconds between its SIGTERM and its SIGKILL."""
    from mosaic_core import GRACE_VAR

    try:
        return max(0.0, float(os.environ.get(GRACE_VAR, DEFAULT_GRACE_S)))
    except ValueError:
        return DEFAULT_GRACE_S


class LastIteration:
    """The algorithm's state after its last completed iteration, kept in memory (pickled: the next
    iteration updates weights and optimizer state in place) so that a stop saves it at once, from
    :func:`watch_for_stop`'s thread, while the iteration under way goes on or is abandoned: the
    stop never waits for an iteration (9 s of PPO on a busy 2-core machine, past the host's grace)."""

    def __init__(self) -> None:
        self.lock = threading.RLock()  # held by the main thread while it reports and keeps an iteration
        self._state: bytes | None = None
        self.step: int | None = None

    def keep(self, algo: Any, step: int) -> None:
        state = pickle.dumps(algo.get_state(), protocol=pickle.HIGHEST_PROTOCOL)
        with self.lock:
            self._state, self.step = state, step

    def save(self, algo: Any, env_id: str) -> int | None:
        """Save the kept state as the checkpoint of its step (unless one is there: a periodic save
        of the same iteration); its step, or None when no iteration has completed yet."""
        with self.lock:
            state, step = self._state, self.step
        if state is None or step is None:
            return None
        with SAVING:
            if not LAYOUT.path(Path.cwd(), step).is_dir():
                save(algo, step, "cancelled", env_id, state=pickle.loads(state))  # our own bytes, just made
        return step


LAST = LastIteration()


def watch_for_stop(algo_holder: dict[str, Any], ns: Namespace, folder: Path | None) -> None:
    """A stop (SIGTERM, SIGUSR1, SIGINT) is handled from a thread: the driver's main thread spends
    most of its time inside Ray's C++ (``ray.wait`` on the env runners), where Python's signal
    handlers run only when it returns: an iteration later. The signal's wake-up fd is written at
    delivery. In the training loop the thread saves the last completed iteration at once
    (:class:`LastIteration`); then, on the run's own cluster, it ends the run (the iteration under
    way is abandoned: its steps come again after a resume); on an existing cluster the main thread
    ends it after that iteration. Before the loop the run ends at once; once the loop has done the
    whole budget, the final checkpoint is saved and the run completes."""
    read_fd, write_fd = os.pipe2(os.O_CLOEXEC)
    os.set_blocking(write_fd, False)
    signal.set_wakeup_fd(write_fd, warn_on_full_buffer=False)

    def next_signal() -> int:
        while (received := os.read(read_fd, 1)[0]) not in STOP_SIGNALS:
            pass
        return received

    def on_stop() -> None:
        received = next_signal()
        name = signal.Signals(received).name
        with SAVING:  # a save under way (periodic, final) ends first
            _SIGNALLED.set()
            _TAKEN.set()
            if _FINISHING.is_set():
                print(f"rllib worker: {name} after the last iteration: the run completes", file=sys.stderr)
                return
            if _LOOPING.is_set():
                keep_last_iteration(algo_holder.get("algo"), ns, name)
            if ns.ray_address:
                return  # the main thread ends the run after the iteration under way (Ray's job is not ours)
            print(f"rllib worker: stopped by {name}", file=sys.stderr)
            end_cancelled_local_run(folder, 128 + received)

    threading.Thread(target=on_stop, name="rllib-worker-stop", daemon=True).start()


def keep_last_iteration(algo: Any, ns: Namespace, name: str) -> None:
    """Save :data:`LAST` now and say so, or say why nothing is saved (in the run's notes)."""
    started = time.monotonic()
    try:
        step = LAST.save(algo, ns.env) if algo is not None else None
    except Exception as exc:  # the run still ends; resumable from its previous checkpoint, if any
        say(f"{name}: the last completed iteration could not be saved ({type(exc).__name__}: {exc})")
        return
    if step is None:
        say(f"{name} before the first iteration ended: nothing new to save")
        return
    say(f"{name}: saved the last completed iteration (step {step}) in {time.monotonic() - started:.2f} s")
    _KEPT.set()


def cluster_processes() -> dict[int, tuple[int, int]]:
    """Every process of the run's local cluster: those below the driver (GCS, raylet, agents, the
    raylet's workers) and those that inherited the run's context but lost their parent (a worker
    whose raylet died first), found by the run's ``MOSAIC_CHILD`` in their environment."""
    from mosaic_core import CHILD_VAR

    found = procs.descendants(os.getpid())
    if os.environ.get(CHILD_VAR):
        found.update(procs.with_environment(CHILD_VAR, os.environ[CHILD_VAR]))
    found.pop(os.getpid(), None)
    return found


def end_cancelled_local_run(folder: Path | None, code: int) -> NoReturn:
    """End a cancelled run on its own local cluster now. Every process of the cluster
    (:func:`cluster_processes`; Ray's workers sit in process groups of their own) is stopped
    (SIGSTOP: it can neither write nor start another), so the private temp folder is removed with
    nothing writing in it; then they are SIGKILLed and the driver exits at once, without Ray's
    shutdown, whose disconnect waits on the GCS just killed (on a busy machine for longer than
    any grace period). Killed first, the raylet took the driver down before the folder was gone:
    Ray's core worker ends its process (exit 1) when its raylet dies, which can still come first
    and changes only the exit code. The run keeps its last checkpoint; the metrics of the last
    moment before the signal may not reach the host."""
    SAVING.acquire()  # a checkpoint being written is finished first (the stop's thread may hold it)
    _ENDING.acquire()  # once, from whichever thread comes first; the other waits for the exit
    _SIGNALLED.set()
    run_at_stop_exit()  # the last metrics to the host, a tracker's finish: no atexit handler runs
    stopped: dict[int, tuple[int, int]] = {}
    deadline = time.monotonic() + KILL_WAIT_S
    while (
        new := {pid: found for pid, found in cluster_processes().items() if pid not in stopped}
    ) and time.monotonic() < deadline:  # again: one the raylet started as it was stopped
        procs.signal_processes(new, signal.SIGSTOP)
        stopped.update(new)
    if folder is not None:
        remove_folder(folder)
    procs.signal_processes(stopped, signal.SIGKILL)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def remove_folder(folder: Path, patience: float = 5.0) -> None:
    """Remove the private temp folder. Ray's workers (in process groups of their own) write their
    last log lines for a second or two after their raylet is gone, so a removal can race a new
    file: try again until the folder is gone (then nothing can be created in it)."""
    deadline = time.monotonic() + patience
    while True:
        shutil.rmtree(folder, ignore_errors=True)
        if not folder.exists() or time.monotonic() > deadline:
            return
        time.sleep(0.1)


def build_config(ns: Namespace, threads: int) -> Any:
    from ray_worker.callbacks import MosaicCallbacks
    from ray_worker.configs import build_config as rllib_config

    params = json.loads(ns.params)
    params.setdefault("env_config", {"render_mode": "rgb_array"})  # frames: env 0 renders when asked
    config = rllib_config(ns.algo, ns.env, params, ns.seed, json.loads(ns.setup))
    # One thread per env runner: its per-step inference on a few observations gains nothing from more,
    # and N runners each taking the run's budget would oversubscribe the cores (2 threads each made
    # PPO's sampling 20x slower on a busy 2-core machine). The learner (here, the driver) has the budget.
    config.python_environment(extra_python_environs_for_worker={name: "1" for name in THREAD_VARS})
    config.callbacks(MosaicCallbacks)
    return config


def sync_restored_weights(algo: Any) -> None:
    """The env runners sample with the restored weights from the first iteration on: the sync is
    waited for (RLlib's own is fire-and-forget, and an env runner's first ``sample`` could overtake
    it and sample with the checkpoint's env-runner weights, an update older)."""
    group = getattr(algo, "env_runner_group", None)
    if group is not None and getattr(algo, "learner_group", None) is not None:
        group.sync_weights(
            from_worker_or_learner_group=algo.learner_group, inference_only=True, timeout_seconds=SYNC_WAIT_S
        )


class EnvRunnersLost(RuntimeError):
    """RLlib's env runners are gone (``train()`` does not raise: its results just lack samples)."""


def check_env_runners(algo: Any, empty: int, quiet_s: float) -> None:
    """After ``empty`` iterations in a row without samples, the last ``quiet_s`` seconds: fail when
    no env runner is healthy, or after ``EMPTY_ITERATIONS_MAX`` of them and ``EMPTY_SECONDS_MIN``
    (RLlib's sample timeout on a busy machine returns nothing too)."""
    group = algo.env_runner_group
    remote = group.num_remote_env_runners()
    if remote and group.num_healthy_remote_workers() == 0:
        raise EnvRunnersLost(
            f"all {remote} of RLlib's env runners are gone (crashed or killed: see the Ray logs "
            "in the run's ray/ directory)"
        )
    if empty >= EMPTY_ITERATIONS_MAX and quiet_s >= EMPTY_SECONDS_MIN:
        raise EnvRunnersLost(f"RLlib's env runners sampled nothing in {empty} iterations in a row ({quiet_s:.0f} s)")
    print(
        f"rllib worker: iteration sampled nothing ({empty} in a row, {quiet_s:.0f} s; "
        f"{group.num_healthy_remote_workers()} of {remote} env runners healthy)",
        file=sys.stderr,
    )


def train(algo: Any, ns: Namespace, stop: HostCancel, offset: int) -> None:
    """``algo.train()`` until ``--total-timesteps`` env steps (from ``offset``, a resumed run's
    checkpoint step), each completed iteration kept for a stop (:data:`LAST`). A stop is the
    thread's (:func:`watch_for_stop`); on an existing cluster the run ends after the iteration
    under way (saved here when no iteration had completed at the signal)."""
    from torch.utils.tensorboard import SummaryWriter

    from mosaic_core.child import scalars_reported
    from ray_worker.report import Reporter
    from ray_worker.teams import module_agents

    # A resumed run's TensorBoard files drop what an earlier attempt wrote after the checkpoint.
    writer = SummaryWriter(TENSORBOARD, purge_step=offset + 1 if offset else None)
    reporter = Reporter(writer, step=offset, agents=module_agents(algo.config))
    every = ns.checkpoint_frequency or None  # 0: at the end and on a stop only
    next_save = offset + every if every else None
    empty, sampled_at = 0, time.monotonic()
    _LOOPING.set()
    try:
        while reporter.step < ns.total_timesteps:
            result = algo.train()
            with LAST.lock:  # a stop saves the iteration before, or this one with its report whole
                step = reporter.iteration(result)
                writer.flush()
                scalars_reported()  # the iteration's values reach the host now, not with the next one's
                if step is not None:
                    LAST.keep(algo, step)  # what a stop from now on saves
            if stop.requested or _SIGNALLED.is_set():
                if ns.ray_address and not _KEPT.is_set():
                    checkpoint(algo, ns, reporter.step, "cancelled")
                raise Stopped()
            if step is None:  # train() does not raise when env runners crash: it returns no samples
                empty += 1
                check_env_runners(algo, empty, time.monotonic() - sampled_at)
                continue
            empty, sampled_at = 0, time.monotonic()
            if next_save is not None and ns.total_timesteps > step >= next_save:
                checkpoint(algo, ns, step, "periodic")
                while next_save <= step:
                    next_save += every
        _FINISHING.set()  # a stop from now on lets the run complete
        checkpoint(algo, ns, reporter.step, "final")
        _FINISHED.set()
    finally:
        writer.close()


def checkpoint(algo: Any, ns: Namespace, step: int, reason: str) -> None:
    """Save ``algo`` at ``step``; with ``--eval-every-checkpoint``, evaluate it (``eval_result``)."""
    path = save(algo, step, reason, ns.env)
    if ns.eval_every_checkpoint and reason != "cancelled":  # a stop has no time for it
        from mosaic_core.child import emit_event
        from ray_worker.evaluation import algorithm_runner, evaluate, summary

        result = evaluate(
            algorithm_runner(algo),
            algo_name=ns.algo,
            env_id=ns.env,
            checkpoint=str(path),
            global_step=step,
            episodes=ns.eval_episodes,
            training_seed=ns.seed,
            eval_seed=ns.eval_seed,
            deterministic=ns.eval_deterministic,
        )
        emit_event("eval_result", summary(result))


def check_checkpoint(checkpoint: Path) -> None:
    """Loading an RLlib checkpoint unpickles it (runs its code): checked again just before, as
    the plan did, so only a checkpoint the owner made, outside any untrusted run, is loaded."""
    from mosaic_core import UsageError
    from mosaic_core.child import refuse_config
    from mosaic_core.runstore.trust import check_code_checkpoint

    try:
        check_code_checkpoint(checkpoint, "RLlib checkpoint")
    except UsageError as exc:
        refuse_config(str(exc))


def check_arguments(ns: Namespace) -> None:
    """One line and exit 2 for what this program cannot do (before Ray starts)."""
    from mosaic_core.child import refuse_config

    if ns.mode in ("resume", "evaluate") and not ns.checkpoint:
        refuse_config(f"mode {ns.mode} needs --checkpoint (an RLlib checkpoint directory)")
    if ns.mode != "evaluate" and ns.total_timesteps is None:
        refuse_config(f"mode {ns.mode} needs --total-timesteps (the budget)")
    if ns.video and ns.mode != "evaluate":
        refuse_config(f"--video: a video is recorded in mode evaluate only, not {ns.mode}")
    if ns.video:
        from mosaic_core import contract

        if contract.video_encoder() is None:
            refuse_config(contract.no_video_encoder("rllib"))


def run(ns: Namespace, threads: int, stop: HostCancel) -> int:
    import torch

    torch.set_num_threads(threads)
    from ray.rllib.algorithms.algorithm import Algorithm

    from ray_worker.configs import register_creator
    from ray_worker.selfplay import restore_pool

    checkpoint = Path(ns.checkpoint) if ns.checkpoint else None
    say(f"building {ns.algo} and its env runners" + (" from the checkpoint…" if checkpoint is not None else "…"))
    if checkpoint is not None:
        check_checkpoint(checkpoint)
        register_creator(ns.env)  # the checkpoint's config names its env by the creator's registered name
        # Iteration, lifetime counters (the schedules' position), learner and optimizer state,
        # connector states; RLlib syncs the restored weights to the env runners (sync_restored_weights
        # again: the first iteration must not sample with the weights the env runners started with).
        algo = Algorithm.from_checkpoint(str(checkpoint))
        sync_restored_weights(algo)
        restore_pool(algo, checkpoint)  # self-play's past policies, from the checkpoint's data (a note says which)
    else:
        algo = build_config(ns, threads).build_algo()
    _ALGO["algo"] = algo  # for the stop's thread
    try:
        stop.looping()
        train(algo, ns, stop, saved_step(checkpoint) if checkpoint else 0)
    finally:
        if ns.ray_address or _FINISHED.is_set() or not (stop.requested or _SIGNALLED.is_set()):
            algo.stop()  # (a stopped run's own cluster is ended at once instead: end_cancelled_local_run)
    return 0


class Stop(HostCancel):
    """The host's cancel, and SIGUSR1 (a scheduler's warning before a time limit) the same way."""

    def install(self) -> Stop:
        super().install()
        signal.signal(signal.SIGUSR1, self._on_signal)
        return self


def main(argv: list[str] | None = None) -> int:
    ns = parse_args(argv)
    from mosaic_core import child, pin_process_threads

    threads = pin_process_threads(ns.torch_threads)
    os.environ.setdefault("SDL_VIDEODRIVER", "dummy")  # CartPole renders off-screen through pygame
    os.environ.setdefault("SDL_AUDIODRIVER", "dummy")
    os.environ.setdefault("RAY_DEDUP_LOGS", "0")
    child.connect()
    check_arguments(ns)
    if ns.mode == "evaluate":  # without Ray: the policy plays here (ray_worker.evaluation, .matchplay)
        from ray_worker.evaluation import evaluate_checkpoint, evaluate_multiagent

        check_checkpoint(Path(ns.checkpoint))  # check_arguments refused an evaluation without one
        import torch

        torch.set_num_threads(threads)
        (evaluate_multiagent if is_multiagent(ns.env) else evaluate_checkpoint)(ns, Path(ns.checkpoint))
        return 0
    # A stop (SIGTERM, SIGUSR1, SIGINT) is watch_for_stop's: in the training loop it saves the last
    # completed iteration at once; before the loop the run ends at once.
    stop = Stop()
    # Made before ray.init (a signal can end the run within it), removed whatever the end.
    temp, folder = private_temp_dir() if not ns.ray_address else (None, None)
    code = 1
    try:
        stop.install()
        watch_for_stop(_ALGO, ns, folder)
        start_ray(ns, temp)  # imports Ray after setting what Ray reads at import
        stop.install()  # ray.init installed its own
        child.preload("torch", "torch._dynamo", "ray.rllib.algorithms.algorithm")  # what run() imports
        code = run(ns, threads, stop)
    except Exception as exc:
        # On an existing cluster the host's SIGTERM may reach Ray's processes of this machine too:
        # an iteration under way then fails, which is the cancel, not a failure (on the run's own
        # cluster a failure may come before the signal's thread has said so).
        if (
            not isinstance(exc, Stopped)
            and not stop.requested
            and (ns.ray_address or not _SIGNALLED.wait(SIGNAL_WAIT_S))
        ):
            raise
        print(f"rllib worker: stopped by signal {stop.signal}", file=sys.stderr)
        code = stop.exit_code()
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)  # shutting Ray down: a second SIGTERM waits
        if (stop.requested or _SIGNALLED.is_set()) and not ns.ray_address and not _FINISHED.is_set():
            if _LOOPING.is_set():  # the stop's thread saves what the run has, then ends the process
                _TAKEN.wait(grace_period())
            end_cancelled_local_run(folder, stop.exit_code())
        # Completed, failed, or stopped on an existing cluster: Ray is shut down in order, and the
        # process exits normally (the last metrics are sent at exit); the host's SIGKILL bounds a stop.
        import ray

        ray.shutdown()
        if folder is not None:
            remove_folder(folder)
    return code


if __name__ == "__main__":
    sys.exit(main())
