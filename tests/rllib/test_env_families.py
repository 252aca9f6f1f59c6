"""The env families the RLlib worker's capabilities claim beyond gymnasium's own, from the extras
of its environment (``mosaic workers install rllib --extras atari,mujoco``): Atari through
RLlib's Atari preprocessing (ale_py registered in each env runner) with a FastLane frame from
the env runner, MuJoCo's continuous actions. Their episodes are long (Pong: about 800 agent
steps; HalfCheetah: 1,000), so an iteration often ends one episode: RLlib then reduces the
callback's series of returns to that one value, which must still be reported."""

import json

import pytest

from tests.rllib.conftest import events_of, run_args, run_mosaic

pytestmark = pytest.mark.slow  # tens of seconds each

CASES = {
    "ALE/Pong-v5": ({"train_batch_size_per_learner": 1000, "num_epochs": 1}, 2000, {"fastlane_record": 1}),
    "HalfCheetah-v5": ({"train_batch_size_per_learner": 500}, 1500, None),
}


@pytest.mark.parametrize("env_id", sorted(CASES))
def test_trains_on_the_env_family(rllib_env, tmp_path, env_id):
    params, total, extras = CASES[env_id]
    done = run_mosaic(run_args("family", tmp_path, total=total, env_id=env_id, params=params, extras=extras), rllib_env)
    assert done.returncode == 0, done.stderr[-3000:]
    events = events_of(tmp_path / "family")
    assert events[-1]["event"] == "run_completed"
    last = [e["payload"] for e in events if e["event"] == "metrics"][-1]
    assert last["global_step"] >= total and last["episodes"] >= 1 and last["episodic_return"] is not None
    assert any("loss" in name for name in last["losses"])
    if extras:  # a frame of the Atari screen (the unwrapped env's render), from the env runner's process
        from PIL import Image

        section = json.loads((tmp_path / "family" / "manifest.json").read_text())["fastlane"]
        assert section["frames_published"] >= 1 and section["errors"] == []
        with Image.open(sorted((tmp_path / "family" / "videos" / "fastlane").glob("*.png"))[-1]) as image:
            assert image.size == (160, 210)
