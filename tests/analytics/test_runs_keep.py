"""`mosaic runs export|import|rm|gc`, on the session's real runs: archives read back, hostile
archives refused, running runs never removed, bad input is one line, exit 2, nothing deleted."""

from __future__ import annotations

import io
import json
import os
import shutil
import tarfile
import time

import pytest

from tests.conftest import run_cli


@pytest.fixture
def root(finished_runs, tmp_path):
    """A copy of the real runs, a checkpoint in the completed one, and a run still running."""
    root = tmp_path / "runs"
    shutil.copytree(finished_runs.root, root)
    (root / "done" / "model.pt").write_bytes(b"weights" * 100)
    (root / "live").mkdir()
    (root / "live" / "config.json").write_text(json.dumps({"run_id": "live", "algo": "ppo", "env_id": "CartPole-v1"}))
    started = {"event": "run_started", "run_id": "live", "seq": 1, "timestamp": time.time(), "payload": {}}
    beat = {"event": "heartbeat", "run_id": "live", "seq": 2, "timestamp": time.time(), "payload": {"pid": os.getpid()}}
    (root / "live" / "events.jsonl").write_text(json.dumps(started) + "\n" + json.dumps(beat) + "\n")
    return root


def mosaic(tmp_path, root, *args):
    return run_cli(["runs", *args, "--runs-dir", str(root)], cwd=tmp_path, env={"MOSAIC_RUNS_DIR": ""})


def listed(tmp_path, root) -> dict:
    result = mosaic(tmp_path, root, "--json")
    assert result.returncode == 0, result.stderr
    return {r["run_id"]: r for r in json.loads(result.stdout)}


def refused(result, message: str) -> None:
    assert result.returncode == 2, (result.stdout, result.stderr)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and message in lines[0] and "Traceback" not in result.stderr, result.stderr


def test_export_then_import_gives_the_same_run(root, tmp_path):
    archive = tmp_path / "done.tar.gz"
    result = mosaic(tmp_path, root, "export", "done", "-o", str(archive))
    assert result.returncode == 0, result.stderr
    with tarfile.open(archive) as tar:
        names = set(tar.getnames())
    assert {"done/config.json", "done/events.jsonl", "done/manifest.json", "done/model.pt", "done/EXPORT.json"} <= names
    assert any(n.startswith("done/logs/") for n in names) and any("tfevents" in n for n in names)
    light = tmp_path / "light.tar.gz"
    assert mosaic(tmp_path, root, "export", "done", "-o", str(light), "--no-checkpoints").returncode == 0
    with tarfile.open(light) as tar:
        assert "done/model.pt" not in tar.getnames() and "done/events.jsonl" in tar.getnames()

    other = tmp_path / "other"
    result = mosaic(tmp_path, other, "import", str(archive))
    assert result.returncode == 0, result.stderr
    for rel in ("config.json", "events.jsonl", "manifest.json", "model.pt"):
        assert (other / "done" / rel).read_bytes() == (root / "done" / rel).read_bytes()
    assert not (other / "done" / "EXPORT.json").exists()
    assert oct((other / "done" / "model.pt").stat().st_mode & 0o777) == "0o600"
    imported = listed(tmp_path, other)["done"]
    assert (
        imported["status"] == "completed" and imported["global_step"] == listed(tmp_path, root)["done"]["global_step"]
    )
    refused(mosaic(tmp_path, other, "import", str(archive)), "exists already")


def _tar(path, members):
    with tarfile.open(path, "w:gz") as tar:
        for info, data in members:
            tar.addfile(info, io.BytesIO(data) if data is not None else None)


def _file(name, data=b"x"):
    info = tarfile.TarInfo(name)
    info.size = len(data)
    return info, data


def _listing(run_id, files):
    import hashlib

    body = json.dumps(
        {
            "format": "mosaic.run-export/1",
            "run_id": run_id,
            "files": {
                rel: {"size": len(data), "sha256": hashlib.sha256(data).hexdigest()} for rel, data in files.items()
            },
        }
    ).encode()
    return _file(f"{run_id}/EXPORT.json", body)


def test_import_refuses_foreign_corrupt_and_hostile_archives(root, tmp_path):
    good = tmp_path / "good.tar.gz"
    assert mosaic(tmp_path, root, "export", "done", "-o", str(good), "--no-checkpoints").returncode == 0
    cases = {}
    cases["foreign"] = (tmp_path / "foreign.tar.gz", "not a MOSAIC run export")
    _tar(cases["foreign"][0], [_file("notes/readme.txt")])
    cases["truncated"] = (tmp_path / "truncated.tar.gz", "not a readable MOSAIC run export")
    cases["truncated"][0].write_bytes(good.read_bytes()[: good.stat().st_size // 2])
    cases["garbage"] = (tmp_path / "garbage.tar.gz", "not a readable MOSAIC run export")
    cases["garbage"][0].write_bytes(os.urandom(4096))
    cases["traversal"] = (tmp_path / "traversal.tar.gz", "outside the run's folder")
    _tar(cases["traversal"][0], [_listing("r1", {"a": b"x"}), _file("r1/a"), _file("r1/../../evil")])
    cases["absolute"] = (tmp_path / "absolute.tar.gz", "outside the run's folder")
    _tar(cases["absolute"][0], [_listing("r1", {"a": b"x"}), _file("r1/a"), _file("/tmp/evil")])
    link = tarfile.TarInfo("r1/b")
    link.type, link.linkname = tarfile.SYMTYPE, "/etc/passwd"
    cases["link"] = (tmp_path / "link.tar.gz", "is a link or special file")
    _tar(cases["link"][0], [_listing("r1", {"a": b"x"}), _file("r1/a"), (link, None)])
    cases["checksum"] = (tmp_path / "checksum.tar.gz", "does not match its checksum")
    _tar(cases["checksum"][0], [_listing("r1", {"a": b"x"}), _file("r1/a", b"y")])
    cases["unlisted"] = (tmp_path / "unlisted.tar.gz", "is not the file its EXPORT.json lists")
    _tar(cases["unlisted"][0], [_listing("r1", {"a": b"x"}), _file("r1/a"), _file("r1/extra")])
    fresh = tmp_path / "fresh"  # import reads the archive once: into a root without its run, the archive's fault shows
    fresh.mkdir(mode=0o700)
    for name, (path, message) in cases.items():
        refused(mosaic(tmp_path, fresh, "import", str(path)), message)
        assert list(fresh.iterdir()) == [], name  # nothing unpacked, no staging left
    assert not (tmp_path / "evil").exists()


def test_export_refuses_unwritable_and_existing_paths(root, tmp_path):
    refused(
        mosaic(tmp_path, root, "export", "done", "-o", str(tmp_path / "missing" / "a.tar.gz")), "cannot write there"
    )
    refused(mosaic(tmp_path, root, "export", "done", "-o", "/proc/a.tar.gz"), "cannot write")
    (tmp_path / "there.tar.gz").write_text("keep")
    refused(mosaic(tmp_path, root, "export", "done", "-o", str(tmp_path / "there.tar.gz")), "exists already")
    assert (tmp_path / "there.tar.gz").read_text() == "keep"
    refused(mosaic(tmp_path, root, "export", "done"), "usage: mosaic runs export")
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]


def test_rm_refuses_a_running_run_and_asks_for_yes(root, tmp_path):
    refused(mosaic(tmp_path, root, "rm", "done", "live", "--yes"), "not ended: refusing to remove")
    assert (root / "done").is_dir() and (root / "live").is_dir()
    dry = mosaic(tmp_path, root, "rm", "done")
    assert dry.returncode == 0 and "would remove done" in dry.stdout and (root / "done").is_dir()
    result = mosaic(tmp_path, root, "rm", "done", "--yes")
    assert result.returncode == 0, result.stderr
    assert not (root / "done").exists() and "done" not in listed(tmp_path, root)


def test_gc_by_status_age_and_count(root, tmp_path):
    refused(mosaic(tmp_path, root, "gc", "--older-than", "30 days"), "--older-than '30 days'")
    refused(mosaic(tmp_path, root, "gc"), "needs --keep-last N, --older-than AGE or --failed")
    assert mosaic(tmp_path, root, "gc", "--older-than", "30d", "--yes").returncode == 0
    assert set(listed(tmp_path, root)) >= {"done", "broken", "stopped", "live"}  # all younger than 30 days
    assert mosaic(tmp_path, root, "gc", "--failed", "--yes").returncode == 0
    assert "broken" not in listed(tmp_path, root) and (root / "done").is_dir()
    assert mosaic(tmp_path, root, "gc", "--keep-last", "0", "--yes").returncode == 0
    assert set(listed(tmp_path, root)) == {"live"}  # the running run stays


def test_runs_lists_disk_use_and_experiment_names(root, tmp_path):
    config = json.loads((root / "done" / "config.json").read_text())
    (root / "done" / "config.json").write_text(json.dumps({**config, "extras": {"experiment_name": "exp1"}}))
    runs = listed(tmp_path, root)
    assert runs["done"]["disk_bytes"] >= 700 and runs["done"]["experiment"] == "exp1"
    result = mosaic(tmp_path, root, "--name", "exp1", "--json")
    assert [r["run_id"] for r in json.loads(result.stdout)] == ["done"]
