"""A reader in its own process: ``read_frames.py RUN_ID COUNT`` waits for COUNT new frames
of a running run and prints their metrics as one JSON list."""

import json
import sys
import time

from mosaic_fastlane import FastLaneReader
from mosaic_fastlane.segment import SegmentMissing

run_id, count = sys.argv[1], int(sys.argv[2])
deadline = time.monotonic() + 60
while True:
    try:
        reader = FastLaneReader(run_id)
        break
    except SegmentMissing:
        if time.monotonic() > deadline:
            sys.exit(f"no segment for {run_id}")
        time.sleep(0.05)
seen, last = [], 0
with reader:
    while len(seen) < count:
        frame = reader.wait(after=last, timeout=60)
        if frame is None:
            break
        last = frame.frame_number
        seen.append({**frame.metrics(), "mean_pixel": float(frame.pixels.mean())})
print(json.dumps(seen))
