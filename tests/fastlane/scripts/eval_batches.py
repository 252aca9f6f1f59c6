"""Evaluation batches as policy evaluation plays them: each batch's envs made inside
``evaluation_envs()`` and closed before the next. Prints, as JSON, per batch, whether each env
publishes FastLane frames (a FastLaneWrapper in its chain), then the same for an env made after."""

import json

import gymnasium as gym

from mosaic_core.child import evaluation_envs


def published(env):
    while env is not None:
        if type(env).__name__ == "FastLaneWrapper":
            return True
        env = getattr(env, "env", None)
    return False


if __name__ == "__main__":
    gym.make("CartPole-v1").close()  # training's env 0
    batches = []
    for _ in range(2):
        with evaluation_envs():
            envs = [gym.make("CartPole-v1") for _ in range(2)]
        batches.append([published(env) for env in envs])
        for env in envs:
            env.close()
    after = gym.make("CartPole-v1")  # training's count goes on: env 1
    print(json.dumps({"batches": batches, "after": published(after)}), flush=True)
