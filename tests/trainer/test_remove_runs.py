"""`mosaic runs rm`/`gc` of a daemon's runs: through RemoveRun (client token) while the daemon
serves the state dir, under its lock when none does; a running run is never removed."""

from __future__ import annotations

import pytest

from mosaic_core.errors import MosaicError
from mosaic_core.trainer import client
from mosaic_core.trainer import trainer_pb2 as pb
from mosaic_core.trainer.store import RunStore
from tests.conftest import run_cli

from .conftest import fake_config, record, wait_final, wait_for


def rm(state, *args):
    return run_cli(
        ["runs", "rm", *args, "--runs-dir", str(state / "runs")],
        cwd=state.parent,
        env={"MOSAIC_RUNS_DIR": "", "MOSAIC_TOKEN": ""},
    )


def test_removing_a_daemons_runs(start_daemon, state_dir):
    daemon = start_daemon()
    done = [client.submit(daemon.address, fake_config({"duration": 0.1})).run_id for _ in range(2)]
    for run_id in done:
        wait_final(daemon.address, run_id)
    live = client.submit(daemon.address, fake_config({"duration": 300})).run_id
    wait_for(lambda: record(daemon.address, live).status == pb.RUN_STATUS_EXEC, what="run_started")

    result = rm(state_dir, live, "--yes")
    assert result.returncode == 2 and "not ended: refusing to remove" in result.stderr, result.stderr
    assert (state_dir / "runs" / live).is_dir()
    with pytest.raises(MosaicError, match="FAILED_PRECONDITION: run .* has not ended"):
        client.remove_run(daemon.address, live)
    with pytest.raises(MosaicError, match="UNAUTHENTICATED"):
        client.remove_run(daemon.address, done[0], token="not-the-token")

    result = rm(state_dir, done[0], "--yes")  # through the daemon
    assert result.returncode == 0, result.stderr
    assert record(daemon.address, done[0]) is None and not (state_dir / "runs" / done[0]).exists()
    assert not (state_dir / "configs" / f"{done[0]}.json").exists()
    assert not (state_dir / "logs" / f"{done[0]}.stderr.log").exists()

    client.cancel(daemon.address, live)
    daemon.stop()
    result = rm(state_dir, done[1], "--yes")  # no daemon: under the state dir's lock
    assert result.returncode == 0, result.stderr
    store = RunStore(state_dir / "trainer.sqlite3")
    assert store.get(done[1]) is None and store.get(live).final
    store.close()
    assert not (state_dir / "runs" / done[1]).exists()
    again = start_daemon()
    assert {r.run_id for r in client.list_runs(again.address)} == {live}
