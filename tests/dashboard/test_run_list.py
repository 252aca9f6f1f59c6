"""The dashboard's run list (mosaic_dashboard.rundata.RunsIndex): each run's record kept between
calls and made again only when its row in the runs root's index changed."""

import json
import time

from mosaic_dashboard.rundata import RunsIndex
from tests.core.test_run_index import make_run


def test_records_are_made_again_only_for_the_runs_that_changed(tmp_path):
    root = tmp_path / "runs"
    for run_id in ("a", "b"):
        make_run(root, run_id)
    make_run(root, "live", end=None)
    runs = RunsIndex(root)
    first = {r["run_id"]: r for r in runs.snapshot()}
    assert set(first) == {"a", "b", "live"} and first["a"]["live_frames"] is False
    with open(root / "live" / "events.jsonl", "a") as handle:  # the running run ends
        handle.write(
            json.dumps({"event": "run_completed", "run_id": "live", "seq": 3, "timestamp": time.time()}) + "\n"
        )
    second = {r["run_id"]: r for r in runs.snapshot()}
    assert second["a"] is first["a"] and second["b"] is first["b"]  # unchanged: the same records
    assert second["live"]["status"] == "completed" and first["live"]["status"] == "running"
    assert {r["run_id"]: r for r in RunsIndex(root).snapshot()} == second  # what a fresh lister makes
