"""The run index (mosaic_core.runstore.index): the same answers as reading every run directory,
kept up to date as runs start, change, end, vanish and arrive (an ended run's row sealed: what
changes it records it, a change by hand is seen with ``recheck``); rebuilt when damaged; never in
the way when it cannot be written."""

from __future__ import annotations

import json
import os
import sqlite3
import time

import pytest

from mosaic_core.jsontext import dumps_rows
from mosaic_core.runstore.index import INDEX_NAME, RunIndex, list_runs, list_runs_json, record_run
from mosaic_core.runstore.summary import summarize


def make_run(
    root,
    run_id,
    *,
    end: str | None = "run_completed",
    step: int = 100,
    experiment: str | None = None,
    started: float | None = None,
):
    run = root / run_id
    run.mkdir(parents=True)
    extras = {"experiment_name": experiment} if experiment else {}
    (run / "config.json").write_text(
        json.dumps(
            {
                "run_id": run_id,
                "worker": "cleanrl",
                "algo": "ppo",
                "env_id": "CartPole-v1",
                "total_timesteps": 1000,
                "extras": extras,
            }
        )
    )
    t = started or time.time()
    events = [
        {"event": "run_started", "run_id": run_id, "seq": 1, "timestamp": t, "payload": {}},
        {
            "event": "metrics",
            "run_id": run_id,
            "seq": 2,
            "timestamp": t + 1,
            "payload": {"global_step": step, "episodic_return": 1.5},
        },
    ]
    if end:
        events.append({"event": end, "run_id": run_id, "seq": 3, "timestamp": t + 2, "payload": {"error": "boom"}})
    (run / "events.jsonl").write_text("".join(json.dumps(e) + "\n" for e in events))
    return run


def fresh(root):
    return sorted(
        (
            summarize(p).to_dict()
            for p in root.iterdir()
            if p.is_dir()
            and not p.name.startswith(".")
            and ((p / "config.json").exists() or (p / "events.jsonl").exists())
        ),
        key=lambda s: s["run_id"],
    )


def listed(root, recheck=False):
    return sorted((s.to_dict() for s in list_runs(root, recheck)), key=lambda s: s["run_id"])


def test_the_index_answers_as_the_directories_do_and_follows_their_changes(tmp_path):
    root = tmp_path / "runs"
    for i in range(5):
        make_run(root, f"r{i}", end="run_failed" if i == 3 else "run_completed", started=time.time() - 100 + i)
    make_run(root, "live", end=None)
    (root / "not-a-run").mkdir()
    assert listed(root) == fresh(root)
    assert [s.run_id for s in list_runs(root)][:2] == ["live", "r4"]  # newest first
    assert oct((root / INDEX_NAME).stat().st_mode & 0o777) == "0o600"
    rows = sqlite3.connect(root / INDEX_NAME).execute("SELECT run_id, status FROM runs ORDER BY run_id").fetchall()
    assert dict(rows) == {
        "live": "running",
        "r0": "completed",
        "r1": "completed",
        "r2": "completed",
        "r3": "failed",
        "r4": "completed",
    }

    with open(root / "live" / "events.jsonl", "a") as handle:  # the running run ends
        handle.write(
            json.dumps(
                {
                    "event": "run_cancelled",
                    "run_id": "live",
                    "seq": 3,
                    "timestamp": time.time(),
                    "payload": {"reason": "stop"},
                }
            )
            + "\n"
        )
    import shutil

    shutil.rmtree(root / "r0")  # one is removed, one arrives, one's manifest is rewritten
    make_run(root, "new", step=7)
    time.sleep(0.01)
    (root / "r1" / "manifest.json.tmp").write_text(json.dumps({"schema": "x", "status": "completed"}))
    os.replace(root / "r1" / "manifest.json.tmp", root / "r1" / "manifest.json")  # by hand: r1 had ended
    by_id = {s.run_id: s for s in list_runs(root)}
    assert by_id["live"].status == "cancelled" and "r0" not in by_id and by_id["new"].global_step == 7
    assert by_id["r1"].manifest_schema is None  # its row is sealed: a listing does not stat it
    assert listed(root, recheck=True) == fresh(root)  # --recheck sees what was changed by hand
    assert listed(root) == fresh(root) and {s.run_id: s for s in list_runs(root)}["r1"].manifest_schema == "x"


def test_a_damaged_or_foreign_index_is_rebuilt(tmp_path):
    root = tmp_path / "runs"
    make_run(root, "a")
    (root / INDEX_NAME).write_bytes(b"not a database" * 100)
    assert [s.run_id for s in list_runs(root)] == ["a"]
    assert sqlite3.connect(root / INDEX_NAME).execute("SELECT COUNT(*) FROM runs").fetchone()[0] == 1
    db = sqlite3.connect(root / INDEX_NAME)
    db.execute("PRAGMA user_version = 99")  # another schema
    db.commit()
    db.close()
    assert [s.run_id for s in list_runs(root)] == ["a"]


def test_an_index_that_cannot_be_used_costs_only_speed(tmp_path):
    root = tmp_path / "runs"
    make_run(root, "a")
    elsewhere = tmp_path / "elsewhere.sqlite3"
    (root / INDEX_NAME).symlink_to(elsewhere)  # never followed
    assert listed(root) == fresh(root)
    assert not elsewhere.exists()
    (root / INDEX_NAME).unlink()
    (root / INDEX_NAME).mkdir()  # not even a file
    assert listed(root) == fresh(root)


def test_runs_are_recorded_as_they_start_and_end_and_found_by_experiment(tmp_path):
    root = tmp_path / "runs"
    run = make_run(root, "a", end=None, experiment="exp1")
    make_run(root, "b", experiment="exp2")
    record_run(run)  # no index yet: a run makes none (the first listing does)
    assert not (root / INDEX_NAME).exists()
    list_runs(root)
    sqlite3.connect(root / INDEX_NAME).execute("DELETE FROM runs WHERE run_id = 'b'").connection.commit()
    with open(run / "events.jsonl", "a") as handle:
        handle.write(
            json.dumps({"event": "heartbeat", "run_id": "a", "seq": 3, "timestamp": time.time(), "payload": {}}) + "\n"
        )
    record_run(run)  # the host, as the run starts
    stored = dict(sqlite3.connect(root / INDEX_NAME).execute("SELECT run_id, status FROM runs").fetchall())
    assert stored == {"a": "running"}
    with open(run / "events.jsonl", "a") as handle:
        handle.write(
            json.dumps({"event": "run_completed", "run_id": "a", "seq": 4, "timestamp": time.time(), "payload": {}})
            + "\n"
        )
    record_run(run)  # and as it ends
    stored = dict(sqlite3.connect(root / INDEX_NAME).execute("SELECT run_id, status FROM runs").fetchall())
    assert stored == {"a": "completed"}
    index = RunIndex(root)
    assert index.named("exp1") == ["a"] and index.named("exp2") == ["b"] and index.named("none") == []
    index.close()


def rowids(root):
    """Each run's row id in the index file: a row rewritten (a run summarized again) gets a new one."""
    db = sqlite3.connect(root / INDEX_NAME)
    try:
        return dict(db.execute("SELECT run_id, rowid FROM runs").fetchall())
    finally:
        db.close()


def test_a_listing_summarizes_again_only_the_runs_that_changed(tmp_path):
    """Ended runs without a score (no TensorBoard file: nothing to score) and with one are kept
    as they are; a run whose log grew, one evaluated and one whose manifest was replaced are
    summarized again, each once: those MOSAIC changed (recorded) at the next listing, the one
    changed by hand at a recheck; a row the host wrote as its run ended is scored once."""
    root = tmp_path / "runs"
    for i in range(6):
        make_run(root, f"r{i}", end="run_failed" if i == 5 else "run_completed", started=time.time() - 100 + i)
    (root / "r4" / "evaluations").mkdir()
    first = listed(root)
    before = rowids(root)
    assert listed(root) == first and rowids(root) == before  # nothing changed: no row rewritten
    assert listed(root, recheck=True) == first and rowids(root) == before  # a recheck finds nothing either

    with open(root / "r1" / "events.jsonl", "a") as handle:  # resumed: its log grows
        handle.write(json.dumps({"event": "run_resumed", "run_id": "r1", "seq": 4, "timestamp": time.time()}) + "\n")
    (root / "r2" / "evaluations" / "e1").mkdir(parents=True)  # evaluated
    (root / "r4" / "evaluations" / "e1").mkdir()  # its evaluations folder gets one more (r4's own mtime stays)
    for run in ("r1", "r2", "r4"):  # the host resuming it, `mosaic evaluate`
        record_run(root / run)
    (root / "r3" / "manifest.json.tmp").write_text(json.dumps({"schema": "y", "status": "completed"}))
    os.replace(root / "r3" / "manifest.json.tmp", root / "r3" / "manifest.json")  # by hand
    recorded = rowids(root)
    listed(root)
    after = rowids(root)
    assert {run for run in after if after[run] != recorded[run]} == {"r1", "r2", "r4"}  # r1 runs: read each time
    assert listed(root, recheck=True) == fresh(root)
    after = rowids(root)
    assert {run for run in after if after[run] != before[run]} == {"r1", "r2", "r3", "r4"}
    assert rowids(root) == after and listed(root) == fresh(root)  # and once only

    record_run(root / "r0")  # the host as r0 ends: its row, without the score
    recorded = rowids(root)["r0"]
    assert recorded != after["r0"]
    listed(root)
    scored = rowids(root)["r0"]
    assert scored != recorded and listed(root) and rowids(root)["r0"] == scored  # scored once, then kept


def test_a_listing_never_overwrites_what_the_host_recorded_while_it_read(tmp_path, monkeypatch):
    """A resume starts while a listing reads the run's files (the host records the run between the
    listing's reading and its writing): the listing's older summary does not replace the host's row,
    and the run lists as running."""
    from mosaic_core.runstore import index

    root = tmp_path / "runs"
    run = make_run(root, "r")
    list_runs(root)
    with open(run / "events.jsonl", "a") as handle:  # by hand, so the next listing reads it again
        handle.write(json.dumps({"event": "metrics", "run_id": "r", "seq": 4, "timestamp": time.time()}) + "\n")
    read = index._summary

    def resumed_meanwhile(run_dir):
        summary = read(run_dir)  # what the listing saw: an ended run
        with open(run / "events.jsonl", "a") as handle:
            handle.write(json.dumps({"event": "run_resumed", "run_id": "r", "seq": 5, "timestamp": time.time()}) + "\n")
        record_run(run)  # the host, as the resumed run starts
        return summary

    monkeypatch.setattr(index, "_summary", resumed_meanwhile)
    assert [s.status for s in list_runs(root, recheck=True)] == ["completed"]  # what it read
    monkeypatch.undo()
    assert [s.status for s in list_runs(root)] == ["running"]


def test_rows_that_do_not_read_back_are_rebuilt_and_paths_follow_a_moved_root(tmp_path):
    root = tmp_path / "runs"
    make_run(root, "a")
    make_run(root, "b")
    want = listed(root)
    db = sqlite3.connect(root / INDEX_NAME)
    db.execute('UPDATE runs SET score = \'{"value": 1, "source": "eval"\' WHERE run_id = \'a\'')  # cut off
    db.execute("UPDATE runs SET problems = '{\"os.system\": \"x\"}' WHERE run_id = 'b'")  # not a list
    db.commit()
    db.close()
    assert listed(root) == want
    moved = tmp_path / "moved"
    root.rename(moved)
    assert [s["path"] for s in listed(moved)] == [str(moved / "a"), str(moved / "b")]
    assert listed(moved) == fresh(moved)


def test_the_json_listing_prints_the_summaries_whatever_changed(tmp_path):
    """``mosaic runs --json`` prints an unchanged run's stored line as it is: the same text as
    encoding its summary, cold and warm, after a change, a damaged line and a moved root."""

    def printed(root):
        return dumps_rows([s.to_dict() for s in list_runs(root)])

    root = tmp_path / "runs"
    for i in range(4):
        make_run(root, f"r{i}", started=time.time() - 10 + i, end=None if i == 3 else "run_completed")
    assert json.loads(list_runs_json(root)) and list_runs_json(root) == printed(root)
    with open(root / "r1" / "events.jsonl", "a") as handle:
        handle.write(json.dumps({"event": "run_resumed", "run_id": "r1", "seq": 4, "timestamp": time.time()}) + "\n")
    db = sqlite3.connect(root / INDEX_NAME)
    db.execute("UPDATE runs SET text = '{\"run_id\": \"r2\"' WHERE run_id = 'r2'")  # cut off
    db.commit()
    db.close()
    assert list_runs_json(root) == printed(root)
    rewritten = dict(sqlite3.connect(root / INDEX_NAME).execute("SELECT run_id, text FROM runs"))["r2"]
    assert json.loads(rewritten)["run_id"] == "r2"
    moved = tmp_path / "moved"
    root.rename(moved)
    assert list_runs_json(moved) == printed(moved) and str(root) not in list_runs_json(moved)
    assert list_runs_json(tmp_path / "empty") == "[]"


def test_imported_runs_and_experiment_tags_are_part_of_the_summary(tmp_path):
    from mosaic_core.runstore.trust import MARKER, trust

    root = tmp_path / "runs"
    run = make_run(root, "imported")
    config = json.loads((run / "config.json").read_text())
    config["extras"]["experiment"] = "grid"
    (run / "config.json.tmp").write_text(json.dumps(config))
    os.replace(run / "config.json.tmp", run / "config.json")
    (run / MARKER).write_text("{}")
    make_run(root, "own")
    by_id = {s.run_id: s for s in list_runs(root)}
    assert (by_id["imported"].untrusted, by_id["imported"].experiment_tag) == (True, "grid")
    assert (by_id["own"].untrusted, by_id["own"].experiment_tag) == (False, None)
    trust(run)
    record_run(run)  # as `mosaic runs trust` does
    assert {s.run_id: s.untrusted for s in list_runs(root)} == {"imported": False, "own": False}
    (tmp_path / MARKER).write_text("{}")  # the whole root lies in an imported run
    assert {s.run_id: s.untrusted for s in list_runs(root)} == {"imported": True, "own": True}


def test_a_root_unchanged_since_the_last_listing_is_not_listed_again(tmp_path, monkeypatch):
    """Once the root's mtime has settled (no entry added, removed or renamed since the last
    listing), a listing reads its runs from the rows: the root is not listed, ended runs not
    stat'ed; a run still running and a folder that was not a run yet are looked at; any new
    entry of the root makes the next listing list it again."""
    from mosaic_core.runstore.index import ROOT_SETTLED_NS

    root = tmp_path / "runs"
    for i in range(3):
        make_run(root, f"r{i}", started=time.time() - 10 + i)
    live = make_run(root, "live", end=None)
    (root / "not-yet").mkdir()

    def settle():  # the root's mtime, as if its last change was a while ago
        past = time.time_ns() - 2 * ROOT_SETTLED_NS
        os.utime(root, ns=(past, past))

    first = listed(root)  # makes the index (an entry of the root)
    settle()
    assert listed(root) == first  # lists the root, stores its mtime
    monkeypatch.setattr(RunIndex, "_run_dirs", lambda self: pytest.fail("the root was listed"))
    assert listed(root) == first
    with open(live / "events.jsonl", "a") as handle:  # the running run ends: seen (it is never sealed)
        handle.write(
            json.dumps({"event": "run_completed", "run_id": "live", "seq": 3, "timestamp": time.time()}) + "\n"
        )
    make_run(root / "not-yet", "inner")  # a folder inside a folder that is not a run: the root's mtime stays
    (root / "not-yet" / "config.json").write_text(json.dumps({"run_id": "not-yet", "worker": "cleanrl"}))
    assert listed(root) == fresh(root) and {s["run_id"] for s in listed(root)} == {"r0", "r1", "r2", "live", "not-yet"}
    monkeypatch.undo()

    make_run(root, "new")  # an entry of the root: its mtime changes, the root is listed again
    import shutil

    shutil.rmtree(root / "r0")
    assert listed(root) == fresh(root) and "new" in {s["run_id"] for s in listed(root)}
    settle()
    listed(root)
    monkeypatch.setattr(RunIndex, "_run_dirs", lambda self: pytest.fail("the root was listed"))
    assert listed(root) == fresh(root) and list_runs_json(root) == dumps_rows([s.to_dict() for s in list_runs(root)])
    assert listed(root, recheck=False) == fresh(root)
    monkeypatch.undo()
    assert listed(root, recheck=True) == fresh(root)  # a recheck lists the root whatever its mtime


def test_the_table_sqlite_lays_out_is_the_one_python_lays_out(tmp_path):
    """`mosaic runs`'s lines from the index (SQLite's layout of the stored cells) are the lines
    :func:`table.render` makes of the summaries: the same widths (characters, not bytes), ages,
    order, escaped control characters."""
    from mosaic_core.runstore import table
    from mosaic_core.runstore.index import list_runs_table

    root = tmp_path / "runs"
    for run_id, ago, env_id in [
        ("days", 200_000.5, "CartPole-v1"),
        ("hours", 7_300.5, "Pendulum-€-é"),  # wider in bytes than in characters
        ("minutes", 130.5, "ALE/Pong-v5\x1b[31m"),  # a terminal escape: shown as ?
        ("seconds", 5.5, "x" * 40),
    ]:
        run = make_run(root, run_id, started=time.time() - ago)
        config = json.loads((run / "config.json").read_text())
        (run / "config.json").write_text(json.dumps({**config, "env_id": env_id}))
    (root / "bare").mkdir()
    (root / "bare" / "config.json").write_text("{")  # a problem, a start time from its config's mtime
    for _ in range(2):  # cold, then from the rows
        lines, problems = list_runs_table(root)
        runs = list_runs(root)
        assert lines == table.render((s.started_at, table.cells(s)) for s in runs)
        assert [line.split()[0] for line in lines[1:]] == ["bare", "seconds", "minutes", "hours", "days"]
        assert "Pendulum-€-é" in lines[4] and "ALE/Pong-v5?[31m" in lines[3] and "\x1b" not in "".join(lines)
        assert list(problems) == ["bare"] and "config.json" in problems["bare"][0]


def test_a_lister_that_keeps_what_it_showed_gets_only_the_runs_that_changed(tmp_path):
    """RunIndex.changed (the dashboard's list): every run's token, and summaries only for the runs
    whose row changed since (a running one each time: its process may be gone without a file
    changing); a new run comes, a removed one goes."""
    import shutil

    root = tmp_path / "runs"
    for run_id in ("r0", "r1"):
        make_run(root, run_id)
    make_run(root, "live", end=None)
    index = RunIndex(root)
    try:
        tokens, summaries = index.changed({})
        assert set(tokens) == set(summaries) == {"r0", "r1", "live"} and tokens["live"] is None
        held = {run_id: token for run_id, token in tokens.items() if token is not None}
        assert set(index.changed(held)[1]) == {"live"}
        with open(root / "r1" / "events.jsonl", "a") as handle:
            handle.write(
                json.dumps({"event": "run_resumed", "run_id": "r1", "seq": 4, "timestamp": time.time()}) + "\n"
            )
        record_run(root / "r1")  # the host, resuming it
        make_run(root, "new")
        shutil.rmtree(root / "r0")
        tokens, summaries = index.changed(held)
        assert set(tokens) == {"r1", "live", "new"} and set(summaries) == {"r1", "live", "new"}
        assert summaries["r1"].status == "running" and summaries == {s.run_id: s for s in summaries.values()}
        assert {s.run_id: s.to_dict() for s in list_runs(root)} == {k: v.to_dict() for k, v in summaries.items()}
    finally:
        index.close()
