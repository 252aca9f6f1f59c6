"""The dashboard's Compare page in a real Chromium: the chosen runs fall into seed groups; each
group's IQM return over env steps is drawn with its CI band and grows as its runs report metrics;
the table's finished count and IQM of scores fill in as runs end; nothing on the page is built
from markup (a group label with HTML in it stays text), and no script error occurs (the CSP holds).

The runs are written here the way a run host writes them (config.json, events.jsonl with
run_started / metrics / run_completed, TensorBoard files through tensorboardX), appended to while
the page is open."""

from __future__ import annotations

import json
import time
from pathlib import Path

from .conftest import wait_for

LIVE = "ppo CartPole-v1 learning_rate=0.01 variant=<b>fast</b>"
DONE = "ppo CartPole-v1 learning_rate=0.001 variant=<b>slow</b>"


def event(run_id: str, name: str, payload: dict, seq: int) -> str:
    return (
        json.dumps({"event": name, "run_id": run_id, "seq": seq, "timestamp": time.time(), "payload": payload}) + "\n"
    )


def start(root: Path, run_id: str, seed: int, lr: float) -> Path:
    run_dir = root / run_id
    run_dir.mkdir(parents=True)
    (run_dir / "config.json").write_text(
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
    (run_dir / "events.jsonl").write_text(event(run_id, "run_started", {"worker": "cleanrl", "algo": "ppo"}, 1))
    return run_dir


def report(run_dir: Path, steps: range, level: float) -> None:
    with open(run_dir / "events.jsonl", "a") as handle:
        for step in steps:
            handle.write(
                event(run_dir.name, "metrics", {"global_step": step, "episodic_return": level + step / 100}, step)
            )


def finish(run_dir: Path, level: float) -> None:
    from tensorboardX import SummaryWriter

    writer = SummaryWriter(str(run_dir / "runs" / run_dir.name))
    for step in range(100, 4001, 100):
        writer.add_scalar("charts/episodic_return", level, step)
    writer.close()
    with open(run_dir / "events.jsonl", "a") as handle:
        handle.write(event(run_dir.name, "run_completed", {}, 10_000))


def test_compare_page_draws_iqm_bands_that_grow_as_seeds_train(serve, browser, artifacts, workdir):
    root = workdir / "var/trainer/runs"
    done = [start(root, f"slow-s{s}", s, 0.001) for s in (1, 2, 3)]
    for index, run_dir in enumerate(done):
        report(run_dir, range(100, 4001, 100), 10.0 * index)
        finish(run_dir, 20.0 + 10 * index)
    live = [start(root, f"fast-s{s}", s, 0.01) for s in (1, 2)]
    for run_dir in live:
        report(run_dir, range(100, 1001, 100), 50.0)
    base, server = serve()
    page = browser.new_page()
    script_errors: list[str] = []
    page.on("pageerror", lambda error: script_errors.append(str(error)))
    page.on("console", lambda message: message.type == "error" and script_errors.append(message.text))
    ids = ",".join(d.name for d in done + live)
    page.goto(server.ready["url"] + f"#/compare/{ids}")

    page.wait_for_selector(f'#compare-bands path[data-band="{DONE}"]')
    page.wait_for_selector(f'#compare-bands path[data-series="{LIVE}"]')
    row = lambda label: page.locator(f'#compare-groups tr[data-group="{label}"] td')
    assert row(DONE).all_text_contents() == [DONE, "3", "3", "30"]  # IQM of 20, 30, 40
    assert row(LIVE).all_text_contents()[1:3] == ["2", "0"]
    assert "fewer than 5 seeds" in page.text_content("#compare-warnings")
    steps_before = page.get_attribute(f'#compare-bands path[data-series="{LIVE}"]', "d")
    page.screenshot(path=str(artifacts / "1-compare-live.png"), full_page=True)

    for run_dir in live:  # the live seeds train on, then end
        report(run_dir, range(1100, 4001, 100), 50.0)
    wait_for(
        lambda: page.get_attribute(f'#compare-bands path[data-series="{LIVE}"]', "d") != steps_before,
        30,
        "the live group's IQM curve to grow",
    )
    for index, run_dir in enumerate(live):
        finish(run_dir, 100.0 + 10 * index)
    wait_for(lambda: row(LIVE).all_text_contents()[2] == "2", 30, "the live group's runs to be scored")
    assert row(LIVE).all_text_contents()[3] == "105"
    page.screenshot(path=str(artifacts / "2-compare-finished.png"), full_page=True)
    page.goto(server.ready["url"] + "#/")  # the run list shows the same score, with its source
    page.wait_for_selector('#runs tr[data-run-id="slow-s1"]')
    assert page.locator('#runs tr[data-run-id="slow-s1"] td').nth(7).text_content() == "20 train"
    assert page.locator("#compare-groups b, #compare-bands b").count() == 0 and script_errors == []  # text, not markup
    print(f"screenshots: {artifacts}")
