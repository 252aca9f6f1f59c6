"""The run contract's core (mosaic_core.contract): modes, checkpoint lookup, the evaluation schema."""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import subprocess
import sys
import textwrap

import pytest

from mosaic_core import UsageError, contract
from mosaic_core.contract import CheckpointLayout


@pytest.mark.parametrize(
    ("given", "read"),
    [
        (None, "train"),
        ("", "train"),
        ("train", "train"),
        ("resume_training", "resume"),
        ("policy_eval", "evaluate"),
        ("resume", "resume"),
        ("evaluate", "evaluate"),
        ("bogus", "bogus"),
        (3, 3),
    ],
)
def test_modes_are_read_once_old_names_included(given, read):
    assert contract.normalize_mode(given) == read


def test_the_newest_checkpoint_is_the_highest_step_of_the_declared_kind(tmp_path):
    files = CheckpointLayout("checkpoints/step_{step}.model", "test.model")
    (tmp_path / "checkpoints").mkdir()
    for step in (5, 100, 20):
        (tmp_path / "checkpoints" / f"step_{step}.model").write_bytes(b"x")
    (tmp_path / "checkpoints" / "step_999").mkdir()  # a directory: not this layout's kind
    (tmp_path / "checkpoints" / "step_7.model.tmp").write_bytes(b"x")  # half-written
    (tmp_path / "checkpoints" / "step_x.model").write_bytes(b"x")
    elsewhere = tmp_path / "other.model"
    elsewhere.write_bytes(b"x")
    (tmp_path / "checkpoints" / "step_5000.model").symlink_to(elsewhere)  # a link is never followed
    assert [c.step for c in contract.find_checkpoints(tmp_path, files)] == [5, 20, 100]
    newest = contract.newest_checkpoint(tmp_path, files)
    assert newest is not None and newest.path == tmp_path / "checkpoints" / "step_100.model"
    assert newest.payload() == {"path": str(newest.path), "step": 100, "format": "test.model", "code": False}

    dirs = CheckpointLayout("checkpoints/step_{step}", "test.dir", kind="dir", code=True)
    found = contract.newest_checkpoint(tmp_path, dirs)
    assert found is not None and (found.step, found.code) == (999, True)
    assert contract.newest_checkpoint(tmp_path / "missing", dirs) is None


def test_a_layout_is_a_relative_pattern_with_one_step(tmp_path):
    for bad in ("/abs/step_{step}", "step", "a/{step}/{step}", "../step_{step}"):
        with pytest.raises(ValueError, match="pattern"):
            CheckpointLayout(bad, "f")
    with pytest.raises(ValueError, match="kind"):
        CheckpointLayout("c/{step}", "f", kind="zip")  # type: ignore[arg-type]
    layout = CheckpointLayout("{run_id}/step_{step}.pt", "f")
    assert layout.path(tmp_path, 7, "r1") == tmp_path / "r1" / "step_7.pt"
    (tmp_path / "r1").mkdir()
    (tmp_path / "r1" / "step_7.pt").write_bytes(b"")
    assert [c.step for c in contract.find_checkpoints(tmp_path, layout, "r1")] == [7]


def test_evaluation_seeds_are_disjoint_from_training_seeds():
    assert contract.eval_seeds(3, training_seed=1) == [1_000_001, 1_000_002, 1_000_003]
    assert contract.eval_seeds(2, training_seed=None) == [1_000_000, 1_000_001]
    assert contract.eval_seeds(2, training_seed=1, eval_seed=7) == [7, 8]
    with pytest.raises(ValueError, match="at least 1"):
        contract.eval_seeds(0)


def trim_mean_quarter(values):
    """scipy.stats.trim_mean(values, 0.25), written out: int(0.25 * n) cut from each end."""
    ordered = sorted(values)
    cut = int(0.25 * len(ordered))
    middle = ordered[cut : len(ordered) - cut]
    return sum(middle) / len(middle)


def test_iqm_is_rliables_interquartile_mean():
    assert contract.iqm([1, 2, 3, 4, 5, 6, 7, 8]) == 4.5
    assert contract.iqm([5.0]) == 5.0
    rng = random.Random(0)
    for n in range(1, 40):
        values = [rng.gauss(0, 100) for _ in range(n)]
        assert contract.iqm(values) == pytest.approx(trim_mean_quarter(values), abs=1e-9)


def test_the_evaluation_schema_and_its_atomic_write(tmp_path):
    result = contract.eval_result(
        worker="w",
        algo="a",
        env_id="E-v0",
        checkpoint="c",
        global_step=9,
        returns=[1, 2, 3, 10],
        lengths=[5, 6, 7, 8],
        seeds=[11, 12, 13, 14],
        deterministic=True,
        agent_returns=[{"a0": 0.5, "a1": 0.5}] * 4,
    )
    assert result["schema"] == "mosaic.eval/1"
    assert result["protocol"] == {"episodes": 4, "deterministic": True, "first_seed": 11, "normalization": "frozen"}
    assert result["episodes"][0] == {"return": 1.0, "length": 5, "seed": 11, "agents": {"a0": 0.5, "a1": 0.5}}
    assert (result["mean"], result["iqm"]) == (4.0, 2.5)
    with pytest.raises(ValueError, match="one entry per episode"):
        contract.eval_result(
            worker="w",
            algo="a",
            env_id="E",
            checkpoint="c",
            global_step=0,
            returns=[1],
            lengths=[],
            seeds=[1],
            deterministic=False,
        )

    target = tmp_path / "eval.json"
    victim = tmp_path / "victim"
    victim.write_text("theirs")
    target.symlink_to(victim)  # a link planted at the target is refused: never written through
    with pytest.raises(UsageError, match="--eval-out .*eval.json is a symbolic link"):
        contract.write_eval(target, result)
    assert victim.read_text() == "theirs" and target.is_symlink()
    target.unlink()
    contract.write_eval(target, result)
    assert json.loads(target.read_text())["episodes"][3]["return"] == 10.0
    assert oct(target.stat().st_mode & 0o777) == "0o600"
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []


def test_training_programs_parse_the_hosts_fields_with_the_contracts_defaults():
    parser = contract.add_host_arguments(argparse.ArgumentParser())
    ns = parser.parse_args(["--algo", "PPO", "--mode", "policy_eval", "--checkpoint", "c"])
    assert (ns.mode, ns.eval_episodes, ns.eval_out, ns.checkpoint_frequency) == ("evaluate", 10, "eval.json", 0)


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGUSR1, signal.SIGINT])
def test_a_stop_signal_lets_the_loop_save_then_ends_as_killed_by_it(tmp_path, signum):
    program = textwrap.dedent(f"""
        import os, signal, sys
        from mosaic_core import contract
        from mosaic_core.contract import StopOnSignal
        stop = StopOnSignal()
        os.kill(os.getpid(), {int(signum)})
        steps = 0
        while not stop.requested:
            steps += 1
        open({str(tmp_path / "saved")!r}, "w").write("saved")
        contract.at_stop_exit(lambda: open({str(tmp_path / "finished")!r}, "w").write("after the save"))
        contract.at_stop_exit(lambda: 1 / 0)  # a failing callback does not stop the stop
        stop.exit()
        print("not reached")
    """)
    done = subprocess.run(
        [sys.executable, "-P", "-c", program],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
    )
    assert done.returncode == -signum, done.stderr
    assert (tmp_path / "saved").read_text() == "saved" and "not reached" not in done.stdout
    assert (tmp_path / "finished").read_text() == "after the save"  # what a plugin asked to run at the stop
    assert f"stopped by {signal.Signals(signum).name}" in done.stderr


def test_a_stop_after_the_whole_budget_ends_the_program_normally(tmp_path):
    """A stop heard only once the loop had done its budget: nothing is left to resume, so the
    program ends normally (the host records the run completed), saying so."""
    program = textwrap.dedent(f"""
        import os, signal
        from mosaic_core import contract
        stop = contract.StopOnSignal()
        for step in range(1, 101):
            if step == 100:
                os.kill(os.getpid(), signal.SIGTERM)  # in the last step
            if stop.requested:
                break
        contract.at_stop_exit(lambda: open({str(tmp_path / "stopped")!r}, "w").write("as a stop"))
        stop.exit(completed=step == 100)
        print("ended normally")
    """)
    done = subprocess.run(
        [sys.executable, "-P", "-c", program],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
    )
    assert done.returncode == 0 and "ended normally" in done.stdout, done.stderr
    assert "SIGTERM came after the run's last step: it completed" in done.stderr
    assert not (tmp_path / "stopped").exists()  # not ended as a stop


def test_an_evaluation_video_is_an_mp4_of_the_frames_written_whole(tmp_path):
    cv2 = pytest.importorskip("cv2")
    import numpy as np

    assert contract.video_encoder() == contract.video_encoder(sys.executable) == "cv2"  # this venv has OpenCV
    frames = [np.full((40, 60, 3), (10 * i, 0, 200), dtype=np.uint8) for i in range(12)]
    path = contract.write_mp4(tmp_path / "out.mp4", frames)
    capture = cv2.VideoCapture(str(path))
    size = (
        capture.get(cv2.CAP_PROP_FRAME_COUNT),
        capture.get(cv2.CAP_PROP_FRAME_WIDTH),
        capture.get(cv2.CAP_PROP_FRAME_HEIGHT),
    )
    ok, first = capture.read()
    capture.release()
    assert size == (12, 60, 40) and ok and first[..., 0].mean() > 150  # RGB in: blue read back (BGR) as blue
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.mp4"]  # no temporary left
    assert "no MP4 encoder" in contract.no_video_encoder("rllib") and "rllib" in contract.no_video_encoder("rllib")
