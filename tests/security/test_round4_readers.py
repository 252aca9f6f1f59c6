"""Issue 47, class 6: bad input as the owner, and readers that stay bounded.

* ``mosaic resume`` (and a re-run) of a run whose ``events.jsonl`` is over a gigabyte (a real
  stretch of events, a 1 GiB line, its end after that) reads it as a stream: under an address
  space limit far below the file, peaking under 256 MiB, and finding the end the file holds; a
  resume that goes on numbers its events on from the last one; the daemon's restart recovery,
  the Slurm node and ``runs export --no-checkpoints`` read the same file within bounds;
* a FIFO as the newest checkpoint is no checkpoint: resume goes on from the one before;
* hostile experiment and sweep specs (``/dev/zero``, a FIFO another user made, ``seeds`` of a
  billion, a grid of a billion groups, 100,000 levels of nesting, NUL bytes) are one line, exit
  2, under a memory cap, leaving nothing;
* the entry-point cache in a shared ``$XDG_CACHE_HOME`` never waits on a FIFO nor writes into a
  folder another user made or linked;
* ``--heartbeat-interval 1e-300`` is refused.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from tests.security.round4 import EXAMPLE, capped, mosaic, one_line
from tests.trainer.second_user import needs_second_user, run_as_nobody

GIB = 1 << 30
ADDRESS_SPACE = 512 << 20  # far below the log: reading it whole cannot fit
PEAK_RSS = 256 << 20
RUN = "big"


def line(name: str, seq: int, payload: dict) -> bytes:
    return json.dumps({"event": name, "run_id": RUN, "seq": seq, "timestamp": time.time(), "payload": payload}).encode()


def big_run(root: Path, end: list[tuple[str, dict]], checkpoint: int | None = None) -> Path:
    """A run of the example worker whose log is 64 MiB of real events, a 1 GiB line (a sparse
    hole: no disk), then ``end``: what resume must find. One history: the events' ``seq`` runs on
    by one across the hole (a line that is no event is skipped by every reader)."""
    run = root / RUN
    run.mkdir(parents=True, mode=0o700)
    config = {"run_id": RUN, **EXAMPLE, "total_timesteps": 300, "seed": 1, "extras": {}}
    (run / "config.json").write_text(json.dumps(config))
    with open(run / "events.jsonl", "wb") as log:
        log.write(line("run_started", 1, {"worker": "example"}) + b"\n")
        template = line("metrics", 0, {"global_step": 100, "episodic_return": 9.5}).replace(b'"seq": 0', b'"seq": %d')
        seq = 1
        while log.tell() < 64 << 20:
            log.write(b"".join(template % number + b"\n" for number in range(seq + 1, seq + 4097)))
            seq += 4096
        hole = log.tell() + GIB
        log.truncate(hole)
        log.seek(hole)
        log.write(b"\n" + b"".join(line(name, seq + 1 + i, payload) + b"\n" for i, (name, payload) in enumerate(end)))
    if checkpoint is not None:
        (run / "checkpoints").mkdir()
        (run / "checkpoints" / f"step_{checkpoint}.json").write_text(json.dumps({"global_step": checkpoint}))
    return run


def test_resume_reads_a_gigabyte_log_in_bounded_memory(tmp_path):
    root = tmp_path / "runs"
    root.mkdir(mode=0o700)
    big_run(root, [("heartbeat", {"pid": 1}), ("run_completed", {})])
    for args in (["resume", RUN], ["run", "--worker", "example", "--run-id", RUN]):
        done, peak = capped(tmp_path, [*args, "--runs-dir", str(root)], ADDRESS_SPACE)
        one_line(done, f"run {RUN} completed", "--restart")  # the end past the gigabyte was found
        assert peak < PEAK_RSS, f"{args[0]} peaked at {peak >> 20} MiB"


def test_a_resume_goes_on_after_a_gigabyte_log_and_numbers_on(tmp_path):
    root = tmp_path / "runs"
    root.mkdir(mode=0o700)
    run = big_run(root, [("run_cancelled", {"reason": "stopped"})], checkpoint=100)
    done, peak = capped(tmp_path, ["resume", RUN, "--runs-dir", str(root)])
    assert done.returncode == 0, done.stderr[-2000:]
    assert peak < PEAK_RSS, f"resume peaked at {peak >> 20} MiB"  # the host's own, not its training process's
    with open(run / "events.jsonl", "rb") as log:
        log.seek(-64 * 1024, os.SEEK_END)
        tail = [json.loads(x) for x in log.read().split(b"\n")[1:] if x.strip()]
    cancelled = next(e for e in tail if e["event"] == "run_cancelled")
    resumed = next(e for e in tail if e["event"] == "run_resumed")
    assert resumed["seq"] == cancelled["seq"] + 1 and resumed["payload"]["from_step"] == 100
    assert tail[-1]["event"] == "run_completed"


READERS = r"""
import json, resource, sys
from pathlib import Path
resource.setrlimit(resource.RLIMIT_AS, (int(sys.argv[2]),) * 2)
from mosaic_core.runstore.archive import _announced_checkpoints
from mosaic_core.trainer.recovery import own_terminal_event
from mosaic_slurm.node import last_event_since
run = Path(sys.argv[1])
class Row: run_id, run_dir = run.name, str(run)
found = {
    "recovery": own_terminal_event(run.parent, Row)["event"],
    "node": last_event_since(run, 0)["event"],
    "export": sorted(_announced_checkpoints(run)),
}
print(json.dumps({**found, "peak": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024}))
"""


def test_recovery_the_slurm_node_and_export_read_the_log_within_bounds(tmp_path):
    """What the daemon's restart recovery, the Slurm node and ``runs export --no-checkpoints``
    each ask of the log (its last terminal event, its last event, the checkpoints it announced)."""
    root = tmp_path / "runs"
    root.mkdir(mode=0o700)
    saved = ("checkpoint_saved", {"path": "checkpoints/step_100.json", "global_step": 100})
    run = big_run(root, [saved, ("run_cancelled", {"reason": "SIGUSR1"})])
    done = subprocess.run(
        [sys.executable, "-c", READERS, str(run), str(ADDRESS_SPACE)], capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr[-3000:]
    found = json.loads(done.stdout)
    assert (found["recovery"], found["node"], found["export"]) == (
        "run_cancelled",
        "run_cancelled",
        ["checkpoints/step_100.json"],
    )
    assert found["peak"] < PEAK_RSS, f"peaked at {found['peak'] >> 20} MiB"


def test_a_fifo_as_the_newest_checkpoint_is_no_checkpoint(tmp_path):
    root = tmp_path / "runs"
    run = root / RUN
    (run / "checkpoints").mkdir(parents=True)
    root.chmod(0o700)
    run.chmod(0o700)
    (run / "config.json").write_text(json.dumps({"run_id": RUN, **EXAMPLE, "total_timesteps": 300, "extras": {}}))
    (run / "events.jsonl").write_bytes(line("run_started", 1, {}) + b"\n" + line("run_cancelled", 2, {}) + b"\n")
    (run / "checkpoints" / "step_100.json").write_text(json.dumps({"global_step": 100}))
    os.mkfifo(run / "checkpoints" / "step_200.json")
    done = mosaic(tmp_path, "resume", RUN, "--runs-dir", str(root), timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "from step 100" in done.stderr  # the FIFO was passed over, never opened


@pytest.fixture
def shared() -> Path:
    """A folder like /tmp: root's, sticky, writable by everyone."""
    path = Path(tempfile.mkdtemp(prefix="mosaic-r4spec-"))
    path.chmod(0o1777)
    yield path
    shutil.rmtree(path, ignore_errors=True)


EXPERIMENT = 'name = "hostile"\n{body}\n'
GROUP = '[grid]\nworker = ["example"]\nalgo = {algo}\nenv = ["CartPole-v1"]\n'
SWEEP = 'study_name = "hostile"\nalgo = "ppo"\nenv_id = "CartPole-v1"\ntotal_timesteps = 100\n{body}\n'


@needs_second_user
def test_hostile_specs_are_one_line_under_a_memory_cap(tmp_path, shared):
    fifo = shared / "spec.toml"
    done = run_as_nobody([sys.executable, "-c", f"import os; os.mkfifo({str(fifo)!r}, 0o666)"])
    assert done.returncode == 0, done.stderr
    million = ", ".join(f'"a{i}"' for i in range(1000))
    texts = {
        "seeds": ("seeds = 1000000000\n" + GROUP.format(algo='["random"]'), "seeds"),
        "grid": (
            "[grid]\nworker = [" + million.replace('"a', '"w') + "]\nalgo = [" + million + "]\n"
            'env = ["CartPole-v1"]\noverrides = [' + ", ".join(f"{{x = {i}}}" for i in range(1000)) + "]\n",
            "more than 1000 groups",
        ),
        "nested": ("deep = " + "[" * 100_000 + "]" * 100_000 + "\n", "nests deeper than 32 levels"),
        "nul in a value": (GROUP.format(algo='["ran\\u0000dom"]'), "group 1.algo"),
        "nul byte": ("seeds = 2\x00\n", "NUL byte"),
    }
    cases = {"dev-zero": ("/dev/zero", "not a regular file"), "fifo": (str(fifo), "not a regular file")}
    for name, (body, words) in texts.items():
        path = tmp_path / f"{name.replace(' ', '-')}.toml"
        path.write_text(EXPERIMENT.format(body=body))
        cases[name] = (str(path), words)
    root = tmp_path / "runs"
    for name, (spec, words) in cases.items():
        done, _peak = capped(tmp_path, ["experiment", "run", spec, "--runs-dir", str(root)], ADDRESS_SPACE, 120)
        one_line(done, "experiment spec", words)
        assert not root.exists(), name
    sweeps = {"dev-zero": ("/dev/zero", "not a regular file"), "fifo": (str(fifo), "not a regular file")}
    for name, (body, words) in {
        "seeds": ("seeds = 1000000000", "seeds"),
        "nested": ("deep = " + "[" * 100_000 + "]" * 100_000, "nests deeper than 32 levels"),
    }.items():
        path = tmp_path / f"sweep-{name}.toml"
        path.write_text(SWEEP.format(body=body))
        sweeps[name] = (str(path), words)
    for name, (spec, words) in sweeps.items():
        done, _peak = capped(tmp_path, ["sweep", "run", spec, "--runs-dir", str(root)], ADDRESS_SPACE, 120)
        one_line(done, "sweep spec", words)
        assert not root.exists() and not (tmp_path / "var").exists(), name


PLANT = r"""
import os, sys
base, kind, name = sys.argv[1], sys.argv[2], sys.argv[3]
if kind == "link":
    os.makedirs(os.path.join(base, "theirs"))
    os.makedirs(os.path.join(base, "mosaic"))
    os.symlink(os.path.join(base, "theirs"), os.path.join(base, "mosaic", "entry-points"))
else:
    os.makedirs(os.path.join(base, "mosaic", "entry-points"))
    os.mkfifo(os.path.join(base, "mosaic", "entry-points", name), 0o666)
for folder, _dirs, _files in os.walk(base):
    if folder != base:  # theirs, open to all
        os.chmod(folder, 0o777)
"""


def _tree(base: Path) -> dict[str, tuple[int, int]]:
    return {str(p.relative_to(base)): (p.lstat().st_mode, p.lstat().st_uid) for p in sorted(base.rglob("*"))}


@needs_second_user
def test_the_entry_point_cache_never_waits_on_or_writes_into_what_another_user_planted(tmp_path, shared):
    fresh = tmp_path / "fresh"  # the cache file's name (per interpreter): as a first command writes it
    assert mosaic(tmp_path, "workers", "--json", env={"XDG_CACHE_HOME": str(fresh)}).returncode == 0
    (name,) = os.listdir(fresh / "mosaic" / "entry-points")
    for kind in ("fifo", "link"):
        cache = shared / kind
        cache.mkdir(mode=0o1777)
        cache.chmod(0o1777)
        done = run_as_nobody([sys.executable, "-c", PLANT, str(cache), kind, name])
        assert done.returncode == 0, done.stderr
        before = _tree(cache)
        listed = mosaic(tmp_path, "workers", "--json", env={"XDG_CACHE_HOME": str(cache)}, timeout=60)
        assert listed.returncode == 0 and any(w["name"] == "example" for w in json.loads(listed.stdout)), kind
        assert _tree(cache) == before, kind  # nothing written into, over or through their folder
    own = tmp_path / "cache"  # our own folder, a FIFO of ours at the file's name: not waited on
    (own / "mosaic" / "entry-points").mkdir(parents=True)
    os.mkfifo(own / "mosaic" / "entry-points" / name)
    listed = mosaic(tmp_path, "workers", "--json", env={"XDG_CACHE_HOME": str(own)}, timeout=60)
    assert listed.returncode == 0, listed.stderr
    assert (own / "mosaic" / "entry-points" / name).is_file()  # replaced by the cache, by a rename


def test_a_heartbeat_interval_has_a_floor(tmp_path):
    for value in ("1e-300", "0.01"):
        done = mosaic(
            tmp_path,
            *("run", "--worker", "example", "--env-id", "CartPole-v1", "--total-timesteps", "100"),
            *("--heartbeat-interval", value, "--dry-run"),
        )
        one_line(done, "--heartbeat-interval must be at least 0.1 seconds", value)
