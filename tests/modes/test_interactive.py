"""Interactive mode: a real subprocess driven line by line over its stdin/stdout."""

from __future__ import annotations

import base64
import io
import json
import os
import queue
import subprocess
import sys
import threading
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
KINDS = {"ready", "act", "reset", "step", "pong", "help", "stopped", "error"}


class Interactive:
    """``python -m cleanrl_worker.interactive ARGS`` with a request/response helper."""

    def __init__(self, *args: str, cwd: Path = REPO):
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "cleanrl_worker.interactive", *args],
            cwd=cwd,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
        self._lines: queue.Queue[str] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        for line in self.proc.stdout:
            self._lines.put(line)
        self._lines.put("")

    def receive(self, timeout: float = 120) -> dict:
        line = self._lines.get(timeout=timeout)
        assert line, f"stdout closed; stderr: {self.proc.stderr.read()}"
        message = json.loads(line)  # every protocol line is one JSON object
        assert message["type"] in KINDS
        return message

    def ask(self, request: dict | str) -> dict:
        line = request if isinstance(request, str) else json.dumps(request)
        self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()
        return self.receive()

    def finish(self, timeout: float = 60) -> tuple[int, str]:
        """Close stdin and wait: (exit code, stderr)."""
        if not self.proc.stdin.closed:
            self.proc.stdin.close()
        code = self.proc.wait(timeout)
        return code, self.proc.stderr.read()

    def leftover(self) -> list[str]:
        lines = []
        while True:
            line = self._lines.get(timeout=10)
            if not line:
                return lines
            lines.append(line)


@pytest.fixture
def session_factory():
    started: list[Interactive] = []

    def start(*args: str, cwd: Path = REPO) -> Interactive:
        started.append(Interactive(*args, cwd=cwd))
        return started[-1]

    yield start
    for session in started:  # nothing left running, whatever a test did
        if session.proc.poll() is None:
            session.proc.kill()
            session.proc.wait()


def decode_png(frame: dict):
    from PIL import Image

    assert frame["format"] == "png"
    image = Image.open(io.BytesIO(base64.b64decode(frame["data"])))
    assert image.size == (frame["width"], frame["height"])
    return image


def test_reset_step_ping_bad_lines_and_stop(session_factory):
    session = session_factory("--env-id", "CartPole-v1", "--seed", "5", "--render")
    ready = session.receive()
    assert ready["type"] == "ready" and ready["env_id"] == "CartPole-v1" and ready["policy"] is None
    assert ready["action_space"] == {"type": "Discrete", "n": 2, "start": 0}
    assert ready["observation_space"]["shape"] == [4] and set(ready["commands"]) >= {"reset", "step", "ping", "stop"}

    assert "reset" in session.ask({"cmd": "step"})["message"]  # no episode yet
    reset = session.ask({"cmd": "reset", "seed": 3, "id": "r1"})
    assert reset["type"] == "reset" and reset["id"] == "r1" and reset["step"] == 0 and reset["episode"] == 1
    obs = reset["observation"]
    assert obs["shape"] == [4] and obs["dtype"] == "float32" and len(obs["values"]) == 4
    assert obs["min"] == min(obs["values"]) and obs["max"] == max(obs["values"])
    assert decode_png(reset["frame"]).size == (600, 400)

    step = session.ask({"cmd": "step", "action": 1})
    assert (step["action"], step["action_source"], step["reward"], step["step"]) == (1, "user", 1.0, 1)
    assert step["terminated"] is False and step["truncated"] is False and step["info"] == {}
    assert step["episode_return"] == 1.0 and "frame" in step

    for bad, expected in (
        ("not json", "malformed JSON"),
        ("[1, 2]", "JSON object"),
        ({"cmd": "fly"}, "unknown command 'fly'"),
        ({"cmd": "step", "action": 7}, "invalid action 7"),
        ({"cmd": "step", "action": "left"}, "needs an integer"),
        ({"cmd": "reset", "seed": -1}, "invalid seed"),
    ):
        answer = session.ask(bad)
        assert answer["type"] == "error" and expected in answer["message"]
    assert session.ask({"cmd": "ping", "id": 9}) == {"type": "pong", "id": 9}

    while not step["terminated"] and not step["truncated"]:
        step = session.ask({"cmd": "step"})
        assert step["action_source"] == "random" and step["action"] in (0, 1)
    assert step["episode_return"] == step["step"]  # CartPole pays 1 per step
    assert "ended" in session.ask({"cmd": "step"})["message"]
    assert session.ask({"cmd": "reset"})["episode"] == 2

    assert session.ask({"cmd": "stop"})["type"] == "stopped"
    code, stderr = session.finish()
    assert code == 0 and "Traceback" not in stderr
    assert session.leftover() == []


def test_end_of_input_ends_cleanly(session_factory):
    session = session_factory("--env-id", "CartPole-v1")
    assert session.receive()["type"] == "ready"
    assert session.ask({"cmd": "ping"}) == {"type": "pong"}
    code, stderr = session.finish()
    assert code == 0 and "Traceback" not in stderr


def test_policy_actions_are_reproducible(session_factory, ppo_checkpoint):
    runs = []
    for _ in range(2):
        session = session_factory("--env-id", "CartPole-v1", "--seed", "2", "--policy-path", str(ppo_checkpoint))
        ready = session.receive()
        assert ready["policy"]["algo"] == "ppo" and ready["policy"]["global_step"] == 2048
        session.ask({"cmd": "reset"})
        steps = [session.ask({"cmd": "step"}) for _ in range(8)]
        assert {s["action_source"] for s in steps} == {"policy"}
        runs.append([(s["action"], s["observation"]["values"]) for s in steps])
        assert session.finish()[0] == 0
    assert runs[0] == runs[1]


def test_act_answers_for_an_observation_it_is_given(session_factory, ppo_checkpoint):
    """The arena's seat protocol (``Worker.policy_server``): the greedy policy's action for an
    observation the caller sends, the env never stepped; without a policy, or for an observation of
    the wrong shape, an error line and the session goes on."""
    bare = session_factory("--env-id", "CartPole-v1")
    assert bare.receive()["type"] == "ready"
    assert "no policy loaded" in bare.ask({"cmd": "act", "observation": [0, 0, 0, 0]})["message"]
    actions = []
    for _ in range(2):
        session = session_factory(
            "--env-id", "CartPole-v1", "--policy-path", str(ppo_checkpoint), "--deterministic", "--seed", str(_)
        )  # fmt: skip
        assert session.receive()["type"] == "ready"
        observations = [[0.0, 0.0, angle, speed] for angle in (-0.1, 0.1) for speed in (-1.0, 1.0)]
        answers = [session.ask({"cmd": "act", "observation": o, "id": i}) for i, o in enumerate(observations)]
        assert [a["type"] for a in answers] == ["act"] * 4 and [a["id"] for a in answers] == [0, 1, 2, 3]
        actions.append([a["action"] for a in answers])
        for bad in ([1, 2], "left", None):
            answer = session.ask({"cmd": "act", "observation": bad})
            assert answer["type"] == "error" and "observation" in answer["message"]
        assert session.ask({"cmd": "stop"})["type"] == "stopped"
    assert actions[0] == actions[1] and set(actions[0]) <= {0, 1}  # greedy: another seed, the same actions


def test_minigrid_policy_and_image_observation(session_factory, minigrid_checkpoint):
    session = session_factory(
        "--env-id", "MiniGrid-Empty-5x5-v0", "--seed", "1", "--render", "--policy-path", str(minigrid_checkpoint)
    )
    ready = session.receive()
    assert ready["observation_space"]["shape"] == [7, 7, 3]  # the CNN agent's image observation
    reset = session.ask({"cmd": "reset"})
    obs = reset["observation"]
    assert obs["shape"] == [7, 7, 3] and obs["dtype"] == "uint8" and "values" not in obs  # too big to list
    step = session.ask({"cmd": "step"})
    assert step["action_source"] == "policy" and 0 <= step["action"] < 7
    decode_png(step["frame"])
    assert session.ask({"cmd": "stop"})["type"] == "stopped"
    assert session.finish()[0] == 0


def test_env_output_stays_off_the_protocol_stream(session_factory):
    session = session_factory("--env-id", "tests.modes.noisy_env:NoisyCartPole-v0")
    assert session.receive()["type"] == "ready"
    assert session.ask({"cmd": "reset"})["type"] == "reset"  # receive() parses each line as JSON
    assert session.ask({"cmd": "step", "action": 0})["type"] == "step"
    code, stderr = session.finish()
    assert code == 0 and "noisy: reset" in stderr and "noisy: step" in stderr


@pytest.mark.parametrize(
    "args, expected",
    [
        (["--env-id", "NoSuchEnv-v0"], "NoSuchEnv-v0"),
        (["--env-id", "CartPole-v1", "--policy-path", "missing.cleanrl_model"], "no such file"),
        (["--env-id", "Acrobot-v1", "--policy-path", "{ppo}"], "observation space"),
    ],
)
def test_bad_start_is_one_line_and_exit_2(tmp_path, ppo_checkpoint, args, expected):
    args = [arg.replace("{ppo}", str(ppo_checkpoint)) for arg in args]
    proc = subprocess.run(
        [sys.executable, "-m", "cleanrl_worker.interactive", *args],
        cwd=tmp_path,
        input="",
        capture_output=True,
        text=True,
        timeout=120,
    )
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert proc.returncode == 2 and proc.stdout == ""
    assert len(lines) == 1 and lines[0].startswith("error:") and expected in lines[0]


def test_continuous_actions_in_process(continuous_checkpoint):
    """The session object itself, on a real env with a real policy (normalised observations)."""
    from cleanrl_worker.interactive import CommandError, Session
    from cleanrl_worker.policy_eval import load_policy

    policy = load_policy(str(continuous_checkpoint), "Pendulum-v1", seed=0)
    session = Session(policy.make_env(), policy.single, seed=4)
    session.handle({"cmd": "reset"})
    chosen = session.handle({"cmd": "step"})
    assert chosen["action_source"] == "policy" and len(chosen["action"]) == 1
    assert session.handle({"cmd": "step", "action": 0.5})["action"] == [0.5]  # a scalar for a Box of shape (1,)
    assert session.handle({"cmd": "step", "action": [-1.5]})["action"] == [-1.5]
    bad_actions: list = [[0.1, 0.2], "up"]
    if session.env.action_space.high[0] < 5:  # gymnasium 1.x ClipAction widens the space to (-inf, inf)
        bad_actions.append([5.0])
    for bad in bad_actions:
        with pytest.raises(CommandError):
            session.handle({"cmd": "step", "action": bad})
    session.env.close()


def test_through_mosaic_run(mosaic, runs_root):
    lines = [{"cmd": "reset", "seed": 0}] + [{"cmd": "step"}] * 60 + [{"cmd": "stop"}]
    result = mosaic(
        "run",
        "--worker",
        "cleanrl",
        "--algo",
        "ppo",
        "--env-id",
        "CartPole-v1",
        "--total-timesteps",
        "1",
        "--interactive",
        "--run-id",
        "talk1",
        "--seed",
        "0",
        input="".join(json.dumps(line) + "\n" for line in lines),
    )
    assert result.returncode == 0, result.stderr
    replies = [json.loads(line) for line in result.stdout.splitlines()]
    assert all("event" not in reply for reply in replies)  # lifecycle events go to events.jsonl only
    assert replies[0]["type"] == "ready" and replies[1]["type"] == "reset" and replies[-1]["type"] == "stopped"
    assert any(reply.get("done") for reply in replies)  # a random CartPole episode ends within 60 steps
    events = [json.loads(line) for line in (runs_root / "talk1" / "events.jsonl").read_text().splitlines()]
    assert events[0]["event"] == "run_started" and events[-1]["event"] == "run_completed"
    notes = [e["payload"] for e in events if e["event"] == "note"]
    assert notes and notes[0]["interactive"] == "episode_end" and notes[0]["episode"] == 1


def test_summaries_are_always_strict_json():
    """Any numeric observation (NaN and infinities included) and any info become strict JSON."""
    import numpy as np
    from hypothesis import given, settings
    from hypothesis import strategies as st
    from hypothesis.extra.numpy import array_shapes, arrays

    from cleanrl_worker.interactive import SMALL, json_safe, summarize

    dtypes = st.sampled_from([np.float32, np.float64, np.int64, np.uint8, np.bool_])

    @settings(max_examples=150, deadline=None)
    @given(arrays(dtypes, array_shapes(min_dims=0, max_dims=3, max_side=6)))
    def check(obs):
        summary = summarize(obs)
        json.dumps(summary, allow_nan=False)
        json.dumps(json_safe({"obs": obs, "tuple": (obs, 1), "x": np.float32(0.1)}), allow_nan=False)
        assert summary["shape"] == list(obs.shape) and summary["dtype"] == str(obs.dtype)
        assert ("values" in summary) == (obs.size <= SMALL)
        if "values" in summary:
            assert np.array(summary["values"], dtype=object).shape == obs.shape

    check()
    assert json_safe(np.float32(0.1)) == 0.1 and json_safe(float("nan")) == "nan"
    assert summarize({"image": np.zeros((7, 7, 3), np.uint8), "mission": "go"})["items"]["mission"]["values"] == "go"
