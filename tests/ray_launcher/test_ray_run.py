"""`mosaic run --ray-address` on a real two-node loopback cluster, what is Ray's own: placement,
the run directory back here (or on shared storage), FastLane's relay, a refused token, the driver's
end, a node lost mid-run. (A run, a stop and its resume, bad options, a sweep: the launcher
contract, test_ray_contract.py.) The job is the example worker."""

from __future__ import annotations

import json
import signal
import subprocess
import time
from pathlib import Path

import numpy as np

from tests.conftest import BIN
from tests.ray_launcher.conftest import caller_env, processes_of

RUN = ["run", "--worker", "example", "--env-id", "CartPole-v1"]


def mosaic(cluster, workdir: Path, *args: str, timeout: float = 300, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [str(BIN / "mosaic"), *args],
        cwd=workdir,
        env=caller_env(cluster, **env),
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def events_of(stdout: str) -> list[dict]:
    return [json.loads(line) for line in stdout.splitlines() if line.strip()]


def test_a_run_lands_on_the_chosen_node_and_comes_back(cluster, tmp_path):
    done = mosaic(
        cluster,
        tmp_path,
        *RUN,
        "--total-timesteps",
        "3000",
        "--json",
        "--ray-address",
        cluster.address,
        "--ray-resources",
        '{"nodeB": 1}',
        "--num-cpus",
        "1",
    )
    assert done.returncode == 0, done.stderr
    events = events_of(done.stdout)
    names = [e["event"] for e in events]
    assert names[0] == "run_started" and names[-1] == "run_completed" and "metrics" in names
    assert [e["seq"] for e in events] == list(range(1, len(events) + 1))
    ray_info = events[0]["payload"]["ray"]
    assert ray_info["node_id"] == cluster.node_ids["nodeB"]
    run_dir = Path(events[0]["payload"]["run_dir"])
    assert run_dir.parent == tmp_path / "var" / "trainer" / "runs"
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["status"] == "completed"
    assert manifest["ray"]["node_id"] == cluster.node_ids["nodeB"] and manifest["ray"]["address"]
    assert (run_dir / "logs" / "example.stderr.log").exists()
    recorded = [json.loads(line)["event"] for line in (run_dir / "events.jsonl").read_text().splitlines()]
    assert recorded == names
    for path in run_dir.rglob("*"):  # the cluster's token is nowhere in the run
        assert path.is_dir() or cluster.token.encode() not in path.read_bytes(), path
    assert cluster.token not in done.stdout + done.stderr
    assert not processes_of(events[0]["run_id"])


def test_shared_runs_storage_is_written_by_the_node_and_moved_into_place(cluster, tmp_path):
    """On loopback every node sees the same disk: the node writes under the runs root's
    staging folder, and the run directory is complete where a local run would be."""
    runs = tmp_path / "shared-runs"
    done = mosaic(
        cluster,
        tmp_path,
        *RUN,
        "--total-timesteps",
        "2000",
        "--json",
        "--runs-dir",
        str(runs),
        "--ray-address",
        cluster.address,
        "--ray-shared-runs",
        "--ray-resources",
        '{"nodeA": 1}',
    )
    assert done.returncode == 0, done.stderr
    events = events_of(done.stdout)
    run_dir = runs / events[0]["run_id"]
    assert json.loads((run_dir / "manifest.json").read_text())["ray"]["node_id"] == cluster.node_ids["nodeA"]
    assert (run_dir / "logs" / "example.stdout.log").exists()
    assert sorted(p.name for p in runs.iterdir()) == [run_dir.name]  # the staging folder is gone


def open_when_there(open_it, timeout: float = 30.0):
    """A FastLane segment is made just after ``run_started`` is out (as for a local run)."""
    from mosaic_fastlane.segment import SegmentMissing

    deadline = time.monotonic() + timeout
    while True:
        try:
            return open_it()
        except SegmentMissing:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)


def test_fastlane_frames_of_a_remote_run_are_read_here(cluster, tmp_path):
    """The run renders CartPole on nodeA into a FastLane segment of its own there; its frames
    reach this run's segment on the caller's side (made by the caller's process, which runs no
    training here), where a FastLaneReader (the dashboard's) reads them as they come."""
    from mosaic_fastlane import FastLaneReader

    shm = tmp_path / "shm"
    shm.mkdir(mode=0o700)
    node_dirs = set(Path("/dev/shm").glob("mosaic-relay-fl-*"))
    proc = subprocess.Popen(
        [
            str(BIN / "mosaic"),
            *RUN,
            "--total-timesteps",
            "50000000",
            "--json",
            "--ray-address",
            cluster.address,
            "--ray-resources",
            '{"nodeA": 1}',
            "--extras",
            '{"fastlane": true}',
        ],
        cwd=tmp_path,
        env=caller_env(cluster, MOSAIC_FASTLANE_SHM_DIR=str(shm)),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        started = json.loads(proc.stdout.readline())
        assert started["event"] == "run_started", started
        with open_when_there(lambda: FastLaneReader(started["run_id"], directory=shm)) as reader:
            assert reader.header.owner_pid == proc.pid  # the caller's own segment, not the node's
            first = reader.wait(timeout=120)
            assert first is not None, "no frame of the remote run reached the caller"
            later = reader.wait(after=reader.frames_published(), timeout=60)
            assert later is not None, "the remote run's frames stopped coming"
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert first.pixels.shape[1:] == (512, 3) and len(np.unique(first.pixels)) > 1  # a real 600x400 render, scaled
    assert 0 < first.global_step < later.global_step and later.frame_number > first.frame_number
    assert proc.returncode == 130, err
    manifest = json.loads((Path(started["payload"]["run_dir"]) / "manifest.json").read_text())
    assert manifest["fastlane"]["frames_published"] >= 2  # the node's own count, its manifest brought back
    assert not list(shm.iterdir()), "the caller's segment outlived the run"
    assert set(Path("/dev/shm").glob("mosaic-relay-fl-*")) <= node_dirs, "the node's frame directory outlived the run"


def test_a_refused_token_is_one_line_at_submit(cluster, tmp_path):
    """(Bad options: the launcher contract, test_ray_contract.py.) A token the cluster refuses."""
    runs = tmp_path / "var" / "trainer" / "runs"
    done = mosaic(
        cluster, tmp_path, *RUN, "--total-timesteps", "1000", "--ray-address", cluster.address, RAY_AUTH_TOKEN="0" * 64
    )
    assert done.returncode == 2, done.stderr
    lines = [line for line in done.stderr.strip().splitlines() if not line.startswith("mosaic: note:")]
    assert len(lines) == 1 and "token" in lines[0] and "Traceback" not in done.stderr and done.stdout == ""
    assert not runs.exists() or not any(runs.iterdir()), "a refused run left a directory"


def left_on_cluster(cluster) -> dict:
    """Jobs not ended and actors not dead on the cluster (this query's own job aside)."""
    script = (
        "import json, logging, ray; ray.init(address=%r, logging_level=logging.ERROR, log_to_driver=False); "
        "me = ray.get_runtime_context().get_job_id(); print(json.dumps({"
        "'jobs': [j['JobID'] for j in ray._private.state.jobs() if not j['IsDead'] and j['JobID'] != me], "
        "'actors': [a['ActorClassName'] for a in ray._private.state.actors().values() if a['State'] != 'DEAD']}))"
    ) % cluster.address
    done = subprocess.run(
        [str(BIN / "python"), "-c", script], env=caller_env(cluster), capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


def nothing_left_on(cluster) -> dict:
    deadline, left = time.monotonic() + 60, {}
    while time.monotonic() < deadline:  # the raylet ends a driver's job once it sees it go
        left = left_on_cluster(cluster)
        if not left["jobs"] and not left["actors"]:
            break
        time.sleep(1.0)
    return left


def test_the_caller_ends_with_its_run_and_leaves_no_job_or_actor(cluster, tmp_path):
    """The caller exits at once after the run (no Ray teardown): its driver's job still ends
    and its actor is gone; a run refused in its preparation, after the cluster was joined and
    its actor asked for (the early start), leaves none either."""
    done = mosaic(cluster, tmp_path, *RUN, "--total-timesteps", "1000", "--json", "--ray-address", cluster.address)
    assert done.returncode == 0 and events_of(done.stdout)[-1]["event"] == "run_completed", done.stderr
    assert nothing_left_on(cluster) == {"jobs": [], "actors": []}
    refused = mosaic(cluster, tmp_path, *RUN, "--total-timesteps", "-5", "--ray-address", cluster.address)
    assert refused.returncode == 2 and "total_timesteps" in refused.stderr, refused.stderr
    assert nothing_left_on(cluster) == {"jobs": [], "actors": []}
    runs = tmp_path / "var" / "trainer" / "runs"
    assert len(list(runs.iterdir())) == 1  # the refused run left no directory


def test_a_module_the_nodes_python_lacks_is_one_line_naming_what_to_install_there(cluster, tmp_path):
    policy = tmp_path / "policy.py"
    policy.write_text("import not_on_this_node\n\n\ndef act(observation, action_space):\n    return 0\n")
    done = mosaic(
        cluster,
        tmp_path,
        *RUN,
        "--algo",
        str(policy),
        "--total-timesteps",
        "500",
        "--json",
        "--ray-address",
        cluster.address,
    )
    failed = events_of(done.stdout)[-1]
    assert done.returncode != 0 and failed["event"] == "run_failed", done.stderr
    error = failed["payload"]["error"]
    assert error.startswith("ModuleNotFoundError on Ray node ") and "has no module 'not_on_this_node'" in error
    assert error.endswith("on that node: install the package that provides it into that Python")
    from mosaic_ray.remote import _missing_here  # a module an extra of MOSAIC's brings: that extra is named

    line = _missing_here(
        json.dumps({"event": "run_failed", "payload": {"error": "ModuleNotFoundError: No module named 'tyro'"}})
    )
    assert json.loads(line)["payload"]["error"].endswith("-m pip install 'mosaic-rl[cleanrl]'")


SLOW_POLICY = """import time


def act(observation, action_space):
    time.sleep(0.001)  # at most 1,000 steps a second: the run is still going when its node is lost
    return action_space.sample()
"""


def test_a_node_lost_mid_run_resumes_elsewhere_from_its_copied_back_checkpoint(cluster, tmp_path):
    """Two nodes started here offer "spare" (nodeC, nodeD). Once a checkpoint of the run has come
    back to the caller's run directory, the node the run is on is killed (its whole process tree,
    as a machine going away); the run goes on on the other node from the newest checkpoint copied
    back (run_resumed, one history: metric steps strictly increasing up to the total), not from
    step 0. The other node is then stopped: the shared cluster is back to nodeA and nodeB."""
    total, every = 12000, 2000
    policy = tmp_path / "slow_policy.py"
    policy.write_text(SLOW_POLICY)
    cluster.start_node("nodeC", extra={"spare": 1})
    cluster.start_node("nodeD", extra={"spare": 1})
    cluster.wait_nodes(4)
    proc = subprocess.Popen(
        [
            str(BIN / "mosaic"),
            *RUN,
            "--algo",
            str(policy),
            "--total-timesteps",
            str(total),
            "--json",
            "--ray-address",
            cluster.address,
            "--ray-resources",
            '{"spare": 1}',
            "--log-every",
            "500",
            "--extras",
            json.dumps({"checkpoint_frequency": every}),
        ],
        cwd=tmp_path,
        env=caller_env(cluster),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    lines, copied_back = [], None
    try:
        for line in proc.stdout:
            lines.append(line)
            record = json.loads(line)
            if record["event"] == "checkpoint_saved":
                run_dir = Path(json.loads(lines[0])["payload"]["run_dir"])
                copied_back = run_dir / record["payload"]["path"]
                deadline = time.monotonic() + 60
                while not copied_back.exists() and time.monotonic() < deadline:
                    time.sleep(0.05)
                assert copied_back.exists(), f"{copied_back} did not come back"
                break
        assert copied_back is not None, "".join(lines)
        first = json.loads(lines[0])["payload"]["ray"]["node_id"]
        victim = next(name for name, node_id in cluster.node_ids.items() if node_id == first)
        assert victim in ("nodeC", "nodeD")
        cluster.stop_node(victim)
        out, err = proc.communicate(timeout=400)
        node_ids = dict(cluster.node_ids)
    finally:
        if proc.poll() is None:
            proc.kill()
        for extra in ("nodeC", "nodeD"):
            if extra in cluster.nodes:
                cluster.remove_node(extra)
        cluster.wait_nodes(2, exact=True)
    events = events_of("".join(lines) + out)
    names = [e["event"] for e in events]
    assert proc.returncode == 0, err
    assert names.count("run_retried") == 1 and names.count("run_resumed") == 1 and names[-1] == "run_completed"
    assert names.index("run_retried") < names.index("run_resumed")
    retried = events[names.index("run_retried")]["payload"]
    resumed = events[names.index("run_resumed")]["payload"]
    assert first[:12] in retried["reason"] and retried["attempt"] == 2
    # From the newest checkpoint that came back before the node was lost: at least the one seen here.
    saved_before = [
        e["payload"]["step"] for e in events[: names.index("run_retried")] if e["event"] == "checkpoint_saved"
    ]
    from_step = resumed["from_step"]
    assert from_step in saved_before and from_step >= int(copied_back.stem.split("_")[1]) and from_step % every == 0
    assert retried["resumes_from"] == from_step and resumed["attempt"] == 1
    assert resumed["checkpoint"] == str(run_dir / "checkpoints" / f"step_{from_step}.json")
    # One history: what the lost node did past the checkpoint is dropped; the steps go on from
    # the checkpoint, never twice, to the total.
    from mosaic_core.events import metric_steps, one_history

    after = metric_steps(events[names.index("run_resumed") :])
    assert after and min(after) > from_step and max(after) == total
    steps = metric_steps(one_history(events))
    assert steps == sorted(set(steps)) and steps[-1] == total
    assert [e for e in events if e["event"] == "checkpoint_saved"][-1]["payload"]["global_step"] == total
    recorded = [json.loads(line) for line in (run_dir / "events.jsonl").read_text().splitlines()]
    assert [e["seq"] for e in recorded] == list(range(1, len(recorded) + 1))
    assert [e["event"] for e in recorded] == names
    launch = json.loads((run_dir / "launch.json").read_text())
    command = launch["command"]
    assert [a["from_step"] for a in launch["attempts"]] == [from_step]
    assert command[command.index("--mode") + 1] == "resume" and "--checkpoint" in command  # the contract's host flags
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["status"] == "completed"
    assert manifest["ray"]["node_id"] != first and manifest["ray"]["node_id"] in node_ids.values()
