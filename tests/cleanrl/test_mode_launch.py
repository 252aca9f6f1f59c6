"""Policy evaluation and interactive runs need no --algo or --total-timesteps."""

import json


def test_policy_eval_dry_run_needs_no_algo(mosaic, workdir):
    (workdir / "ckpt.cleanrl_model").write_bytes(b"not checked at dry run")
    result = mosaic(
        "run",
        "--worker",
        "cleanrl",
        "--env-id",
        "CartPole-v1",
        "--dry-run",
        "--emit-summary",
        "--extras",
        json.dumps(
            {"mode": "policy_eval", "policy_path": "ckpt.cleanrl_model", "eval_episodes": 3, "eval_deterministic": True}
        ),
    )
    assert result.returncode == 0, result.stderr
    summary = json.loads(result.stdout)
    assert summary["mode"] == "evaluate" and summary["algorithm"]["source"] == "mode"
    assert summary["command"][1:4] == ["-P", "-m", "cleanrl_worker.policy_eval"]  # -P: its cwd never on sys.path
    assert "--eval-deterministic" in summary["argv"] and "--eval-episodes=3" in summary["argv"]


def test_policy_eval_without_a_checkpoint_is_a_config_error(mosaic):
    result = mosaic("run", "--worker", "cleanrl", "--env-id", "CartPole-v1", "--extras", '{"mode": "policy_eval"}')
    assert result.returncode == 2 and "extras.checkpoint_path" in result.stderr and "Traceback" not in result.stderr


def test_interactive_session_through_mosaic_run(mosaic, runs_root):
    lines = ['{"cmd": "ping"}', '{"cmd": "reset", "seed": 1}', '{"cmd": "step"}', "oops", '{"cmd": "stop"}']
    result = mosaic(
        "run",
        "--worker",
        "cleanrl",
        "--env-id",
        "CartPole-v1",
        "--interactive",
        "--run-id",
        "talk",
        "--extras",
        '{"interactive_render": false}',
        input="\n".join(lines) + "\n",
    )
    assert result.returncode == 0, result.stderr
    replies = [json.loads(line) for line in result.stdout.splitlines()]
    assert [r["type"] for r in replies] == ["ready", "pong", "reset", "step", "error", "stopped"]
    events = [json.loads(l) for l in (runs_root / "talk" / "events.jsonl").read_text().splitlines()]
    assert events[0]["event"] == "run_started" and events[-1]["event"] == "run_completed"
