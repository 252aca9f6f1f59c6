"""Issue 35, classes 1, 2, 6 and the import half of 7: an archive, a checkpoint or a config from
another local user (uid 65534, ``setpriv``) never runs as the owner nor reaches outside the run.

* ``RUN//abs/path`` (an empty component) naming a root-only file outside: refused, the file's
  mode and content untouched; a member can never land through a link (by construction: each
  step is opened relative to its parent's fd with ``O_NOFOLLOW``, each file made ``O_EXCL``);
* a gzip bomb, a sparse member, FIFOs and devices, bad ``files`` entries and a deeply nested
  ``EXPORT.json``: one line, exit 2, nothing left;
* an imported RLlib run whose checkpoint is a pickle that writes a marker: ``mosaic enjoy``,
  ``run --from``, ``--config``, ``policy_eval`` / ``resume_training`` into it, a script in it named
  as ``algo`` and a daemon submission are refused naming ``mosaic runs trust``; after ``trust``
  the refusal is gone (and, with the RLlib environment built, the pickle really runs);
* an RLlib checkpoint in a folder uid 65534 can write (or owns) is refused;
* ``runs rm`` of a run directory that is a link: one line, exit 2.
"""

from __future__ import annotations

import base64
import io
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

import pytest

from tests.conftest import run_cli
from tests.trainer.second_user import NOBODY, needs_second_user, run_as_nobody

# The attacker: writes an archive from a JSON spec ({"members": [[name, kind, base64]], "listing":
# {rel: base64} or a raw EXPORT.json text}) into a folder it can write.
FORGE = r"""
import base64, hashlib, io, json, sys, tarfile
spec, out = json.loads(sys.stdin.read()), sys.argv[1]
run_id = spec["run_id"]
with tarfile.open(out, "w:gz") as tar:
    def add(name, kind, data):
        info = tarfile.TarInfo(name)
        if kind == "file":
            info.size = len(data)
        else:
            info.type, data = {"fifo": tarfile.FIFOTYPE, "chr": tarfile.CHRTYPE}[kind], b""
            info.devmajor, info.devminor = (1, 5) if kind == "chr" else (0, 0)
        tar.addfile(info, io.BytesIO(data) if kind == "file" else None)
    listing = spec["listing"]
    if isinstance(listing, dict):
        files = {rel: {"size": len(base64.b64decode(b)), "sha256": hashlib.sha256(base64.b64decode(b)).hexdigest()}
                 for rel, b in listing.items()}
        listing = json.dumps({"format": "mosaic.run-export/1", "run_id": run_id, "files": files})
    add(f"{run_id}/EXPORT.json", "file", listing.encode())
    for name, kind, data in spec["members"]:
        add(name, kind, base64.b64decode(data))
"""


def b64(data: str | bytes) -> str:
    return base64.b64encode(data.encode() if isinstance(data, str) else data).decode()


# A pickle that writes a marker when loaded: what an RLlib checkpoint's class_and_ctor_args.pkl is.
PAYLOAD = (
    "import pickle, sys\n"
    "class Boom:\n"
    "    def __reduce__(self):\n"
    '        return (exec, (f\'open({sys.argv[1]!r}, "w").write("ran")\',))\n'
    "sys.stdout.buffer.write(pickle.dumps(Boom()))"
)


@pytest.fixture
def shared() -> Path:
    """A folder like /tmp: root's, sticky, writable by everyone."""
    path = Path(tempfile.mkdtemp(prefix="mosaic-import-"))
    path.chmod(0o1777)
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def root(tmp_path) -> Path:
    root = tmp_path / "runs"
    root.mkdir(mode=0o700)
    return root


def forge(shared: Path, name: str, run_id: str, members: list, listing) -> Path:
    """The attacker (uid 65534) writes the archive ``name`` in ``shared``: ``members`` are
    ``[name, kind, data]``, ``listing`` ``{rel: data}`` (sizes and digests computed) or raw text."""
    out = shared / name
    spec = {
        "run_id": run_id,
        "members": [[n, k, b64(d)] for n, k, d in members],
        "listing": {rel: b64(d) for rel, d in listing.items()} if isinstance(listing, dict) else listing,
    }
    done = run_as_nobody([sys.executable, "-c", FORGE, str(out)], input=json.dumps(spec))
    assert done.returncode == 0, done.stderr
    assert out.stat().st_uid == NOBODY
    return out


def mosaic(cwd: Path, *args: str, env: dict | None = None):
    return run_cli(list(args), cwd=cwd, env={"MOSAIC_RUNS_DIR": "", **(env or {})}, timeout=120)


def one_line_refusal(result, *words: str) -> str:
    assert result.returncode == 2, (result.stdout, result.stderr)
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "Traceback" not in result.stderr and "internal error" not in lines[0], result.stderr
    for word in words:
        assert word in lines[0], lines[0]
    return lines[0]


@needs_second_user
def test_an_empty_component_naming_a_root_only_file_outside_is_refused_and_the_file_untouched(shared, root, tmp_path):
    secret = tmp_path / "secret"
    secret.write_text("root only\n")
    secret.chmod(0o604)  # a chmod to 0600 by the import would show
    before = (secret.stat().st_mode, secret.read_text())
    cases = {  # the archive, and the same through the listing only
        "empty": (
            [["r1/a", "file", "x"], [f"r1/{secret}", "file", "root only\n"]],
            {"a": "x", str(secret): "root only\n"},
        ),
        "listing only": ([["r1/a", "file", "x"]], {"a": "x", str(secret): "root only\n"}),
        "dot": ([["r1/./a", "file", "x"]], {"a": "x"}),
    }
    for case, (members, listing) in cases.items():
        archive = forge(shared, f"{case.replace(' ', '-')}.tar.gz", "r1", members, listing)
        one_line_refusal(mosaic(tmp_path, "runs", "import", str(archive), "--runs-dir", str(root)), "refused")
        assert (secret.stat().st_mode, secret.read_text()) == before, case
        assert os.listdir(root) == [], case  # nothing unpacked, no staging folder left


def test_a_member_never_lands_through_a_link(root, tmp_path):
    """By construction: were a link planted in the staging folder (only the owner can write
    there: 0700 in a 0700 root), the fd walk refuses it; the link's target is never written."""
    from mosaic_core.errors import UsageError
    from mosaic_core.runstore.unpack import LIMITS, _Unpacker

    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "victim").write_text("keep")
    staging = root / ".import-test"
    staging.mkdir(mode=0o700)
    root_fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
    unpacker = _Unpacker(io.BytesIO(), root, root_fd, os.open(staging, os.O_RDONLY | os.O_DIRECTORY), "test", LIMITS)
    try:
        unpacker._start("r1")
        os.symlink(outside, staging / "r1" / "logs")  # the planted folder link
        os.symlink(outside / "victim", staging / "r1" / "victim")  # the planted file link
        for rel in ("logs/victim", "victim"):
            member = tarfile.TarInfo(f"r1/{rel}")
            member.size = 4
            with pytest.raises((UsageError, OSError)):
                unpacker._write(rel, member, io.BytesIO(b"evil"))
    finally:
        unpacker.close()
        os.close(root_fd)
    assert (outside / "victim").read_text() == "keep" and os.listdir(outside) == ["victim"]


@needs_second_user
def test_caps_special_members_and_bad_listings_are_one_line(shared, root, tmp_path):
    bomb = shared / "bomb.tar.gz"  # 96 MiB of zeros in ~100 KiB
    with tarfile.open(bomb, "w:gz") as tar:
        body = json.dumps({"format": "mosaic.run-export/1", "run_id": "r1", "files": {}}).encode()
        info = tarfile.TarInfo("r1/EXPORT.json")
        info.size = len(body)
        tar.addfile(info, io.BytesIO(body))
        info = tarfile.TarInfo("r1/zeros")
        info.size = 96 << 20
        tar.addfile(info, io.BytesIO(bytes(info.size)))
    sparse_dir = tmp_path / "sparse" / "r1"
    sparse_dir.mkdir(parents=True)
    with open(sparse_dir / "holes", "wb") as handle:
        handle.truncate(1 << 30)
    sparse = shared / "sparse.tar.gz"
    subprocess.run(
        ["tar", "--sparse", "--format=gnu", "-czf", str(sparse), "-C", str(sparse_dir.parent), "r1"], check=True
    )
    deep = "[" * 100_000 + "]" * 100_000
    cases = {
        "bomb": (bomb, "times its compressed size"),
        "sparse": (sparse, "sparse file"),
        "fifo": (forge(shared, "fifo.tar.gz", "r1", [["r1/events.jsonl", "fifo", ""]], {}), "special file"),
        "device": (forge(shared, "dev.tar.gz", "r1", [["r1/zero", "chr", ""]], {}), "special file"),
        "not an object": (
            forge(
                shared,
                "entry.tar.gz",
                "r1",
                [["r1/a", "file", "x"]],
                json.dumps({"format": "mosaic.run-export/1", "run_id": "r1", "files": {"a": 1}}),
            ),
            "instead of an object",
        ),
        "no sha256": (
            forge(
                shared,
                "sha.tar.gz",
                "r1",
                [["r1/a", "file", "x"]],
                json.dumps({"format": "mosaic.run-export/1", "run_id": "r1", "files": {"a": {"size": 1}}}),
            ),
            "without a sha256",
        ),
        "size": (
            forge(
                shared,
                "size.tar.gz",
                "r1",
                [["r1/a", "file", "x"]],
                json.dumps(
                    {"format": "mosaic.run-export/1", "run_id": "r1", "files": {"a": {"size": "1", "sha256": "0" * 64}}}
                ),
            ),
            "not a whole number",
        ),
        "nested": (forge(shared, "deep.tar.gz", "r1", [], deep), "nested too deeply"),
        "reserved": (
            forge(shared, "marker.tar.gz", "r1", [["r1/UNTRUSTED.json", "file", "{}"]], {"UNTRUSTED.json": "{}"}),
            "only the import writes",
        ),
        "twice": (
            forge(shared, "twice.tar.gz", "r1", [["r1/a", "file", "x"], ["r1/a", "file", "x"]], {"a": "x"}),
            "appears twice",
        ),
    }
    for case, (archive, words) in cases.items():
        one_line_refusal(mosaic(tmp_path, "runs", "import", str(archive), "--runs-dir", str(root)), words)
        assert os.listdir(root) == [], case


def _rllib_run(shared: Path, marker: Path) -> Path:
    """An "rllib" run, forged by the attacker: a checkpoint whose pickle writes ``marker``."""
    pickle_bytes = subprocess.run([sys.executable, "-c", PAYLOAD, str(marker)], capture_output=True, check=True).stdout
    config = json.dumps(
        {
            "run_id": "01EVILRUN",
            "worker": "rllib",
            "algo": "PPO",
            "env_id": "CartPole-v1",
            "total_timesteps": 1000,
            "extras": {},
        }
    )
    ckpt = "checkpoints/step_1"
    script = f"open({str(marker)!r}, 'w').write('ran')\n"  # a script its config could name
    files = {
        "config.json": config,
        "evil.py": script,
        f"{ckpt}/algorithm_state.pkl": pickle_bytes,
        f"{ckpt}/rllib_checkpoint.json": json.dumps({"type": "Algorithm", "checkpoint_version": "2.1"}),
        f"{ckpt}/class_and_ctor_args.pkl": pickle_bytes,
        f"{ckpt}/env_runner/class_and_ctor_args.pkl": pickle_bytes,  # what an evaluation loads (no Ray)
    }
    return forge(
        shared, "rllib.tar.gz", "01EVILRUN", [[f"01EVILRUN/{rel}", "file", data] for rel, data in files.items()], files
    )


def _rllib_python(tmp_path: Path) -> str | None:
    """The RLlib environment's interpreter when one is built under $MOSAIC_VENVS (then the payload
    can really run), else None: the gates are checked all the same, before any environment starts."""
    if not os.environ.get("MOSAIC_VENVS"):
        return None
    done = mosaic(tmp_path, "workers", "--json")
    try:
        return next(
            (
                w["environment_status"]["python"]
                for w in json.loads(done.stdout)
                if w["name"] == "rllib" and w["environment_status"]["state"] == "ready"
            ),
            None,
        )
    except (ValueError, KeyError, TypeError):
        return None


@needs_second_user
def test_an_imported_rllib_checkpoint_never_runs_until_trusted(shared, root, tmp_path):
    marker = shared / "pwned"
    archive = _rllib_run(shared, marker)
    done = mosaic(tmp_path, "runs", "import", str(archive), "--runs-dir", str(root))
    assert done.returncode == 0 and "mosaic runs trust 01EVILRUN" in done.stderr, done.stderr
    run_dir = root / "01EVILRUN"
    listed = {r["run_id"]: r for r in json.loads(mosaic(tmp_path, "runs", "--json", "--runs-dir", str(root)).stdout)}
    assert listed["01EVILRUN"]["untrusted"] is True
    assert "(imported, untrusted)" in mosaic(tmp_path, "runs", "--runs-dir", str(root), env={"COLUMNS": "200"}).stdout
    assert "mosaic runs trust 01EVILRUN" in mosaic(tmp_path, "runs", "show", "01EVIL", "--runs-dir", str(root)).stdout

    checkpoint = run_dir / "checkpoints" / "step_1"
    rllib = [
        "run",
        "--worker",
        "rllib",
        "--algo",
        "PPO",
        "--env-id",
        "CartPole-v1",
        "--total-timesteps",
        "100",
        "--runs-dir",
        str(root),
    ]
    attempts = {
        "enjoy": ["enjoy", "01EVIL", "--runs-dir", str(root)],
        "run --from": ["run", "--worker", "rllib", "--from", "01EVILRUN", "--runs-dir", str(root)],
        "--config": ["run", "--worker", "rllib", "--config", str(run_dir / "config.json"), "--runs-dir", str(root)],
        "policy_eval": [*rllib, "--extras", json.dumps({"mode": "policy_eval", "policy_path": str(run_dir)})],
        "resume": [*rllib, "--extras", json.dumps({"mode": "resume_training", "checkpoint_path": str(checkpoint)})],
        "script": [
            "run",
            "--worker",
            "cleanrl",
            "--algo",
            str(run_dir / "evil.py"),
            "--env-id",
            "CartPole-v1",
            "--total-timesteps",
            "100",
            "--runs-dir",
            str(root),
        ],
    }
    for how, argv in attempts.items():
        one_line_refusal(mosaic(tmp_path, *argv), "01EVILRUN", "mosaic runs trust 01EVILRUN")
        assert not marker.exists(), how
    # A daemon's submission, even with every script allowed, is refused the same way.
    from mosaic_core.errors import UsageError
    from mosaic_core.trainer.submission import ScriptPolicy, parse_submission
    from mosaic_core.workers import discover_workers

    submitted = json.dumps(
        {
            "worker": "rllib",
            "algo": "PPO",
            "env_id": "CartPole-v1",
            "total_timesteps": 100,
            "extras": {"mode": "policy_eval", "policy_path": str(checkpoint)},
        }
    )
    with pytest.raises(UsageError, match="mosaic runs trust 01EVILRUN"):
        parse_submission(submitted, "", discover_workers(), 0, runs_dir=root, scripts=ScriptPolicy(allow_any=True))
    assert sorted(os.listdir(root)) == ["01EVILRUN"] or ".mosaic-index.sqlite3" in os.listdir(root)

    trusted = mosaic(tmp_path, "runs", "trust", "01EVIL", "--runs-dir", str(root))
    assert trusted.returncode == 0 and "trusted run 01EVILRUN" in trusted.stderr, trusted.stderr
    assert "untrusted" not in mosaic(tmp_path, "runs", "--runs-dir", str(root), env={"COLUMNS": "200"}).stdout
    again = mosaic(tmp_path, *attempts["policy_eval"], "--run-id", "replay")
    assert "mosaic runs trust" not in again.stderr and "run its code" not in again.stderr, again.stderr
    print(again.stderr)
    if _rllib_python(tmp_path):  # and the only thing that stood between the pickle and the owner
        assert marker.read_text() == "ran"


@needs_second_user
def test_an_rllib_checkpoint_another_user_can_write_is_refused(shared, tmp_path):
    marker = shared / "pwned"
    pickle_bytes = subprocess.run([sys.executable, "-c", PAYLOAD, str(marker)], capture_output=True, check=True).stdout
    theirs = shared / "theirs"  # made by uid 65534
    planted = run_as_nobody([sys.executable, "-c", "import os, sys; os.makedirs(sys.argv[1] + '/step_1')", str(theirs)])
    assert planted.returncode == 0, planted.stderr
    ours = shared / "open" / "step_1"  # ours, in a folder everybody can write (not sticky)
    ours.mkdir(parents=True)
    ours.parent.chmod(0o777)
    loose = tmp_path / "private" / "step_1"  # ours, in a private folder, but writable by everybody itself
    loose.mkdir(parents=True)
    loose.chmod(0o777)
    for folder in (ours, loose):
        (folder / "rllib_checkpoint.json").write_text("{}")
        (folder / "class_and_ctor_args.pkl").write_bytes(pickle_bytes)
    runs = tmp_path / "runs"
    for checkpoint, words in ((theirs / "step_1", "nobody"), (ours, "others can write"), (loose, "others can write")):
        if checkpoint.is_relative_to(theirs):
            written = run_as_nobody(
                [
                    sys.executable,
                    "-c",
                    "import sys; open(sys.argv[1] + '/rllib_checkpoint.json', 'w').write('{}')",
                    str(checkpoint),
                ]
            )
            assert written.returncode == 0, written.stderr
        for mode, key in (("policy_eval", "policy_path"), ("resume_training", "checkpoint_path")):
            result = mosaic(
                tmp_path,
                "run",
                "--worker",
                "rllib",
                "--algo",
                "PPO",
                "--env-id",
                "CartPole-v1",
                "--total-timesteps",
                "100",
                "--runs-dir",
                str(runs),
                "--extras",
                json.dumps({"mode": mode, key: str(checkpoint)}),
            )
            one_line_refusal(result, words, "run its code")
    assert not marker.exists()
    assert not runs.exists() or os.listdir(runs) == []
    python = _rllib_python(tmp_path)
    if python:  # the training program checks again just before it loads one
        direct = subprocess.run(
            [
                python,
                "-m",
                "ray_worker.train",
                "--algo",
                "PPO",
                "--env",
                "CartPole-v1",
                "--total-timesteps",
                "10",
                "--mode",
                "policy_eval",
                "--checkpoint",
                str(loose),
            ],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert direct.returncode == 2 and "others can write" in direct.stderr, direct.stderr[-2000:]
        assert not marker.exists()


@needs_second_user
def test_rm_of_a_run_directory_that_is_a_link_is_one_line(root, tmp_path):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "config.json").write_text("{}")
    (root / "linked").symlink_to(elsewhere)
    one_line_refusal(mosaic(tmp_path, "runs", "rm", "linked", "--yes", "--runs-dir", str(root)), "symbolic link")
    assert (elsewhere / "config.json").exists()


def test_export_leaves_the_marker_out(root, tmp_path):
    """An imported run exported again carries no marker (the next import writes its own)."""
    from mosaic_core.runstore.archive import _members

    run = root / "r1"
    run.mkdir()
    (run / "config.json").write_text("{}")
    (run / "UNTRUSTED.json").write_text("{}")
    keep, skipped = _members(run, True)
    assert keep == ["config.json"] and skipped == ["UNTRUSTED.json"]
