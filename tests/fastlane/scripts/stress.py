"""Torn-read stress: ``stress.py writer NAME FRAMES`` publishes at full speed;
``stress.py reader NAME FRAMES`` says ``ready``, then verifies every frame it sees until
FRAMES were published.

Each frame's CRC-32 travels in ``last_reward`` and its number in ``global_step`` and in its
first pixels, so a reader notices any mix of two frames (pixels or metrics or geometry), and
any frame older than one it already got (``latest()`` must never go back).
"""

import json
import sys
import zlib

import numpy as np

from mosaic_fastlane.reader import FastLaneReader
from mosaic_fastlane.segment import open_segment
from mosaic_fastlane.writer import SlotWriter

SHAPES = [(210, 160, 3), (64, 64, 1), (256, 256, 3), (84, 84, 4), (128, 200, 3), (17, 255, 4)]


def write(name, frames):
    rng = np.random.default_rng(0)
    pool = [rng.integers(0, 256, shape, dtype=np.uint8) for shape in SHAPES]
    writer = SlotWriter(open_segment(name=name, writable=True), 0, 0)
    for number in range(1, frames + 1):
        frame = pool[number % len(pool)]
        frame.reshape(-1)[:8] = np.frombuffer(number.to_bytes(8, "little"), np.uint8)
        writer.publish(
            frame,
            tick=number,
            global_step=number,
            episode_count=frame.shape[2],
            last_reward=float(zlib.crc32(frame.tobytes())),
        )
    writer.close()


def read(name, frames):
    checked = torn_pages = last = 0

    def check(frame):
        pixels = frame.pixels
        number = int.from_bytes(pixels.reshape(-1)[:8].tobytes(), "little")
        bad = (
            zlib.crc32(pixels.tobytes()) != frame.last_reward
            or number != frame.global_step
            or number != frame.frame_number
            or pixels.shape != SHAPES[number % len(SHAPES)]
            or frame.episode_count != pixels.shape[2]
        )
        if bad:
            print(json.dumps({"torn": number, "step": frame.global_step}))
            sys.exit(1)
        if frame.global_step < last:
            print(json.dumps({"went_back": frame.global_step, "after": last}))
            sys.exit(1)

    with FastLaneReader(name=name) as reader:
        print("ready", flush=True)
        while reader.frames_published() < frames:
            published = reader.frames_published()
            if published and reader.read_page(0, (published - 1) % 2) is None:
                torn_pages += 1  # the seqlock caught a page being rewritten
            frame = reader.latest()
            if frame is None:
                continue
            check(frame)
            checked += frame.global_step > last
            last = frame.global_step
        final = reader.latest()  # the writer is done: its last frame, whole
        check(final)
        last = final.global_step
    print(json.dumps({"checked": checked, "torn_pages_detected": torn_pages, "last": last}))


if __name__ == "__main__":
    role, segment, count = sys.argv[1], sys.argv[2], int(sys.argv[3])
    write(segment, count) if role == "writer" else read(segment, count)
