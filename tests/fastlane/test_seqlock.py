"""The sequence lock, checked deterministically: no threads, no timing, no luck.

The writer's stores and the reader's loads are generators with one memory access per step
(``SlotWriter.publish_steps``, ``FastLaneReader.read_page_steps``). The tests stop each side
between any two accesses and run the other there, over every interleaving of a read with a
writer lapping the page being read. A writer in the wrong order (pixels before the page is
marked busy, or the page settled before its metrics) is caught, as the mutants below show.
"""

import itertools
import math
import os
import shutil
import tempfile
from pathlib import Path

import numpy as np
import pytest

from mosaic_fastlane import layout
from mosaic_fastlane.layout import PAGE_HEADER, PAGE_SEQ, Mode, PixelFormat
from mosaic_fastlane.reader import FastLaneReader
from mosaic_fastlane.segment import FastLaneError, SegmentOwner, open_segment
from mosaic_fastlane.writer import SlotWriter

SHAPES = [(4, 6, 3), (8, 8, 1), (5, 3, 4), (7, 2, 3)]


def frame_for(number: int) -> np.ndarray:
    """Frame ``number``: its own shape and a fill value, so any mix of two frames shows."""
    return np.full(SHAPES[number % len(SHAPES)], number * 37 % 251 + 1, np.uint8)


def metrics_for(number: int) -> dict:
    return {"tick": number, "global_step": number, "episode_count": number % 7, "last_reward": number * 1.5}


def whole(frame) -> bool:
    """Whether every part of a frame a reader returned comes from one published frame."""
    number = frame.global_step
    return (
        frame.pixels.shape == SHAPES[number % len(SHAPES)]
        and bool((frame.pixels == frame_for(number)).all())
        and frame.tick == number
        and frame.last_reward == number * 1.5
        and frame.episode_count == number % 7
        and frame.frame_number == number
    )


class PixelsBeforeBusy(SlotWriter):
    """Mutant: copies the pixels, then marks the page busy (the bug the seqlock test must catch)."""

    def publish_steps(self, frame, **metrics):
        page = self.published % layout.PAGES_PER_SLOT
        offset, writing, number = self._page_offsets[page], self._seqs[page] + 1, self.published + 1
        np.copyto(self._pixels[page][: frame.size].reshape(frame.shape), frame)
        yield "pixels"
        PAGE_SEQ.pack_into(self.mapping.buf, offset, writing)
        yield "busy"
        yield from _finish(self, frame, page, offset, writing, number, metrics)


class SettledBeforeMetrics(SlotWriter):
    """Mutant: marks the page busy, copies pixels, settles it, and only then writes its metrics."""

    def publish_steps(self, frame, **metrics):
        page = self.published % layout.PAGES_PER_SLOT
        offset, writing, number = self._page_offsets[page], self._seqs[page] + 1, self.published + 1
        PAGE_SEQ.pack_into(self.mapping.buf, offset, writing)
        yield "busy"
        np.copyto(self._pixels[page][: frame.size].reshape(frame.shape), frame)
        yield "pixels"
        PAGE_SEQ.pack_into(self.mapping.buf, offset, writing + 1)
        yield "settled"
        _header(self, frame, offset, writing + 1, number, metrics)
        yield "metrics"
        self._seqs[page] = writing + 1
        self.published = number
        layout.PAGE_SEQ.pack_into(self.mapping.buf, self._slot_offset + layout.SLOT_PUBLISHED_OFFSET, number)
        yield "announced"


def _header(writer, frame, offset, seq, number, metrics):
    height, width, channels = frame.shape
    PAGE_HEADER.pack_into(
        writer.mapping.buf,
        offset,
        seq,
        metrics["tick"],
        metrics["global_step"],
        metrics["episode_count"],
        height,
        width,
        channels,
        int(PixelFormat(channels)),
        metrics["last_reward"],
        math.nan,
        0.0,
        0.0,
        writer.env_index,
        number,
    )


def _finish(writer, frame, page, offset, writing, number, metrics):
    _header(writer, frame, offset, writing, number, metrics)
    yield "metrics"
    PAGE_SEQ.pack_into(writer.mapping.buf, offset, writing + 1)
    writer._seqs[page] = writing + 1
    yield "settled"
    writer.published = number
    layout.PAGE_SEQ.pack_into(writer.mapping.buf, writer._slot_offset + layout.SLOT_PUBLISHED_OFFSET, number)
    yield "announced"


@pytest.fixture
def segment():
    """A fresh single-slot segment in a private directory, for each writer kind."""
    owners = []
    tmp_path = Path(tempfile.mkdtemp(prefix="mosaic-seqlock-", dir=layout.shm_dir()))  # tmpfs: fast to unlink

    def make(writer_class=SlotWriter):
        owner = SegmentOwner(
            f"seqlock-{os.getpid()}-{len(owners)}",
            mode=Mode.SINGLE,
            slot_count=1,
            max_dim=8,
            interval_ms=1,
            directory=tmp_path,
        )
        owners.append(owner)
        writer = writer_class(open_segment(name=owner.name, directory=tmp_path, writable=True), 0, 0)
        return writer, FastLaneReader(name=owner.name, directory=tmp_path)

    yield make
    shutil.rmtree(tmp_path)


def steps_of(writer, number):
    return writer.publish_steps(frame_for(number), **metrics_for(number))


def torn_reads_between_writer_steps(make, frames=6):
    """Publish ``frames`` frames one store at a time; after every store, read both pages and
    ``latest()`` with a fresh reader and with a long-lived one. Returns what went wrong."""
    writer, reader = make()
    problems = []
    for number in range(1, frames + 1):
        for step in steps_of(writer, number):
            fresh = FastLaneReader(name=reader.name, directory=writer.mapping.path.parent)
            try:
                seen = [fresh.read_page(0, page) for page in range(layout.PAGES_PER_SLOT)]
                seen += [fresh.latest(), reader.latest()]
            except FastLaneError as exc:  # a settled page with a garbage header
                problems.append((number, step, str(exc)))
                continue
            finally:
                fresh.close()
            problems += [(number, step, f.global_step) for f in seen if f is not None and not whole(f)]
            newest = reader.latest()
            if step == "announced" and (newest is None or newest.frame_number != number):
                problems.append((number, step, "latest() is not the frame just announced"))
    return problems


def torn_reads_over_every_interleaving(make):
    """A reader copies page 0 (frame 1) while the writer publishes frames 2 and 3 (frame 3
    overwrites page 0): every way to interleave the reader's loads with the writer's stores."""
    problems, runs = [], 0
    writer_steps = 2 * 5
    reader_actions = 4  # three loads, then the check that ends the read
    for positions in itertools.combinations(range(writer_steps + reader_actions), reader_actions):
        writer, reader = make()
        writer.publish(frame_for(1), **metrics_for(1))
        writes = itertools.chain(steps_of(writer, 2), steps_of(writer, 3))
        read = reader.read_page_steps(0, 0)
        result = None
        for turn in range(writer_steps + reader_actions):
            if turn in positions:
                try:
                    next(read)
                except StopIteration as done:
                    result = done.value
                except FastLaneError as exc:
                    problems.append((positions, str(exc)))
            else:
                next(writes)
        runs += 1
        if result is not None and not whole(result):
            problems.append((positions, result.global_step))
        reader.close()
        writer.close()
    return problems, runs


def test_the_writer_makes_one_store_per_step_in_the_documented_order(segment):
    writer, reader = segment()
    mapping = writer.mapping
    page_offset = layout.page_offset(0, 0, reader.header.slot_size, reader.header.page_capacity)
    regions = {
        "busy": (page_offset, page_offset + 8),
        "settled": (page_offset, page_offset + 8),
        "metrics": (page_offset + 8, page_offset + PAGE_HEADER.size),
        "pixels": (page_offset + layout.PAGE_HEADER_SIZE, page_offset + layout.page_size(reader.header.page_capacity)),
        "announced": (
            layout.slot_offset(0, reader.header.slot_size) + layout.SLOT_PUBLISHED_OFFSET,
            layout.slot_offset(0, reader.header.slot_size) + layout.SLOT_PUBLISHED_OFFSET + 8,
        ),
    }
    before = bytes(mapping.buf)
    order = []
    for step in steps_of(writer, 1):
        now = bytes(mapping.buf)
        changed = [i for i in range(len(now)) if now[i] != before[i]]
        low, high = regions[step]
        assert changed and low <= changed[0] and changed[-1] < high, (step, changed[:4], changed[-4:])
        order.append(step)
        before = now
    assert order == ["busy", "pixels", "metrics", "settled", "announced"]


def test_a_reader_injected_between_any_two_writer_stores_never_gets_a_torn_frame(segment):
    assert torn_reads_between_writer_steps(segment) == []


def test_every_interleaving_of_a_read_with_a_lapping_writer_is_whole_or_refused(segment):
    problems, runs = torn_reads_over_every_interleaving(segment)
    assert runs == 1001 and problems == []


@pytest.mark.parametrize("mutant", [PixelsBeforeBusy, SettledBeforeMetrics])
def test_a_writer_in_the_wrong_order_is_caught(segment, mutant):
    assert torn_reads_between_writer_steps(lambda: segment(mutant)) != []
    problems, _runs = torn_reads_over_every_interleaving(lambda: segment(mutant))
    assert problems != []


def test_latest_never_goes_back_when_announcing_lags_a_settled_page(segment):
    """The race behind a flaky stress run: a page is settled before ``published`` says so."""
    writer, reader = segment()
    writer.publish(frame_for(1), **metrics_for(1))
    steps = steps_of(writer, 2)
    for step in steps:
        if step == "settled":
            break
    newest = reader.latest()
    assert newest.frame_number == 2  # settled, not yet announced: already the newest
    assert reader.read_page(0, 0).frame_number == 1  # what a reader trusting ``published`` would return
    assert reader.latest() is newest  # never frame 1 again
    next(steps)
    assert reader.latest() is newest and writer.published == 2


def test_a_grid_reader_never_goes_back_to_an_older_tick(tmp_path):
    owner = SegmentOwner(
        f"gridback-{os.getpid()}", mode=Mode.GRID, slot_count=2, max_dim=8, interval_ms=1, directory=tmp_path
    )
    try:
        tiles = [
            SlotWriter(open_segment(name=owner.name, directory=tmp_path, writable=True), slot, slot)
            for slot in range(2)
        ]
        with FastLaneReader(name=owner.name, directory=tmp_path) as reader:
            for tick in (3, 5):
                tiles[0].publish(frame_for(tick), **metrics_for(tick))
            newest = reader.latest()
            assert newest.tick == 5
            tiles[1].publish(frame_for(3), **metrics_for(3))  # tick 3 now has every tile, tick 5 only one
            assert [t.tick for t in reader.tiles()] == [3, 3]
            assert reader.latest() is newest
            tiles[1].publish(frame_for(5), **metrics_for(5))
            assert reader.latest().tick == 5 and reader.latest().pixels.shape[1] > newest.pixels.shape[1]
        for writer in tiles:
            writer.close()
    finally:
        owner.remove()
