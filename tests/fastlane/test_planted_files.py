"""A second user plants links, FIFOs and look-alike segments in /dev/shm: FastLane never follows,
waits on, writes into or deletes them, and says what it refused and why.

The attacker is a real second user (``setpriv --reuid=65534``: nobody); the host and the
readers run as root, the strongest victim (root may open and unlink anything).
"""

import json
import os
import shutil
import signal
import stat
import struct
import subprocess
import sys
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import pytest
from fastlane_helpers import MOSAIC, clean_environ, run_command

from mosaic_fastlane import layout, trust
from mosaic_fastlane.layout import Mode
from mosaic_fastlane.reader import FastLaneReader
from mosaic_fastlane.segment import SegmentOwner, UntrustedSegment, open_segment
from mosaic_fastlane.writer import SlotWriter

NOBODY = 65534
OWNER_PID_OFFSET = 40  # the header's owner_pid (see layout.py)
AS_NOBODY = ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups"]

pytestmark = pytest.mark.skipif(
    os.geteuid() != 0 or shutil.which("setpriv") is None, reason="needs root and setpriv to act as a second user"
)


# ------------------------------------------------------------------------------ the attacker
def as_nobody(*argv: str, data: bytes | None = None) -> None:
    subprocess.run([*AS_NOBODY, *argv], input=data, check=True, timeout=30, capture_output=True)


def plant(kind: str, path: Path, target: Path, segment_bytes: bytes) -> None:
    """``link`` to ``target``, ``fifo``, or ``segment`` (a valid-looking one, mode 0666), as nobody."""
    if kind == "link":
        as_nobody("ln", "-s", str(target), str(path))
    elif kind == "fifo":
        as_nobody("mkfifo", "-m", "666", str(path))
    else:
        as_nobody("sh", "-c", 'umask 0; cat > "$1"', "sh", str(path), data=segment_bytes)
    assert os.lstat(path).st_uid == NOBODY


def look_alike(run_id: str, tmp_path: Path, frame: bool = False) -> bytes:
    """The bytes of a real segment for ``run_id`` whose host (this process) is alive."""
    private = tmp_path / "build"
    private.mkdir(exist_ok=True)
    owner = SegmentOwner(run_id, mode=Mode.SINGLE, slot_count=1, max_dim=16, interval_ms=10, directory=private)
    if frame:
        writer = SlotWriter(open_segment(name=owner.name, directory=private, writable=True), 0, 0)
        writer.publish(np.full((8, 8, 3), 200, np.uint8), global_step=77)
        writer.close()
    data = owner.path.read_bytes()
    owner.remove()
    return data


# ------------------------------------------------------------------------------ the victim
@pytest.fixture
def victim(tmp_path):
    """A root-only file outside /dev/shm that planted links point to; must never change."""
    path = tmp_path / "precious"
    path.write_bytes(b"root's data\n")
    path.chmod(0o600)
    before = path.stat()
    yield path
    after = path.stat()
    assert path.read_bytes() == b"root's data\n"
    assert (after.st_size, after.st_mtime_ns, after.st_ino) == (before.st_size, before.st_mtime_ns, before.st_ino)


@pytest.fixture
def shm_names(request):
    """Unique names in /dev/shm for this test, removed (whoever owns them) when it ends."""
    made = []

    def name(stem: str) -> Path:
        made.append(layout.shm_dir() / f"{stem}-{os.getpid()}-{len(made)}")
        return made[-1]

    yield name
    for path in made:
        for leftover in [path, *path.parent.glob(f".{path.name}.*")]:
            if os.path.lexists(leftover):
                os.unlink(leftover)


@contextmanager
def no_hang(seconds: float = 20):
    """Fail (instead of hanging the suite) when an open blocks, e.g. on a FIFO."""

    def expired(*_):
        raise TimeoutError(f"blocked for {seconds} s")

    previous = signal.signal(signal.SIGALRM, expired)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def unchanged(path: Path, before: os.stat_result, data: bytes | None = None) -> bool:
    now = os.lstat(path)
    same = (now.st_ino, now.st_uid, now.st_mode, now.st_mtime_ns) == (
        before.st_ino,
        before.st_uid,
        before.st_mode,
        before.st_mtime_ns,
    )
    return same and (data is None or path.read_bytes() == data)


# ------------------------------------------------------------------------------ creating
def test_links_planted_at_temporary_names_are_never_followed(victim, shm_names, monkeypatch):
    segment = shm_names("mosaic-fl-tmpattack")
    run_id = segment.name[len(layout.NAME_PREFIX) :]
    guessed = [
        segment.parent / f".{segment.name}.{os.getpid()}.tmp",  # the name older versions used
        segment.parent / f".{segment.name}.{os.getpid()}.{'ab' * 8}.tmp",
    ]
    for path in guessed:
        plant("link", path, victim, b"")
    # Make the first random name collide with the planted one: O_EXCL must refuse it, and the
    # next random name is used instead.
    tokens = iter(["ab" * 8, "cd" * 8])
    monkeypatch.setattr(trust.secrets, "token_hex", lambda _n: next(tokens))
    owner = SegmentOwner(run_id, mode=Mode.SINGLE, slot_count=1, max_dim=16, interval_ms=10)
    try:
        assert all(os.path.islink(path) and os.readlink(path) == str(victim) for path in guessed)
        with FastLaneReader(run_id) as reader:
            assert reader.header.owner_pid == os.getpid()
        assert not (segment.parent / f".{segment.name}.{os.getpid()}.{'cd' * 8}.tmp").exists()
    finally:
        owner.remove()


def test_our_own_odd_leftover_at_the_name_is_replaced(shm_names):
    segment = shm_names("mosaic-fl-ownfifo")
    os.mkfifo(segment, 0o600)
    with no_hang():
        owner = SegmentOwner(
            segment.name[len(layout.NAME_PREFIX) :], mode=Mode.SINGLE, slot_count=1, max_dim=16, interval_ms=10
        )
    try:
        assert "a FIFO" in owner.replaced_stale and stat.S_ISREG(os.lstat(segment).st_mode)
    finally:
        owner.remove()


@pytest.mark.parametrize("kind", ["link", "fifo", "segment"])
def test_another_users_file_at_a_runs_name_disables_fastlane_for_that_run(kind, workdir, tmp_path, victim, shm_names):
    segment = shm_names("mosaic-fl-squat")
    run_id = segment.name[len(layout.NAME_PREFIX) :]
    data = look_alike(run_id, tmp_path)
    plant(kind, segment, victim, data)
    before = os.lstat(segment)
    out = subprocess.run(
        run_command(run_id, {"fastlane": True}, total=300),
        cwd=workdir,
        capture_output=True,
        text=True,
        env=clean_environ(),
        timeout=120,
    )
    events = [json.loads(line) for line in out.stdout.splitlines()]
    assert events[-1]["event"] == "run_completed", out.stderr
    warnings = [line for line in out.stderr.splitlines() if "fastlane" in line.lower()]
    kind_words = {"link": "a symbolic link", "fifo": "a FIFO", "segment": "a regular file"}[kind]
    assert len(warnings) == 1, out.stderr
    assert (
        f"{segment} already exists and is {kind_words} owned by uid 65534 (nobody), not by uid 0 (root)" in warnings[0]
        and "FastLane is disabled" in warnings[0]
    )
    assert unchanged(segment, before, data if kind == "segment" else None)  # not written, not removed
    run_dir = workdir / "var/trainer/runs" / run_id
    assert "fastlane" not in (run_dir / "logs/cleanrl.stderr.log").read_text().lower()
    section = json.loads((run_dir / "manifest.json").read_text())["fastlane"]
    assert section["enabled"] is False and section["frames_published"] == 0


# ------------------------------------------------------------------------------ reading
@pytest.mark.parametrize(
    "kind, why",
    [
        ("link", "is a symbolic link; FastLane never follows links"),
        ("fifo", "is a FIFO, not a regular file"),
        ("segment", "is owned by uid 65534 (nobody), not by uid 0 (root)"),
    ],
)
def test_readers_refuse_links_fifos_and_other_users_files(kind, why, workdir, tmp_path, victim, shm_names):
    segment = shm_names("mosaic-fl-read")
    run_id = segment.name[len(layout.NAME_PREFIX) :]
    plant(kind, segment, victim, look_alike(run_id, tmp_path, frame=True))
    with no_hang(), pytest.raises(UntrustedSegment, match=why.replace("(", r"\(").replace(")", r"\)")):
        FastLaneReader(run_id)
    out = subprocess.run(
        [str(MOSAIC), "fastlane", "snapshot", run_id, "-o", str(tmp_path / "f.png")],
        cwd=workdir,
        capture_output=True,
        text=True,
        env=clean_environ(),
        timeout=60,
    )
    assert out.returncode == 1 and out.stderr.strip().endswith(why) and len(out.stderr.splitlines()) == 1
    assert "Traceback" not in out.stderr and not (tmp_path / "f.png").exists()


def test_another_users_segment_is_read_only_when_asked_for_and_only_if_0600(workdir, tmp_path, shm_names, victim):
    segment = shm_names("mosaic-fl-theirs")
    run_id = segment.name[len(layout.NAME_PREFIX) :]
    as_nobody("sh", "-c", 'umask 077; cat > "$1"', "sh", str(segment), data=look_alike(run_id, tmp_path, frame=True))
    with FastLaneReader(run_id, owner_uid=NOBODY) as reader:
        assert reader.latest().global_step == 77
    (workdir / "f.png").symlink_to(victim)  # a link at -o is refused; the file it points to is untouched
    snapshot = [str(MOSAIC), "fastlane", "snapshot", run_id, "--owner", "nobody", "-o", "f.png"]
    out = subprocess.run(snapshot, cwd=workdir, capture_output=True, text=True, env=clean_environ(), timeout=60)
    assert out.returncode == 2 and "-o f.png is a symbolic link" in out.stderr, out.stderr
    assert (workdir / "f.png").is_symlink()
    (workdir / "f.png").unlink()
    out = subprocess.run(snapshot, cwd=workdir, capture_output=True, text=True, env=clean_environ(), timeout=60)
    assert out.returncode == 0 and json.loads(out.stdout)["global_step"] == 77, out.stderr
    assert not (workdir / "f.png").is_symlink() and (workdir / "f.png").read_bytes()[:4] == b"\x89PNG"
    as_nobody("chmod", "666", str(segment))
    with pytest.raises(UntrustedSegment, match="has mode 0666; FastLane segments are 0600"):
        FastLaneReader(run_id, owner_uid=NOBODY)
    out = subprocess.run(
        [str(MOSAIC), "fastlane", "snapshot", run_id, "--owner", "nosuchuser"],
        cwd=workdir,
        capture_output=True,
        text=True,
        env=clean_environ(),
        timeout=60,
    )
    assert out.returncode == 2 and "--owner: no user called 'nosuchuser'" in out.stderr


def test_a_training_process_maps_only_its_own_hosts_segment(tmp_path):
    owner = SegmentOwner(f"hostcheck-{os.getpid()}", mode=Mode.SINGLE, slot_count=1, max_dim=16, interval_ms=10)
    try:
        with pytest.raises(UntrustedSegment, match=f"created by pid {os.getpid()}, not by this run's host"):
            open_segment(owner.run_id, writable=True, host_pid=os.getpid() + 1)
        open_segment(owner.run_id, writable=True, host_pid=os.getpid()).close()
    finally:
        owner.remove()


# ------------------------------------------------------------------------------ list and clean
def test_list_and_clean_skip_what_is_not_ours_and_hang_on_nothing(tmp_path, victim):
    shm = Path(f"/dev/shm/mosaic-test-{os.getpid()}")  # a private, sticky, world-writable directory
    shm.mkdir(mode=0o1777)
    shm.chmod(0o1777)
    env = clean_environ(**{layout.SHM_DIR_VAR: str(shm)})
    try:
        dead = (
            "import os; from mosaic_fastlane.segment import SegmentOwner; from mosaic_fastlane.layout import Mode; "
            "SegmentOwner('ours', mode=Mode.SINGLE, slot_count=1, max_dim=16, interval_ms=10); os._exit(0)"
        )
        subprocess.run([sys.executable, "-c", dead], env=env, check=True, timeout=60)  # our own host died
        theirs = bytearray(look_alike("theirs", tmp_path))
        struct.pack_into("<I", theirs, OWNER_PID_OFFSET, 999_999_999)  # its host is gone: clean would remove ours
        plant("segment", shm / "mosaic-fl-theirs", victim, bytes(theirs))
        plant("link", shm / "mosaic-fl-link", victim, b"")
        plant("fifo", shm / "mosaic-fl-fifo", victim, b"")
        plant("fifo", shm / ".mosaic-fl-half.999999999.0123456789abcdef.tmp", victim, b"")
        planted = {p.name: os.lstat(p) for p in shm.iterdir() if os.lstat(p).st_uid == NOBODY}
        listed = subprocess.run([str(MOSAIC), "fastlane", "list"], env=env, capture_output=True, text=True, timeout=60)
        rows = {row["segment"]: row for row in map(json.loads, listed.stdout.splitlines())}
        assert rows["mosaic-fl-ours"]["host_alive"] is False
        assert "is a FIFO" in rows["mosaic-fl-fifo"]["skipped"] and "symbolic link" in rows["mosaic-fl-link"]["skipped"]
        assert "owned by uid 65534 (nobody)" in rows["mosaic-fl-theirs"]["skipped"]
        cleaned = subprocess.run(
            [str(MOSAIC), "fastlane", "clean"], env=env, capture_output=True, text=True, timeout=60
        )
        assert json.loads(cleaned.stdout) == {"removed": 1, "skipped": 4}, cleaned.stderr
        assert f"skipped {shm}/.mosaic-fl-half.999999999.0123456789abcdef.tmp: owned by uid 65534" in cleaned.stderr
        assert not (shm / "mosaic-fl-ours").exists()
        assert all(unchanged(shm / name, before) for name, before in planted.items())
    finally:
        shutil.rmtree(shm)


def test_the_recorder_never_writes_through_a_link_in_the_run_directory(tmp_path):
    from mosaic_core.channel import ChannelSender
    from mosaic_core.child import ChildContext, FrameInfo
    from mosaic_fastlane.recorder import record

    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    run_dir = tmp_path / "run"
    (run_dir / "videos").mkdir(parents=True)
    (run_dir / "videos" / "fastlane").symlink_to(elsewhere)
    child = ChildContext(
        run_id="rec", run_dir=str(run_dir), extras={}, channel=ChannelSender(None), env_id="CartPole-v1"
    )
    info = FrameInfo(
        global_step=4, env_index=9, last_reward=0.0, rolling_return=None, step_rate_hz=0.0, episode_count=0
    )
    with pytest.raises(OSError, match="is not a directory"):
        record(child, np.zeros((4, 4, 3), np.uint8), info, every=1)
    assert list(elsewhere.iterdir()) == []
    (run_dir / "videos" / "fastlane").unlink()
    written = record(child, np.zeros((4, 4, 3), np.uint8), info, every=1)
    assert written == run_dir / "videos/fastlane/env9-step000000004.png" and written.read_bytes()[:4] == b"\x89PNG"
