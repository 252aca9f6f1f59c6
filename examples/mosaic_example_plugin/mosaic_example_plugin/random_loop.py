"""The example worker's training process: a plain gymnasium loop, nothing MOSAIC-specific but
calls to ``mosaic_core.child.report_scalar`` and one ``emit_event("checkpoint_saved", ...)``
(no-ops when not run by a host), the run contract's flags (``mosaic_core.contract.add_host_arguments``)
and its stop (``mosaic_core.contract.StopOnSignal``: a stop saves ``checkpoints/step_N.json``, which
``--mode resume --checkpoint`` goes on from; so does ``--checkpoint-frequency N``, every N steps).
``--algo`` is the policy: random, first, or a Python file defining ``act(observation, action_space)``.

With ``--direct`` the env is built from its class, bypassing ``gym.make`` (as PettingZoo or EnvPool
envs do), so the program publishes its frames itself through the public API: it renders only
when ``frame_wanted()`` says a consumer (FastLane) wants one, and hands it to ``publish_frame``.
It then also reports its returns as agent ``player``'s (the per-agent path of multi-agent workers).
"""

import argparse
import json
import os
import runpy
import sys
import time

import gymnasium as gym

from mosaic_core.child import emit_event, frame_wanted, publish_frame, report_scalar
from mosaic_core.contract import StopOnSignal, add_host_arguments


def main() -> None:
    parser = add_host_arguments(argparse.ArgumentParser())  # --algo is the policy
    parser.add_argument("--env-id", required=True)
    parser.add_argument("--log-every", type=int, default=200)
    parser.add_argument("--direct", action="store_true", help="bypass gym.make; publish frames through the API")
    args = parser.parse_args()
    if args.total_timesteps is None:
        parser.error("--total-timesteps is required: a random policy plays for a budget")
    args.policy, args.seed = args.algo, 1 if args.seed is None else args.seed
    print(
        f"example worker: gymnasium {gym.__version__} in {sys.prefix}, "
        f"OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS')}",
        file=sys.stderr,
        flush=True,
    )
    env = _direct_env(args.env_id) if args.direct else gym.make(args.env_id)
    env.action_space.seed(args.seed)
    act = runpy.run_path(args.policy)["act"] if args.policy.endswith(".py") else None
    observation, _ = env.reset(seed=args.seed)
    episode_return, episodes, started = 0.0, 0, time.perf_counter()
    first = 1
    if args.mode == "resume":  # a random policy keeps nothing but how far it got
        with open(args.checkpoint, encoding="utf-8") as handle:
            first = int(json.load(handle)["global_step"]) + 1
    stop = StopOnSignal()  # SIGTERM, SIGUSR1, Ctrl-C: save how far it got, then end as signalled
    step = first - 1
    for step in range(first, args.total_timesteps + 1):
        action = (
            act(observation, env.action_space) if act else env.action_space.sample() if args.policy == "random" else 0
        )
        observation, reward, terminated, truncated, _ = env.step(action)
        episode_return += float(reward)
        if args.direct and frame_wanted(0):
            publish_frame(
                env.render(),
                env_index=0,
                global_step=step,
                reward=float(reward),
                episode_count=episodes,
                step_rate_hz=step / (time.perf_counter() - started),
                agent_rewards={"player": float(reward)},
            )
        if terminated or truncated:
            report_scalar("charts/episodic_return", episode_return, step)
            if args.direct:
                report_scalar("charts/episodic_return", episode_return, step, agent="player")
            episode_return, episodes = 0.0, episodes + 1
            observation, _ = env.reset()
        if step % args.log_every == 0:
            report_scalar("charts/SPS", (step - first + 1) / (time.perf_counter() - started), step)
        if args.checkpoint_frequency and step % args.checkpoint_frequency == 0 and step < args.total_timesteps:
            _save_progress(step)
        if stop.requested:
            break
    env.close()
    if stop.requested:
        _save_progress(step)
        stop.exit(completed=step >= args.total_timesteps)  # a stop in the last step: the run completed
    _save_progress(step)  # the run contract's checkpoint at the end
    # The policy is its own model: what was played, for how long (checkpoint_saved is a host event).
    with open("policy.json", "w", encoding="utf-8") as handle:
        json.dump({"policy": args.policy, "global_step": args.total_timesteps}, handle)
    emit_event("checkpoint_saved", {"path": "policy.json", "global_step": args.total_timesteps})


def _save_progress(step: int) -> None:
    """``checkpoints/step_N.json`` (the worker's checkpoint layout), written whole, then announced."""
    os.makedirs("checkpoints", exist_ok=True)
    path = f"checkpoints/step_{step}.json"
    with open(path + ".tmp", "w", encoding="utf-8") as handle:
        json.dump({"format": "example.progress/1", "global_step": step}, handle)
    os.replace(path + ".tmp", path)
    emit_event("checkpoint_saved", {"path": path, "global_step": step, "step": step, "format": "example.progress/1"})


def _direct_env(env_id: str) -> gym.Env:
    """The registered env class itself, with rgb_array rendering, no gym.make and no wrappers."""
    from gymnasium.envs.registration import load_env_creator

    spec = gym.spec(env_id)
    if spec.entry_point is None:
        raise ValueError(f"{env_id} is registered without an entry point")
    creator = spec.entry_point if callable(spec.entry_point) else load_env_creator(spec.entry_point)
    env = creator(render_mode="rgb_array", **spec.kwargs)
    if not isinstance(env, gym.Env):
        raise TypeError(f"{env_id}'s entry point made a {type(env).__name__}, not one env")
    return env


if __name__ == "__main__":
    main()
