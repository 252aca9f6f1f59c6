"""The segment: header checks, one writer per slot, stale segments, readers never unlink."""

import os
import struct
import subprocess
import sys

import numpy as np
import pytest

from mosaic_fastlane import layout
from mosaic_fastlane.layout import Mode, PixelFormat
from mosaic_fastlane.reader import FastLaneReader
from mosaic_fastlane.segment import FastLaneError, SegmentOwner, SharedMemoryUnavailable, open_segment
from mosaic_fastlane.writer import SlotWriter


@pytest.fixture
def owner(request):
    made = []

    def make(run_id=None, mode=Mode.SINGLE, slots=1, max_dim=32):
        run_id = run_id or f"t{os.getpid()}-{request.node.name[:40]}".replace("[", "-").replace("]", "")
        made.append(SegmentOwner(run_id, mode=mode, slot_count=slots, max_dim=max_dim, interval_ms=10))
        return made[-1]

    yield make
    for item in made:
        item.remove()


def writer(owner, slot=0, env_index=0):
    return SlotWriter(open_segment(name=owner.name, writable=True), slot, env_index)


def test_frames_and_metrics_round_trip_in_every_pixel_format(owner):
    seg = owner()
    w = writer(seg)
    with FastLaneReader(name=seg.name) as reader:
        assert reader.latest() is None and reader.frames_published() == 0
        for channels in (1, 3, 4):
            pixels = np.random.default_rng(channels).integers(0, 255, (7, 9, channels), dtype=np.uint8)
            w.publish(
                pixels,
                tick=channels,
                global_step=40 * channels,
                episode_count=2,
                last_reward=1.5,
                rolling_return=None if channels == 1 else 21.0,
                step_rate_hz=99.5,
            )
            frame = reader.latest()
            assert np.array_equal(frame.pixels, pixels)
            assert frame.pixel_format is PixelFormat(channels)
            assert (frame.tick, frame.global_step, frame.episode_count) == (channels, 40 * channels, 2)
            assert frame.last_reward == 1.5 and frame.step_rate_hz == 99.5
            assert frame.rolling_return == (None if channels == 1 else 21.0)
        assert [PixelFormat(c).name for c in (1, 3, 4)] == ["GRAY", "RGB", "RGBA"]
        assert reader.frames_published() == 3
    w.close()


def test_a_frame_larger_than_a_page_is_refused(owner):
    w = writer(owner(max_dim=8))
    with pytest.raises(ValueError, match="does not fit"):
        w.publish(np.zeros((20, 20, 3), np.uint8))
    w.close()


@pytest.mark.parametrize(
    "patch, message",
    [
        ((0, b"NOTMINE!"), "not a FastLane segment"),
        ((8, struct.pack("<I", 99)), "layout version 99"),
        ((16, struct.pack("<I", 500)), "inconsistent geometry"),
        ((20, struct.pack("<I", 7)), "unknown mode 7"),
    ],
)
def test_readers_check_magic_version_mode_and_geometry(owner, patch, message):
    seg = owner()
    offset, data = patch
    with open(seg.path, "r+b") as handle:
        handle.seek(offset)
        handle.write(data)
    with pytest.raises(FastLaneError, match=message):
        FastLaneReader(name=seg.name)


def test_a_truncated_or_missing_segment_is_a_clear_error(tmp_path):
    (tmp_path / "mosaic-fl-short").write_bytes(b"MOSAICFL")
    os.chmod(tmp_path / "mosaic-fl-short", 0o600)
    with pytest.raises(FastLaneError, match="too small"):
        FastLaneReader(name="mosaic-fl-short", directory=tmp_path)
    with pytest.raises(FastLaneError, match="no FastLane segment mosaic-fl-absent"):
        FastLaneReader("absent", directory=tmp_path)


def test_a_second_writer_is_refused_in_this_and_another_process(owner):
    seg = owner()
    first = writer(seg)
    with pytest.raises(FastLaneError, match=f"already has a writer \\(pid {os.getpid()}\\)"):
        writer(seg)
    code = (
        "from mosaic_fastlane.segment import open_segment; from mosaic_fastlane.writer import SlotWriter; "
        f"SlotWriter(open_segment(name={seg.name!r}, writable=True), 0, 0)"
    )
    other = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert other.returncode != 0 and "one writer per slot" in other.stderr
    first.close()
    writer(seg).close()  # released: the slot can be claimed again


def test_the_slot_of_a_dead_writer_is_taken_over(owner):
    seg = owner()
    code = (
        "import numpy as np, os; from mosaic_fastlane.segment import open_segment; "
        "from mosaic_fastlane.writer import SlotWriter; "
        f"w = SlotWriter(open_segment(name={seg.name!r}, writable=True), 0, 0); "
        "w.publish(np.ones((4, 4, 3), np.uint8), tick=5); os._exit(0)"
    )  # dies holding the slot
    subprocess.run([sys.executable, "-c", code], check=True)
    with FastLaneReader(name=seg.name) as reader:
        state = reader.slots()[0]
        assert state.writer_pid and not state.writer_alive and state.published == 1
        w = writer(seg)
        w.publish(np.full((4, 4, 3), 2, np.uint8), tick=6)
        frame = reader.latest()
        assert frame.tick == 6 and frame.frame_number == 2 and (frame.pixels == 2).all()
    w.close()


def test_a_stale_segment_from_a_dead_host_is_replaced(owner):
    run_id = f"stale-{os.getpid()}"
    code = (
        "import os; from mosaic_fastlane.segment import SegmentOwner; from mosaic_fastlane.layout import Mode; "
        f"SegmentOwner({run_id!r}, mode=Mode.SINGLE, slot_count=1, max_dim=16, interval_ms=10); os._exit(0)"
    )
    subprocess.run([sys.executable, "-c", code], check=True)  # a host that died without cleaning up
    with FastLaneReader(run_id) as reader:
        assert not reader.header.owner_alive and reader.ended()
    seg = owner(run_id)
    assert seg.replaced_stale and "is gone" in seg.replaced_stale
    with FastLaneReader(run_id) as reader:
        assert reader.header.owner_pid == os.getpid() and not reader.ended()


def test_our_own_leftover_with_the_name_is_replaced_but_a_live_run_is_not(owner):
    run_id = f"busy-{os.getpid()}"
    (layout.shm_dir() / layout.segment_name(run_id)).write_bytes(b"junk")
    seg = owner(run_id)
    assert "mode 0644" in seg.replaced_stale
    with pytest.raises(SharedMemoryUnavailable, match="belongs to a live run"):
        SegmentOwner(run_id, mode=Mode.SINGLE, slot_count=1, max_dim=16, interval_ms=10)
    assert seg.path.exists()


def test_readers_never_unlink_even_when_their_process_exits(owner):
    seg = owner()
    code = (
        f"from mosaic_fastlane.reader import FastLaneReader; r = FastLaneReader(name={seg.name!r}); "
        "r.latest(); r.close()"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
    subprocess.run([sys.executable, "-c", code.replace("r.close()", "import os; os._exit(0)")], check=True)
    assert seg.path.exists()
    assert seg.remove() and not seg.path.exists() and not seg.remove()


def test_the_owner_removes_only_its_own_segment(owner):
    seg = owner()
    os.unlink(seg.path)
    replacement = owner(seg.run_id)  # e.g. a new run with the same id
    assert not seg.remove() and replacement.path.exists()


def test_segment_names_fit_the_limit_and_creation_failures_are_typed(tmp_path):
    assert layout.segment_name("a" * 128) == "mosaic-fl-" + "a" * 128
    with pytest.raises(ValueError):
        layout.segment_name("a" * 250)
    with pytest.raises(SharedMemoryUnavailable, match="does not exist"):
        SegmentOwner("x", mode=Mode.SINGLE, slot_count=1, max_dim=16, interval_ms=10, directory=tmp_path / "nope")
    with pytest.raises(SharedMemoryUnavailable, match="too long"):
        SegmentOwner("a" * 250, mode=Mode.SINGLE, slot_count=1, max_dim=16, interval_ms=10, directory=tmp_path)


def test_no_space_is_reported_and_leaves_nothing(tmp_path):
    code = (
        "import resource; resource.setrlimit(resource.RLIMIT_FSIZE, (4096, 4096)); "
        "from mosaic_fastlane.segment import SegmentOwner, SharedMemoryUnavailable; "
        "from mosaic_fastlane.layout import Mode\n"
        "try:\n SegmentOwner('nospace', mode=Mode.SINGLE, slot_count=1, max_dim=64, interval_ms=10)\n"
        "except SharedMemoryUnavailable as exc:\n print(exc)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env={**os.environ, layout.SHM_DIR_VAR: str(tmp_path)},
    )
    assert "cannot reserve" in out.stdout and "File too large" in out.stdout
    assert list(tmp_path.iterdir()) == []


def test_process_liveness_sees_zombies_and_pid_reuse():
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    start = layout.process_start(child.pid)
    assert start > 0
    child_status = os.waitid(os.P_PID, child.pid, os.WEXITED | os.WNOWAIT)  # exited, not reaped: a zombie
    assert child_status is not None and not layout.process_alive(child.pid, start)
    child.wait()
    assert not layout.process_alive(child.pid)
    me = os.getpid()
    assert layout.process_alive(me, layout.process_start(me)) and not layout.process_alive(me, 1)
