"""Policy evaluation mode: batched evaluation of a checkpoint of any bundled algorithm.

``python -m cleanrl_worker.policy_eval --policy-path P --env-id E [--seed S]
[--eval-episodes N] [--eval-batch-size B] [--eval-gamma G] [--eval-repeat R]
[--eval-max-episode-steps M] [--eval-capture-video] [--eval-video-format gif|mp4]
[--eval-deterministic] [--eval-realtime]``

Run by the host for ``extras.mode = "policy_eval"`` with the run directory as cwd. The agent
is rebuilt from what the checkpoint records (:func:`cleanrl_worker.checkpoint.load_policy`)
and run by :func:`cleanrl_worker.evaluation.evaluate` on the env ``E``, made the way its
algorithm makes evaluation envs; ``E`` may differ from the training env only if its
observation and action spaces match the checkpoint's.

Episodes: R rounds of N episodes, played B at a time (one vector env of B envs per batch,
each env one episode). Episode ``k`` (counted over all rounds) starts from env seed
``S + k`` and the policy samples from a generator seeded with ``S``: the same flags give the
same results, and with ``--eval-deterministic`` (greedy actions) the same for any B.
``G`` (default: the checkpoint's training gamma) only discounts the reported discounted
returns; ``M`` is the episode step limit.

Writes, in the cwd: the run contract's ``eval.json`` (``mosaic.eval/1``, once completed),
``eval_summary.json`` (atomically, after each batch with status
``running``, then ``completed``), TensorBoard scalars ``eval/*`` under ``runs/<name>/``, and
with ``--eval-capture-video`` the first episode of each batch under ``videos/<name>/`` (MP4
when moviepy is installed, else an animated GIF; ``--eval-video-format`` chooses).
``--eval-realtime`` plays at the env's ``render_fps`` (for watching live frames, e.g. through
FastLane with ``mosaic enjoy --live``). Each batch asks the host to emit an
``eval_batch`` event. Bad input: one ``error:`` line on stderr, exit code 2.
"""

from __future__ import annotations

import argparse
import functools
import hashlib
import os
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NoReturn

import numpy as np

from mosaic_core.child import emit_event
from mosaic_core.toolkit import write_json_atomic

SUMMARY_FILE = "eval_summary.json"
SUMMARY_SCHEMA = "mosaic.eval_summary/1"


class BadInput(Exception):
    """Input that cannot be evaluated: reported as one line, exit code 2."""


class Cancelled(Exception):
    """SIGTERM/SIGINT arrived: raised between two policy steps, where nothing is half done."""

    def __init__(self, signum: int):
        super().__init__(f"cancelled by signal {signum}")
        self.signum = signum


# Loading -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class EvalPolicy:
    act: Callable[[np.ndarray], np.ndarray]  # observation batch -> action batch
    make_env: Callable[..., Any]  # make_env(render_mode=None) -> one env of the requested id
    gamma: float  # the checkpoint's training gamma
    info: dict[str, Any]  # what the summary says about the checkpoint

    def single(self, obs: Any) -> Any:
        """The action for one observation."""
        return self.act(np.asarray(obs)[None])[0]


def make_plain_env(env_id: str, render_mode: str | None = None) -> Any:
    """``gymnasium.make(env_id)`` (MiniGrid/BabyAI ids registered first), or :class:`BadInput`."""
    import gymnasium as gym

    check_env_id(env_id)
    try:
        return gym.make(env_id, render_mode=render_mode)
    except gym.error.Error as exc:
        raise BadInput(f"env {env_id!r}: {exc}") from None


def check_env_id(env_id: str) -> None:
    """:class:`BadInput` unless ``env_id`` is registered.

    MiniGrid/BabyAI ids are registered first; ``module:EnvId`` imports ``module`` first, as
    ``gymnasium.make`` does.
    """
    import importlib

    import gymnasium as gym

    from cleanrl_worker.env_families import prepare_family

    module, _, name = env_id.rpartition(":")
    try:
        if module:
            importlib.import_module(module)
        if name.startswith(("MiniGrid", "BabyAI")):
            import minigrid  # noqa: F401
        prepare_family(name)  # ALE ids are registered explicitly
        gym.spec(name)
    except (gym.error.Error, ImportError) as exc:
        raise BadInput(f"env {env_id!r}: {exc}") from None


def _space_key(description: dict[str, Any]) -> tuple:
    if description.get("type") == "Discrete":
        return ("Discrete", description.get("n"), description.get("start", 0))
    return (description.get("type"), tuple(description.get("shape") or ()), description.get("dtype"))


def _space_text(description: dict[str, Any]) -> str:
    key = _space_key(description)
    return f"Discrete({key[1]})" if key[0] == "Discrete" else f"{key[0]}(shape {list(key[1])}, {key[2]})"


def quiet_rendering() -> None:
    """Headless rendering without SDL's complaints on stderr (pygame-based envs)."""
    os.environ.setdefault("SDL_VIDEODRIVER", "dummy")
    os.environ.setdefault("SDL_AUDIODRIVER", "dummy")


def load_policy(path: str, env_id: str, seed: int = 0, deterministic: bool = False) -> EvalPolicy:
    """The checkpoint's policy and a factory of ``env_id`` envs it can act in, or :class:`BadInput`."""
    import gymnasium as gym

    if not Path(path).is_file():  # before importing torch: fast answers to simple mistakes
        raise BadInput(f"checkpoint {path}: no such file")
    check_env_id(env_id)
    from cleanrl_worker import checkpoint

    try:
        loaded = checkpoint.load_policy(path, seed=seed, deterministic=deterministic)
        module = checkpoint.algorithm_module(loaded.algo)
    except checkpoint.CheckpointError as exc:
        raise BadInput(str(exc)) from None
    make_env = functools.partial(module.make_eval_env, env_id)
    try:
        probe = make_env()
    except gym.error.Error as exc:
        raise BadInput(f"env {env_id!r}: {exc}") from None
    try:
        for name, space in (("observation", probe.observation_space), ("action", probe.action_space)):
            recorded, actual = loaded.checkpoint[f"{name}_space"], checkpoint.describe_space(space)
            if _space_key(recorded) != _space_key(actual):
                raise BadInput(
                    f"checkpoint {path} ({loaded.algo} on {loaded.env_id}) does not fit env {env_id}: "
                    f"its {name} space is {_space_text(actual)}, the checkpoint's {_space_text(recorded)}"
                )
    finally:
        probe.close()
    if env_id != loaded.env_id:
        print(f"warning: evaluating a policy trained on {loaded.env_id} on {env_id} (same spaces)", file=sys.stderr)
    ckpt = loaded.checkpoint
    info = {
        "path": str(Path(path).resolve()),
        "algo": loaded.algo,
        "env_id": loaded.env_id,
        "global_step": loaded.global_step,
        "iteration": ckpt.get("iteration"),
        "format_version": ckpt.get("format_version"),
        "versions": ckpt.get("versions"),
        "observation_space": ckpt.get("observation_space"),
        "action_space": ckpt.get("action_space"),
        "normalized_observations": bool((ckpt.get("normalization") or {}).get("observation")),
        "agent_arch": (ckpt.get("args") or {}).get("agent_arch"),
        "evaluation": ckpt.get("evaluation"),
        "size_bytes": Path(path).stat().st_size,
        "sha256": _sha256(path),
    }
    return EvalPolicy(act=loaded.act, make_env=make_env, gamma=loaded.gamma, info=info)


def _sha256(path: str) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


# Video -----------------------------------------------------------------------------------


def _has_moviepy() -> bool:
    import importlib.util

    return importlib.util.find_spec("moviepy") is not None


class _GifRecorder:
    """Wraps the first env made: records its first episode as ``<folder>/episode.gif`` (Pillow)."""

    MAX_DIM, MAX_FRAMES = 320, 2000

    def __init__(self, make_env: Callable[..., Any], folder: Path):
        self.make_env, self.folder, self.made = make_env, folder, 0

    def __call__(self, render_mode: str | None = None) -> Any:
        import gymnasium as gym

        self.made += 1
        if self.made > 1:
            return self.make_env(render_mode=render_mode)
        folder, limits = self.folder, (self.MAX_DIM, self.MAX_FRAMES)

        class Recorder(gym.Wrapper):
            def __init__(self, env: Any):
                super().__init__(env)
                self.frames: list[Any] = []
                self.saved = False

            def reset(self, **kwargs: Any) -> Any:
                result = self.env.reset(**kwargs)
                self._capture()
                return result

            def step(self, action: Any) -> Any:
                result = self.env.step(action)
                self._capture()
                if result[2] or result[3]:
                    self._save()
                return result

            def close(self) -> None:
                self._save()  # an episode cut by an outer TimeLimit ends here
                super().close()

            def _capture(self) -> None:
                from PIL import Image

                if self.saved or len(self.frames) >= limits[1]:
                    return
                frame: Any = self.env.render()
                if frame is None:
                    return
                image = Image.fromarray(np.asarray(frame, dtype=np.uint8))
                image.thumbnail((limits[0], limits[0]))
                self.frames.append(image.convert("P", palette=Image.Palette.ADAPTIVE))

            def _save(self) -> None:
                if self.saved or not self.frames:
                    return
                self.saved = True
                folder.mkdir(parents=True, exist_ok=True)
                fps = self.env.metadata.get("render_fps") or 30
                self.frames[0].save(
                    folder / "episode.gif",
                    save_all=True,
                    append_images=self.frames[1:],
                    duration=max(20, int(1000 / fps)),
                    loop=0,
                )
                self.frames = []

        return Recorder(self.make_env(render_mode="rgb_array"))


def _realtime(make_env: Callable[..., Any]) -> Callable[..., Any]:
    """``make_env`` whose envs take at least 1/render_fps seconds a step (30 fps when unknown)."""
    import gymnasium as gym

    class Paced(gym.Wrapper):
        def step(self, action: Any) -> Any:
            last = getattr(self, "_last", None)
            if last is not None:
                time.sleep(max(0.0, last + 1.0 / (self.env.metadata.get("render_fps") or 30) - time.monotonic()))
            self._last = time.monotonic()
            return self.env.step(action)

    return lambda render_mode=None: Paced(make_env(render_mode=render_mode))


# Evaluation --------------------------------------------------------------------------------


def stats(values: list[float]) -> dict[str, float]:
    array = np.asarray(values, dtype=np.float64)
    return {
        "mean": float(array.mean()),
        "std": float(array.std()),
        "min": float(array.min()),
        "max": float(array.max()),
        "median": float(np.median(array)),
    }


@dataclass
class EvalOptions:
    env_id: str
    seed: int = 1
    episodes: int = 10
    batch_size: int = 1
    gamma: float | None = None
    repeat: int = 1
    max_episode_steps: int | None = None
    capture_video: bool = False
    deterministic: bool = False
    video_format: str | None = None  # gif or mp4; None: mp4 when moviepy is installed
    realtime: bool = False


def run_evaluation(
    policy: EvalPolicy,
    options: EvalOptions,
    out_dir: Path = Path("."),
    progress: Callable[[dict[str, Any]], None] | None = None,
    signals: dict[str, int] | None = None,
) -> dict[str, Any]:
    """Evaluate ``policy`` as ``options`` say; writes the summary, scalars and videos under ``out_dir``.

    A signal number put in ``signals["received"]`` (by a handler) stops it before the next
    policy step with :class:`Cancelled`; the summary then says ``cancelled``.
    """
    from torch.utils.tensorboard import SummaryWriter

    gamma = policy.gamma if options.gamma is None else options.gamma
    run_name = f"{options.env_id}__policy_eval__{options.seed}__{int(time.time())}"
    writer = SummaryWriter(str(out_dir / "runs" / run_name))
    video_root = out_dir / "videos" / run_name
    use_moviepy = options.capture_video and options.video_format != "gif" and _has_moviepy()
    summary = _new_summary(policy, options, gamma, run_name)
    returns, rounds = summary["returns"], summary["rounds"]
    started = time.monotonic()
    batches = -(-options.episodes // options.batch_size)

    def act(obs: np.ndarray) -> np.ndarray:
        if signals and signals.get("received"):
            raise Cancelled(signals["received"])
        return policy.act(obs)

    try:
        for round_index in range(options.repeat):
            round_start = len(returns)
            for batch in range(batches):
                first = round_index * options.episodes + batch * options.batch_size
                count = min(options.batch_size, options.episodes - batch * options.batch_size)
                result = _play_batch(
                    act, policy, options, gamma, use_moviepy, video_root / f"episode_{first:05d}", first, count
                )
                _record_batch(writer, summary, result, first)
                if progress:
                    progress({"round": round_index, "batch": batch, "batches": batches, **_done(summary, result)})
                write_json_atomic(out_dir / SUMMARY_FILE, _finish(summary, started, "running", out_dir))
            round_returns = returns[round_start:]
            rounds.append({"round": round_index, "first_seed": options.seed + round_start, **stats(round_returns)})
            writer.add_scalar("eval/mean_return", rounds[-1]["mean"], round_index)
        summary = _finish(summary, started, "completed", out_dir)
        write_json_atomic(out_dir / SUMMARY_FILE, summary)
        write_eval(summary, policy, options, out_dir)
        return summary
    except BaseException as exc:  # the summary says how it ended, with the episodes done so far
        status = "cancelled" if isinstance(exc, (Cancelled, KeyboardInterrupt)) else "failed"
        write_json_atomic(out_dir / SUMMARY_FILE, {**_finish(summary, started, status, out_dir), "error": repr(exc)})
        raise
    finally:
        writer.close()


def _new_summary(policy: EvalPolicy, options: EvalOptions, gamma: float, run_name: str) -> dict[str, Any]:
    """The evaluation's summary before its first episode (its lists filled as batches end)."""
    return {
        "schema": SUMMARY_SCHEMA,
        "status": "running",
        "env_id": options.env_id,
        "seed": options.seed,
        "eval_episodes": options.episodes,
        "batch_size": options.batch_size,
        "repeat": options.repeat,
        "episodes_total": options.episodes * options.repeat,
        "gamma": gamma,
        "gamma_source": "checkpoint" if options.gamma is None else "flag",
        "max_episode_steps": options.max_episode_steps,
        "deterministic": options.deterministic,
        "checkpoint": policy.info,
        "tensorboard_dir": str(Path("runs") / run_name),
        "returns": [],
        "lengths": [],
        "discounted_returns": [],
        "rounds": [],
        "videos": [],
    }


def _play_batch(
    act: Callable[[np.ndarray], np.ndarray],
    policy: EvalPolicy,
    options: EvalOptions,
    gamma: float,
    use_moviepy: bool,
    video_dir: Path,
    first: int,
    count: int,
) -> Any:
    """``count`` episodes in parallel from seed ``options.seed + first`` (recorded, paced as asked)."""
    from cleanrl_worker.evaluation import evaluate

    make_env = policy.make_env
    if options.realtime:
        make_env = _realtime(make_env)
    if options.capture_video and not use_moviepy:
        make_env = _GifRecorder(make_env, video_dir)
    return evaluate(
        act,
        make_env,
        episodes=count,
        num_envs=count,
        seed=options.seed + first,
        gamma=gamma,
        max_episode_steps=options.max_episode_steps,
        capture_video=use_moviepy,
        video_dir=video_dir if use_moviepy else None,
    )


def _done(summary: dict[str, Any], result: Any) -> dict[str, Any]:
    """A batch's progress event: the episodes done so far, the batch's returns and the mean."""
    returns = summary["returns"]
    return {
        "episodes_done": len(returns),
        "episodes_total": summary["episodes_total"],
        "batch_returns": result.returns,
        "batch_mean_return": float(np.mean(result.returns)),
        "mean_return": float(np.mean(returns)),
    }


def _record_batch(writer: Any, summary: dict[str, Any], result: Any, first: int) -> None:
    """A batch's episodes as TensorBoard scalars (at their episode numbers) and in the summary."""
    for offset, (raw, length, disc) in enumerate(zip(result.returns, result.lengths, result.discounted_returns)):
        writer.add_scalar("eval/episodic_return", raw, first + offset)
        writer.add_scalar("eval/episodic_length", length, first + offset)
        writer.add_scalar("eval/discounted_return", disc, first + offset)
    summary["returns"] += result.returns
    summary["lengths"] += result.lengths
    summary["discounted_returns"] += result.discounted_returns


def write_eval(summary: dict[str, Any], policy: EvalPolicy, options: EvalOptions, out_dir: Path) -> Path:
    """The run contract's ``eval.json`` (``mosaic.eval/1``, :func:`mosaic_core.contract.eval_result`),
    beside ``eval_summary.json`` (this program's fuller record, which other readers keep)."""
    from mosaic_core import contract

    info = policy.info
    result = contract.eval_result(
        worker="cleanrl",
        algo=str(info["algo"]),
        env_id=options.env_id,
        checkpoint=str(info["path"]),
        global_step=int(info["global_step"]),
        returns=summary["returns"],
        lengths=summary["lengths"],
        seeds=summary["episode_seeds"],
        deterministic=options.deterministic,
        extra={
            "discounted_returns": summary["discounted_returns"],
            "gamma": summary["gamma"],
            "videos": summary.get("videos", []),
        },
    )
    return contract.write_eval(out_dir / contract.EVAL_FILE, result)


def _finish(summary: dict[str, Any], started: float, status: str, out_dir: Path) -> dict[str, Any]:
    done = {
        **summary,
        "status": status,
        "episodes": len(summary["returns"]),
        "episode_seeds": [summary["seed"] + k for k in range(len(summary["returns"]))],
    }
    if summary["returns"]:
        done.update(
            {
                "return": stats(summary["returns"]),
                "length": stats(summary["lengths"]),
                "discounted_return": stats(summary["discounted_returns"]),
            }
        )
    videos = out_dir / "videos"
    if videos.is_dir():
        done["videos"] = sorted(str(p.relative_to(out_dir)) for p in videos.rglob("*") if p.suffix in (".mp4", ".gif"))
    elapsed = time.monotonic() - started
    done["timing"] = {
        "seconds": round(elapsed, 3),
        "episodes_per_second": round(len(summary["returns"]) / elapsed, 3) if elapsed > 0 else None,
    }
    return done


# Command line ------------------------------------------------------------------------------


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:  # one line, exit 2 (argparse prints usage too)
        print(f"error: {self.prog}: {message}", file=sys.stderr)
        raise SystemExit(2)


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="python -m cleanrl_worker.policy_eval",
        description="Evaluate a .cleanrl_model checkpoint in batches; writes eval_summary.json.",
    )
    parser.add_argument("--policy-path", required=True, help="the .cleanrl_model checkpoint")
    parser.add_argument("--env-id", required=True, help="env to evaluate on (spaces must match the checkpoint's)")
    parser.add_argument("--seed", type=int, default=1, help="episode k starts from env seed SEED + k")
    parser.add_argument("--eval-episodes", type=int, default=10, help="episodes per round")
    parser.add_argument("--eval-batch-size", type=int, default=1, help="episodes played in parallel (vector env size)")
    parser.add_argument(
        "--eval-gamma",
        type=float,
        default=None,
        help="discount of the reported discounted return (default: the checkpoint's gamma)",
    )
    parser.add_argument("--eval-repeat", type=int, default=1, help="rounds of --eval-episodes episodes")
    parser.add_argument("--eval-max-episode-steps", type=int, default=None, help="step limit of each episode")
    parser.add_argument("--eval-capture-video", action="store_true", help="record each batch's first episode")
    parser.add_argument(
        "--eval-video-format",
        choices=("gif", "mp4"),
        default=None,
        help="video format (default: mp4 when moviepy is installed, else gif)",
    )
    parser.add_argument("--eval-deterministic", action="store_true", help="greedy/mean actions instead of sampling")
    parser.add_argument("--eval-realtime", action="store_true", help="play at the env's render_fps (to watch)")
    return parser


def options_from(ns: argparse.Namespace) -> EvalOptions:
    checks = [
        ("--eval-episodes", ns.eval_episodes, ns.eval_episodes >= 1, "an integer >= 1"),
        ("--eval-batch-size", ns.eval_batch_size, ns.eval_batch_size >= 1, "an integer >= 1"),
        ("--eval-repeat", ns.eval_repeat, ns.eval_repeat >= 1, "an integer >= 1"),
        (
            "--eval-gamma",
            ns.eval_gamma,
            ns.eval_gamma is None or 0.0 <= ns.eval_gamma <= 1.0,
            "a discount factor in [0, 1] (the episode step limit is --eval-max-episode-steps)",
        ),
        (
            "--eval-max-episode-steps",
            ns.eval_max_episode_steps,
            ns.eval_max_episode_steps is None or ns.eval_max_episode_steps >= 1,
            "an integer >= 1",
        ),
        ("--seed", ns.seed, ns.seed >= 0, "an integer >= 0"),
    ]
    for flag, value, ok, expected in checks:
        if not ok:
            raise BadInput(f"{flag} must be {expected}, got {value}")
    if ns.eval_video_format == "mp4" and ns.eval_capture_video and not _has_moviepy():
        raise BadInput("--eval-video-format mp4 needs moviepy (pip install -e '.[video]'); or choose gif")
    return EvalOptions(
        env_id=ns.env_id,
        seed=ns.seed,
        episodes=ns.eval_episodes,
        batch_size=min(ns.eval_batch_size, ns.eval_episodes),
        gamma=ns.eval_gamma,
        repeat=ns.eval_repeat,
        max_episode_steps=ns.eval_max_episode_steps,
        capture_video=ns.eval_capture_video,
        deterministic=ns.eval_deterministic,
        video_format=ns.eval_video_format,
        realtime=ns.eval_realtime,
    )


def _report(event: dict[str, Any]) -> None:
    emit_event("eval_batch", event)
    print(
        f"eval: {event['episodes_done']}/{event['episodes_total']} episodes, mean return {event['mean_return']:.2f}",
        file=sys.stderr,
        flush=True,
    )


def main(argv: list[str] | None = None) -> int:
    ns = build_parser().parse_args(argv)
    from mosaic_core import child

    child.connect()  # a no-op outside a MOSAIC run
    quiet_rendering()
    try:
        options = options_from(ns)
        child.preload("torch")  # the policy's (bad options are refused before it)
        policy = load_policy(ns.policy_path, options.env_id, seed=options.seed, deterministic=options.deterministic)
    except BadInput as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    import signal

    import torch

    signals: dict[str, int] = {}  # the host cancels with SIGTERM: finish the step, then end with a summary
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda received, _frame: signals.setdefault("received", received))
    torch.set_num_threads(1)  # small batches: one thread is fastest and leaves the other cores to envs
    torch.manual_seed(options.seed)
    np.random.seed(options.seed)
    try:
        summary = run_evaluation(policy, options, progress=_report, signals=signals)
    except Cancelled as exc:
        print(f"eval: {exc}; partial results in {SUMMARY_FILE}", file=sys.stderr)
        return 128 + exc.signum
    ret = summary["return"]
    print(
        f"eval: {summary['episodes']} episodes of {options.env_id}: return {ret['mean']:.2f} ± {ret['std']:.2f} "
        f"(min {ret['min']:.2f}, max {ret['max']:.2f}); discounted (gamma {summary['gamma']}) "
        f"{summary['discounted_return']['mean']:.3f}; summary in {SUMMARY_FILE}",
        file=sys.stderr,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
