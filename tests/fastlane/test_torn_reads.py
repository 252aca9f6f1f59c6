"""Writer at full speed in one process, readers verifying a checksum of every frame in others."""

import json
import os
import subprocess
import sys

from fastlane_helpers import SCRIPTS
from mosaic_fastlane.layout import Mode
from mosaic_fastlane.segment import SegmentOwner

FRAMES = 4000


def test_readers_never_see_a_torn_frame():
    owner = SegmentOwner(f"stress-{os.getpid()}", mode=Mode.SINGLE, slot_count=1, max_dim=256, interval_ms=1)
    try:
        script = str(SCRIPTS / "stress.py")
        readers = [subprocess.Popen([sys.executable, script, "reader", owner.name, str(FRAMES)],
                                    stdout=subprocess.PIPE, text=True) for _ in range(2)]
        writer = subprocess.run([sys.executable, script, "writer", owner.name, str(FRAMES)], timeout=120)
        assert writer.returncode == 0
        reports = []
        for reader in readers:
            out, _ = reader.communicate(timeout=60)
            assert reader.returncode == 0, out
            reports.append(json.loads(out.splitlines()[-1]))
        print("torn-read stress:", reports)
        assert all(r["checked"] > 0 for r in reports)
    finally:
        owner.remove()
