"""A real headless Chromium drives the dashboard through a live PPO run submitted to a real
``mosaic daemon``: the run list updates, a curve grows, the frame changes, cancel works, a
deleted run directory is reported; and a server bound beyond loopback refuses a browser
without its token. Screenshots land under pytest's tmp dir (printed at the end of each test)."""

from __future__ import annotations

import shutil

import pytest

from .conftest import wait_for

pytestmark = pytest.mark.slow


def points_of(page, series: str) -> int:
    value = page.get_attribute(f'#chart-return path[data-series="{series}"]', "data-points", timeout=1000)
    return int(value or 0)


def tensorboard_returns(run_dir) -> list[tuple[int, float]]:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    (folder,) = {p.parent for p in (run_dir / "runs").rglob("events.out.tfevents.*")}
    accumulator = EventAccumulator(str(folder), size_guidance={"scalars": 0})
    accumulator.Reload()
    return [(e.step, e.value) for e in accumulator.Scalars("charts/episodic_return")]


def test_live_ppo_run_in_a_real_browser(serve, daemon, browser, artifacts, workdir):
    base, server = serve("--target", daemon.ready["listen_address"])
    page = browser.new_page()
    script_errors: list[str] = []
    page.on("pageerror", lambda error: script_errors.append(str(error)))
    page.goto(server.ready["url"] + "#/submit")  # the printed URL, with its token

    # Submit from the form built from the daemon's worker and ppo's Args.
    page.wait_for_selector('#submit-fields [data-arg="learning_rate"]')
    assert page.input_value("#submit-algo") == "ppo"
    page.fill('input[name="total_timesteps"]', "2000000")
    page.fill('input[name="run_id"]', "browser-ppo")
    page.fill('[data-arg="num_envs"]', "2")
    assert page.is_checked('input[name="live_frames"]')
    page.screenshot(path=str(artifacts / "1-submit-form.png"), full_page=True)
    page.fill('input[name="total_timesteps"]', "lots")  # malformed: refused with the field named
    page.click('#submit-form button[type="submit"]')
    page.wait_for_selector("#submit-result:has-text(\"total_timesteps: 'lots' is not a whole number\")")
    page.fill('input[name="total_timesteps"]', "2000000")
    page.click('#submit-form button[type="submit"]')
    page.wait_for_selector('#submit-result a[href="#/run/browser-ppo"]')

    # The run list updates by itself.
    page.goto(f"{base}/#/")
    page.wait_for_selector('#runs tr[data-run-id="browser-ppo"]', timeout=30000)
    page.wait_for_selector('#runs tr[data-run-id="browser-ppo"][data-status="running"]', timeout=60000)
    page.wait_for_selector("#queue-state:has-text('running 1')")  # the daemon's queue state
    page.screenshot(path=str(artifacts / "2-run-list.png"), full_page=True)

    # The run page: the curve grows, frames change.
    page.click('#runs tr[data-run-id="browser-ppo"] a')
    page.wait_for_selector('#chart-return path[data-series="episodic_return"]', timeout=60000)
    first = points_of(page, "episodic_return")
    wait_for(lambda: points_of(page, "episodic_return") > first + 1, 60, "the return curve to grow")
    page.wait_for_function("document.querySelector('#frame').naturalWidth > 0", timeout=30000)
    frame_before = page.locator("#frame").screenshot()
    number_before = int(page.get_attribute("#frame-metrics", "data-frame-number") or 0)
    wait_for(
        lambda: int(page.get_attribute("#frame-metrics", "data-frame-number") or 0) > number_before + 2,
        30,
        "FastLane frames to advance",
    )
    wait_for(lambda: page.locator("#frame").screenshot() != frame_before, 30, "the shown frame to change")
    assert page.locator("#events li.run_started").count() == 1
    page.screenshot(path=str(artifacts / "3-run-live.png"), full_page=True)

    # Cancel through the daemon.
    page.wait_for_selector("#cancel:not([hidden])")
    page.click("#cancel")
    page.wait_for_selector("#events li.run_cancelled", timeout=60000)
    assert page.text_content("#run-status") == "cancelled"
    page.screenshot(path=str(artifacts / "4-cancelled.png"), full_page=True)
    # the return curve is every episode the run recorded (TensorBoard's, read here by its own reader)
    recorded = len(tensorboard_returns(workdir / "var/trainer/runs/browser-ppo"))
    wait_for(lambda: points_of(page, "episodic_return") == recorded, 30, f"the curve's {recorded} episodes")

    # Its curves in the comparison view.
    page.goto(f"{base}/#/compare/browser-ppo")
    page.wait_for_selector('#compare-charts path[data-series="browser-ppo"]')
    page.goto(f"{base}/#/run/browser-ppo")
    page.wait_for_selector("#events li.run_cancelled")

    # The run directory deleted while viewed: a clear notice, and the server keeps serving.
    shutil.rmtree(workdir / "var/trainer/runs/browser-ppo")
    page.wait_for_selector("#notice:has-text('was deleted')", timeout=30000)
    assert page.text_content("#run-status") == "deleted"
    page.goto(f"{base}/#/run/no-such-run")
    wait_for(lambda: "no run no-such-run" in (page.text_content("#notice") or ""), 15, "the unknown-run notice")
    page.screenshot(path=str(artifacts / "5-unknown-run.png"), full_page=True)
    assert script_errors == []
    print(f"screenshots: {artifacts}")


def test_a_browser_without_the_token_is_refused(serve, browser, artifacts):
    _base, server = serve("--host", "0.0.0.0")
    url = server.ready["url"]
    assert server.ready["token_required"] and "?token=" in url
    port = server.ready["port"]
    page = browser.new_page()

    refused = page.goto(f"http://127.0.0.1:{port}/")
    assert refused.status == 401
    assert "needs its token" in page.text_content("body")
    page.screenshot(path=str(artifacts / "1-no-token.png"))
    wrong = page.goto(f"http://127.0.0.1:{port}/?token=not-the-token")
    assert wrong.status == 403 and "wrong token" in page.text_content("body")

    token = url.split("?token=", 1)[1]
    page.goto(f"http://127.0.0.1:{port}/?token={token}")
    page.wait_for_selector("#runs-count:has-text('of 0 runs')")  # the SSE list answered: the cookie works
    assert "token=" not in page.url  # the page dropped it from the address bar
    page.screenshot(path=str(artifacts / "2-with-token.png"))
    print(f"screenshots: {artifacts}")
