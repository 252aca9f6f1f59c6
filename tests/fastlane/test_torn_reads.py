"""Writer at full speed in one process, readers verifying every frame in others, under CPU load.

Busy-looping processes (one per core) keep every process of the test being preempted at
random points, which is when a broken sequence lock would hand a reader a torn frame or
``latest()`` an older one. Nothing here depends on timing: readers say they are ready before
the writer starts, and each stops after the writer's last frame, having checked every
distinct frame it saw (pixels, metrics and geometry of one frame, never older than the last).
"""

import json
import os
import signal
import subprocess
import sys

import pytest
from fastlane_helpers import SCRIPTS

from mosaic_fastlane.layout import Mode
from mosaic_fastlane.segment import SegmentOwner

pytestmark = pytest.mark.slow  # trains (or stresses) for more than a few seconds
FRAMES = 20000
READERS = 2
LOAD = 1  # busy-looping processes: enough to preempt the others at random points, not to starve them
BUSY_LOOP = "while True: pass"


def test_readers_never_see_a_torn_or_older_frame_under_cpu_load():
    owner = SegmentOwner(f"stress-{os.getpid()}", mode=Mode.SINGLE, slot_count=1, max_dim=256, interval_ms=1)
    script = str(SCRIPTS / "stress.py")
    load = [subprocess.Popen([sys.executable, "-c", BUSY_LOOP]) for _ in range(LOAD)]
    readers = []
    try:
        readers = [
            subprocess.Popen(
                [sys.executable, script, "reader", owner.name, str(FRAMES)], stdout=subprocess.PIPE, text=True
            )
            for _ in range(READERS)
        ]
        for reader in readers:
            assert reader.stdout.readline().strip() == "ready"
        writer = subprocess.run([sys.executable, script, "writer", owner.name, str(FRAMES)], timeout=300)
        assert writer.returncode == 0
        reports = []
        for reader in readers:
            out, _ = reader.communicate(timeout=120)
            assert reader.returncode == 0, out
            reports.append(json.loads(out.splitlines()[-1]))
        print("torn-read stress under load:", reports)
        assert all(r["checked"] > 0 and r["last"] == FRAMES for r in reports)
    finally:
        for proc in load + [r for r in readers if r.poll() is None]:
            proc.send_signal(signal.SIGKILL)
            proc.wait()
        owner.remove()
