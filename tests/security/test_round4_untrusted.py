"""Issue 47, class 3: an imported run is untrusted everywhere, not only where it could run.

Another local user (uid 65534) packs two runs that claim to be seeds 3 and 4 of the owner's
experiment (its name, its run ids, its settings) with a score no real seed reaches and a
checkpoint; the owner imports them. Then, through the real commands:

* ``experiment run`` does not take them for done seeds: seeds 3 and 4 run as new attempts;
* ``compare EXPERIMENT`` leaves them out and says so; named by id they are compared, marked;
* ``experiment card`` picks the owner's best seed and copies nothing of theirs; ``runs card``
  of one is refused in one line (it would copy the checkpoint out, unmarked);
* the dashboard's Compare groups mark them (``untrusted``, a warning).
"""

from __future__ import annotations

import json
import re
import shutil
import tempfile
from pathlib import Path

import pytest

from tests.dashboard.conftest import TOKENS, http_json, start
from tests.security.round4 import event, imported_run, mosaic, one_line
from tests.trainer.second_user import needs_second_user

SPEC = """
name = "shared4"
seeds = {seeds}
total_timesteps = 1024
parallel = 2

[[group]]
worker = "cleanrl"
algo = "ppo"
env = "CartPole-v1"
"""
CLAIMED = 1e6  # no random CartPole policy scores this: picked as "best" if it is ever let in


def forged_seed(owner_config: dict, run_id: str, seed: int) -> dict[str, str]:
    """What the attacker packs: the experiment's settings under a seed's id, completed, an
    evaluation scoring :data:`CLAIMED` and a checkpoint."""
    config = {**owner_config, "run_id": run_id, "seed": seed}
    evaluation = {
        "schema": "mosaic.eval/1",
        "mean": CLAIMED,
        "std": 0.0,
        "global_step": 1024,
        "episodes": [{"return": CLAIMED, "length": 500, "seed": 1}],
    }
    return {
        "config.json": json.dumps(config),
        "events.jsonl": "\n".join(
            [
                event("run_started", run_id, 1, {"worker": "cleanrl"}),
                event("metrics", run_id, 2, {"global_step": 1024, "episodic_return": CLAIMED}),
                event("run_completed", run_id, 3, {}),
            ]
        )
        + "\n",
        "evaluations/step_1024/eval.json": json.dumps(evaluation),
        "checkpoints/step_1024.cleanrl_model": json.dumps({"from": "them"}),
    }


@pytest.fixture(scope="module")
def shared():
    path = Path(tempfile.mkdtemp(prefix="mosaic-r4-"))
    path.chmod(0o1777)  # like /tmp
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture(scope="module")
def experiment(shared, tmp_path_factory):
    """The owner's seeds 1 and 2; the attacker's seeds 3 and 4, imported; then seeds 1-4 run."""
    from mosaic_experiments.spec import load

    workdir = tmp_path_factory.mktemp("untrusted")
    root = workdir / "runs"
    spec = workdir / "spec.toml"
    spec.write_text(SPEC.format(seeds="[1, 2]"))
    first = mosaic(workdir, "experiment", "run", "spec.toml", "--runs-dir", str(root), timeout=600)
    assert first.returncode == 0, first.stderr[-3000:]
    spec.write_text(SPEC.format(seeds="[1, 2, 3, 4]"))
    exp = load(spec)
    (group,) = exp.groups
    owner_config = json.loads((root / exp.run_id(group, 1) / "config.json").read_text())
    imported = [exp.run_id(group, seed) for seed in (3, 4)]
    for seed, run_id in zip((3, 4), imported):
        imported_run(shared, root, workdir, run_id, forged_seed(owner_config, run_id, seed))
    again = mosaic(workdir, "experiment", "run", "spec.toml", "--runs-dir", str(root), timeout=600)
    return workdir, root, imported, again


@needs_second_user
def test_imported_runs_under_seed_ids_are_not_done_seeds(experiment):
    _workdir, root, imported, again = experiment
    assert again.returncode == 0, again.stderr[-3000:]
    assert "2 of 4 runs completed already, 2 to run" in again.stderr, again.stderr
    for run_id in imported:
        assert f"{run_id} was imported and is untrusted" in again.stderr
        assert json.loads((root / f"{run_id}-a2" / "config.json").read_text())["seed"] in (3, 4)
        assert (root / run_id / "UNTRUSTED.json").is_file()  # left as it was


@needs_second_user
def test_compare_leaves_an_experiments_imported_runs_out_and_marks_named_ones(experiment):
    workdir, root, imported, _again = experiment
    shown = mosaic(workdir, "compare", "shared4", "--runs-dir", str(root), "--json", "--reps", "100")
    assert shown.returncode == 0, shown.stderr
    report = json.loads(shown.stdout)
    (section,) = report["sections"].values()
    (group,) = section["groups"].values()
    assert group["runs"] == 4  # seeds 1, 2 and the owner's own attempts at 3 and 4
    assert any("left out 2 imported, untrusted run(s)" in w and imported[0] in w for w in report["warnings"])
    named = [p.name for p in sorted(root.iterdir()) if p.name.endswith(("-s1", "-s2"))]
    shown = mosaic(workdir, "compare", *named, imported[0], "--runs-dir", str(root), "--json", "--reps", "100")
    assert shown.returncode == 0, shown.stderr
    report = json.loads(shown.stdout)
    assert any(f"imported, untrusted run(s) {imported[0]}" in w for w in report["warnings"]), report["warnings"]


@needs_second_user
def test_cards_copy_nothing_of_an_imported_run(experiment):
    workdir, root, imported, _again = experiment
    made = mosaic(workdir, "experiment", "card", "shared4", "-o", "card", "--reps", "100", "--runs-dir", str(root))
    assert made.returncode == 0, made.stderr[-3000:]
    assert "left out 2 imported, untrusted run(s)" in made.stderr
    card = (workdir / "card" / "README.md").read_text().replace("\\", "")
    model = re.search(r"; run (\S+), checkpoint", card)[1]
    assert model not in imported and not (root / model / "UNTRUSTED.json").exists()
    assert "| seeds in its group | 4 " in card and str(int(CLAIMED)) not in card  # the owner's 4 seeds only
    for path in (workdir / "card").rglob("*"):
        assert b'"them"' not in path.read_bytes(), path  # no checkpoint of theirs
    refused = mosaic(workdir, "runs", "card", imported[0], "-o", "card2", "--runs-dir", str(root))
    one_line(refused, imported[0], "untrusted", f"mosaic runs trust {imported[0]}")
    assert not (workdir / "card2").exists()


@needs_second_user
def test_the_dashboards_compare_groups_mark_imported_runs(experiment):
    workdir, root, imported, _again = experiment
    server = start(["serve", "--port", "0", "--runs-dir", str(root)], workdir, "serve")
    try:
        base = f"http://127.0.0.1:{server.ready['port']}"
        TOKENS[base] = server.ready["url"].split("?token=", 1)[1]
        owners = [p.name for p in sorted(root.iterdir()) if p.name.endswith(("-s1", "-s2"))]
        status, view = http_json(f"{base}/api/groups?runs={','.join([*owners, imported[0]])}")
        assert status == 200, view
        (group,) = view["groups"]
        assert group["untrusted"] == [imported[0]] and imported[0] in group["runs"]
        assert any(f"imported, untrusted run(s) {imported[0]}" in w for w in view["warnings"])
        status, runs = http_json(f"{base}/api/runs")
        assert status == 200 and {r["run_id"] for r in runs if r["untrusted"]} == set(imported)
    finally:
        server.stop()
    assert "Traceback" not in server.stderr, server.stderr[-3000:]
