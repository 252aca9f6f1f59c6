"""The dashboard's Compare page in a real Chromium.

1. Real CleanRL runs (PPO and DQN on CartPole, 4 seeds each, tiny budgets): the page's band and
   table, and the JSON API behind them, against numbers computed here, independently, from the
   runs' TensorBoard files (read with TensorBoard's own ``EventAccumulator``; IQMs by rliable):
   every run's score (PPO's: CleanRL's evaluation of the model it saved; DQN, saving nothing: the
   mean training return of the last 10 % of steps), each group's IQM of scores, and the band at
   every step of its grid (the IQM over seeds of each run's training score so far). The band
   never contradicts the table: it ends, for the train-scored group, at the table's IQM, and the
   group drawn higher at the end is the one whose IQM is higher. Every axis label is drawn
   unstretched, the band's as large as the other charts'.
2. Runs written here as a run host and a CleanRL script write them (config.json, events.jsonl,
   TensorBoard files through torch's SummaryWriter),
   appended to while the page is open: the band grows with the episodes, the table fills in as
   runs end, and nothing on the page is built from markup (a group label with HTML stays text).
"""

from __future__ import annotations

import json
import re
import subprocess
import time
from pathlib import Path

import numpy as np
import pytest
from rliable import metrics
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from .conftest import BIN, child_env, http_json, wait_for

SEEDS = (1, 2, 3, 4)
RUNS = {  # group -> (algo, extras): tiny budgets, a few seconds each
    "ppo": ("ppo", {"num_envs": 4, "num_steps": 128, "cuda": False}),
    "dqn": ("dqn", {"learning_starts": 500, "target_network_frequency": 100, "cuda": False, "save_model": False}),
}
TOTAL = 2048
LIVE = "ppo CartPole-v1 learning_rate=0.01 variant=<b>fast</b>"
DONE = "ppo CartPole-v1 learning_rate=0.001 variant=<b>slow</b>"


# ------------------------------------------------------------------ computed here, from TensorBoard
def tensorboard(run_dir: Path) -> dict[str, list[tuple[int, float]]]:
    """Every scalar of the run's one TensorBoard folder, as TensorBoard reads it."""
    (folder,) = {p.parent for p in (run_dir / "runs").rglob("events.out.tfevents.*")}
    accumulator = EventAccumulator(str(folder), size_guidance={"scalars": 0})
    accumulator.Reload()
    return {tag: [(e.step, e.value) for e in accumulator.Scalars(tag)] for tag in accumulator.Tags()["scalars"]}


def train_score(episodes: list[tuple[int, float]], up_to: float | None = None) -> float:
    """The mean return of the episodes that ended in the last 10 % of the steps reached (by
    ``up_to``), at least the last 10 of them."""
    ended = sorted([(s, v) for s, v in episodes if up_to is None or s <= up_to], key=lambda e: e[0])
    last = ended[-1][0]
    window = [v for s, v in ended if s >= 0.9 * last]
    return float(np.mean(window if len(window) >= 10 else [v for _s, v in ended[-10:]]))


def iqm(values: list[float]) -> float:
    return float(metrics.aggregate_iqm(np.asarray(values, dtype=float)[:, None]))


def shown(value: float) -> str:
    """A number as the page prints it (5 significant digits, JavaScript's toPrecision)."""
    return str(float(f"{value:.5g}")).removesuffix(".0")


# ------------------------------------------------------------------ real runs
@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """4 seeds of CleanRL PPO and of DQN on CartPole, two at a time."""
    workdir = tmp_path_factory.mktemp("compare-real")
    root = workdir / "var/trainer/runs"
    jobs = [(f"{group}-s{seed}", algo, seed, extras) for group, (algo, extras) in RUNS.items() for seed in SEEDS]
    running: list[tuple[str, subprocess.Popen]] = []
    while jobs or running:
        while jobs and len(running) < 2:
            run_id, algo, seed, extras = jobs.pop(0)
            args = ["run", "--worker", "cleanrl", "--algo", algo, "--env-id", "CartPole-v1", "--seed", str(seed)]
            args += ["--total-timesteps", str(TOTAL), "--run-id", run_id, "--extras", json.dumps(extras), "--quiet"]
            process = subprocess.Popen(
                [str(BIN / "mosaic"), *args],
                cwd=workdir,
                env=child_env(workdir),
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
                text=True,
            )
            running.append((run_id, process))
        run_id, process = running.pop(0)
        assert process.wait(timeout=600) == 0, f"{run_id}: {process.stderr.read()[-3000:]}"
    return workdir, root


@pytest.mark.slow
def test_the_compare_page_agrees_with_tensorboard(trained, serve, browser, artifacts):
    workdir, root = trained
    recorded = {run_dir.name: tensorboard(run_dir) for run_dir in sorted(root.iterdir()) if run_dir.is_dir()}
    episodes = {run_id: tags["charts/episodic_return"] for run_id, tags in recorded.items()}
    scores = {  # PPO kept its model: CleanRL evaluated it (eval/episodic_return, episodes 0-9); DQN did not
        run_id: float(np.mean([v for _s, v in tags["eval/episodic_return"]]))
        if run_id.startswith("ppo")
        else train_score(episodes[run_id])
        for run_id, tags in recorded.items()
    }
    assert all(len(tags.get("eval/episodic_return", [])) == 10 for r, tags in recorded.items() if r.startswith("ppo"))
    assert not any("eval/episodic_return" in tags for r, tags in recorded.items() if r.startswith("dqn"))
    base, server = serve("--runs-dir", str(root))

    # the JSON API: every run's curve is its episodes; each group's scores, IQM and band
    for run_id, expected in episodes.items():
        status, body = http_json(f"{base}/api/runs/{run_id}/curves")
        assert status == 200 and body["curves"]["episodic_return"] == [[s, v] for s, v in expected]
    status, view = http_json(f"{base}/api/groups?runs=" + ",".join(recorded))
    assert status == 200, view
    groups = {g["runs"][0].split("-")[0]: g for g in view["groups"]}  # ppo, dqn (labels name their settings)
    assert len(view["groups"]) == 2 and all(g["label"].startswith(f"{name} CartPole-v1") for name, g in groups.items())
    band_end = {}
    for name in RUNS:
        group, members = groups[name], [f"{name}-s{seed}" for seed in SEEDS]
        assert sorted(group["runs"]) == members and group["finished"] == len(SEEDS)
        assert sorted(group["scores"]) == pytest.approx(sorted(scores[m] for m in members), abs=1e-4)
        assert group["sources"] == ["eval" if name == "ppo" else "train"] * len(SEEDS)
        assert group["score_iqm"] == pytest.approx(iqm([scores[m] for m in members]), abs=1e-4)
        steps = [point[0] for point in group["band"]]
        assert steps[0] == max(episodes[m][0][0] for m in members)  # from where every seed has an episode
        assert steps[-1] == max(episodes[m][-1][0] for m in members)  # to the end: every seed has ended
        for step, middle, low, high in group["band"]:
            assert middle == pytest.approx(iqm([train_score(episodes[m], step) for m in members]), abs=1e-6)
            assert low <= middle <= high
        band_end[name] = group["band"][-1][1]
    assert band_end["dqn"] == pytest.approx(groups["dqn"]["score_iqm"], abs=1e-9)  # train-scored: one number
    assert any(f"scores from final evaluations in {groups['ppo']['label']}" in w for w in view["warnings"])

    # the page shows the same numbers, and draws higher the group whose band ends higher
    page = browser.new_page()
    script_errors: list[str] = []
    page.on("pageerror", lambda error: script_errors.append(str(error)))
    page.goto(server.ready["url"] + "#/compare/" + ",".join(recorded))
    for name in RUNS:
        group = groups[name]
        label = group["label"]
        page.wait_for_selector(f'#compare-bands path[data-band="{label}"]')
        cells = page.locator(f'#compare-groups tr[data-group="{label}"] td').all_text_contents()
        assert cells == [
            label,
            "4",
            "4",
            shown(iqm([scores[f"{name}-s{seed}"] for seed in SEEDS])),
            "eval 4" if name == "ppo" else "train 4",
            shown(band_end[name]),
        ]
        assert page.get_attribute(f'#compare-bands path[data-series="{label}"]', "data-points") == str(
            len(group["band"])
        )
    page.wait_for_selector('#compare-charts path[data-series="ppo-s1"]')
    last_y = {
        name: float(page.get_attribute(f'#compare-bands path[data-series="{group["label"]}"]', "d").split(",")[-1])
        for name, group in groups.items()
    }
    higher = max(band_end, key=band_end.get)
    assert last_y[higher] == min(last_y.values())  # svg y grows downwards
    page.screenshot(path=str(artifacts / "compare-real-runs.png"), full_page=True)

    # every axis label unstretched (1 px of the svg is 1 px on the page), the band's as the others'
    scales = page.evaluate(
        """() => [...document.querySelectorAll('#view-compare svg text.axis')].map(t => {
             const m = t.getScreenCTM(); return [t.closest('.chart').id, m.a, m.d, t.getBoundingClientRect().height]; })"""
    )
    charts = {chart for chart, *_ in scales}
    assert "cmp-bands" in charts and len(charts) > 1
    assert all(a == pytest.approx(1, abs=0.01) and d == pytest.approx(1, abs=0.01) for _c, a, d, _h in scales), scales
    heights = {round(height, 1) for *_x, height in scales}
    assert len(heights) == 1, scales
    assert script_errors == []
    print(f"screenshots: {artifacts}")


@pytest.mark.slow
def test_mosaic_compare_and_plot_read_the_same_episodes(trained, serve):
    """`mosaic compare --json` (its figure's sample-efficiency curves) and `mosaic plot --table`
    give the numbers the page gives, the ones computed here from TensorBoard."""
    import statistics

    from tests.conftest import run_cli

    workdir, root = trained
    ids = sorted(d.name for d in root.iterdir() if d.is_dir())
    episodes = {run_id: tensorboard(root / run_id)["charts/episodic_return"] for run_id in ids}
    shown = run_cli(["compare", *ids, "--runs-dir", str(root), "--json", "--reps", "200"], cwd=workdir, timeout=300)
    assert shown.returncode == 0, shown.stderr[-3000:]
    curves = json.loads(shown.stdout)["curves"]["CartPole-v1"]
    base, _server = serve("--runs-dir", str(root))
    _status, view = http_json(f"{base}/api/groups?runs=" + ",".join(ids))
    for group in view["groups"]:
        curve = curves[group["label"]]  # the figure's curve is the page's band, point for point
        assert curve["steps"] == [point[0] for point in group["band"]]
        assert curve["iqm"] == pytest.approx([point[1] for point in group["band"]], abs=1e-9)
        members = group["runs"]
        for step, value in zip(curve["steps"], curve["iqm"]):
            assert value == pytest.approx(iqm([train_score(episodes[m], step) for m in members]), abs=1e-6)

    table = run_cli(["plot", *ids, "--group", "seed", "--table", "--runs-dir", str(root)], cwd=workdir)
    assert table.returncode == 0, table.stderr[-3000:]
    for name in RUNS:
        members = [f"{name}-s{seed}" for seed in SEEDS]
        scores = [
            float(np.mean([v for _s, v in tensorboard(root / m)["eval/episodic_return"]]))
            if name == "ppo"
            else train_score(episodes[m])
            for m in members
        ]
        row = next(line for line in table.stdout.splitlines() if line.startswith(name) and " 4 " in line)
        mean, std = statistics.fmean(scores), statistics.stdev(scores)
        cells = re.split(r"\s{2,}", row.strip())
        assert cells[1:] == ["4", f"{mean:.2f} ± {std:.2f}", f"{min(scores):.2f}", f"{max(scores):.2f}"], row


# ------------------------------------------------------------------ runs written as a host writes them
def event(run_id: str, name: str, payload: dict, seq: int) -> str:
    return (
        json.dumps({"event": name, "run_id": run_id, "seq": seq, "timestamp": time.time(), "payload": payload}) + "\n"
    )


class Run:
    """A run directory written as a run host and a CleanRL script write it."""

    def __init__(self, root: Path, run_id: str, seed: int, lr: float):
        from torch.utils.tensorboard import SummaryWriter  # CleanRL's writer

        self.dir = root / run_id
        self.dir.mkdir(parents=True)
        (self.dir / "config.json").write_text(
            json.dumps(
                {
                    "run_id": run_id,
                    "worker": "cleanrl",
                    "algo": "ppo",
                    "env_id": "CartPole-v1",
                    "total_timesteps": 4000,
                    "seed": seed,
                    "extras": {
                        "algo_params": {"learning_rate": lr},
                        "variant": f"<b>{'slow' if lr < 0.01 else 'fast'}</b>",
                    },
                }
            )
        )
        (self.dir / "events.jsonl").write_text(event(run_id, "run_started", {"worker": "cleanrl", "algo": "ppo"}, 1))
        self.writer = SummaryWriter(str(self.dir / "runs" / run_id))

    def train(self, steps: range, level: float) -> None:
        """An episode at each of ``steps``, returning ``level + step / 100``, and a metrics event."""
        for step in steps:
            self.writer.add_scalar("charts/episodic_return", level + step / 100, step)
        self.writer.flush()
        with open(self.dir / "events.jsonl", "a") as handle:
            handle.write(event(self.dir.name, "metrics", {"global_step": steps[-1]}, steps[-1]))

    def finish(self) -> None:
        self.writer.close()
        with open(self.dir / "events.jsonl", "a") as handle:
            handle.write(event(self.dir.name, "run_completed", {}, 10_000))


def test_compare_page_draws_iqm_bands_that_grow_as_seeds_train(serve, browser, artifacts, workdir):
    root = workdir / "var/trainer/runs"
    done = [Run(root, f"slow-s{s}", s, 0.001) for s in (1, 2, 3)]
    for index, run in enumerate(done):
        run.train(range(100, 4001, 100), 10.0 * index)
        run.finish()
    live = [Run(root, f"fast-s{s}", s, 0.01) for s in (1, 2)]
    for run in live:
        run.train(range(100, 1001, 100), 50.0)
    base, server = serve()
    page = browser.new_page()
    script_errors: list[str] = []
    page.on("pageerror", lambda error: script_errors.append(str(error)))
    page.on("console", lambda message: message.type == "error" and script_errors.append(message.text))
    ids = ",".join(run.dir.name for run in done + live)
    page.goto(server.ready["url"] + f"#/compare/{ids}")

    page.wait_for_selector(f'#compare-bands path[data-band="{DONE}"]')
    page.wait_for_selector(f'#compare-bands path[data-series="{LIVE}"]')
    row = lambda label: page.locator(f'#compare-groups tr[data-group="{label}"] td')
    # each seed's score: its last 10 episodes (steps 3100-4000), level + 35.5; their IQM and the band's end
    assert row(DONE).all_text_contents() == [DONE, "3", "3", "45.5", "train 3", "45.5"]
    assert row(LIVE).all_text_contents()[1:3] == ["2", "0"]
    assert row(LIVE).all_text_contents()[5] == "55.5"  # the live seeds' training score at step 1000 so far
    assert "fewer than 5 seeds" in page.text_content("#compare-warnings")
    steps_before = page.get_attribute(f'#compare-bands path[data-series="{LIVE}"]', "d")
    page.screenshot(path=str(artifacts / "1-compare-live.png"), full_page=True)

    for run in live:  # the live seeds train on, then end
        run.train(range(1100, 4001, 100), 50.0)
    wait_for(
        lambda: page.get_attribute(f'#compare-bands path[data-series="{LIVE}"]', "d") != steps_before,
        30,
        "the live group's IQM curve to grow",
    )
    for run in live:
        run.finish()
    wait_for(lambda: row(LIVE).all_text_contents()[2] == "2", 30, "the live group's runs to be scored")
    assert row(LIVE).all_text_contents()[3:] == ["85.5", "train 2", "85.5"]
    page.screenshot(path=str(artifacts / "2-compare-finished.png"), full_page=True)
    page.goto(server.ready["url"] + "#/")  # the run list shows the same score, with its source
    page.wait_for_selector('#runs tr[data-run-id="slow-s1"]')
    assert page.locator('#runs tr[data-run-id="slow-s1"] td').nth(7).text_content() == "35.5 train"
    assert page.locator("#compare-groups b, #compare-bands b").count() == 0 and script_errors == []  # text, not markup
    print(f"screenshots: {artifacts}")
