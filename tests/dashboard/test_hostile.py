"""Text from a run is data: run directories written as an attacker would (an imported archive, a
folder copied from someone else) put markup and script in every name the page shows (metric
keys, agent names, worker, algorithm, env id, config values, heartbeat fields, log lines and
log file names, checkpoint names, a failure message), and a real ``mosaic serve`` shows them to a
real Chromium. No script runs (no flag set, no request to the server, not even a blocked attempt:
the markup never becomes elements), each text appears literally, and the page's CSP stops a
script that would have slipped in. Also: an RLlib-style run's directory checkpoints are listed,
a finished run's heartbeat panel shows its end, and a run without frames asks for none."""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

from .conftest import http

# Each payload would set window.__pwned or ask the server for /pwned if it ever ran.
IMG = "<img src=x onerror=\"window.__pwned='img';fetch('/pwned-img')\">"
SCRIPT = "</script><script>window.__pwned='script';fetch('/pwned-script')</script>"
SVG = "<svg onload=\"window.__pwned='svg';fetch('/pwned-svg')\">"
QUOTES = "\"'><b id=bold>bold</b>&amp;"
FILE_NAME = "<img src=x onerror=window.__pwned=1>"  # no "/" in a file name
WATCH = """
window.__violations = [];
document.addEventListener("securitypolicyviolation", e => window.__violations.push(e.violatedDirective));
"""


def write_run(
    root: Path, run_id: str, config: dict, events: list[tuple[str, dict]], files: dict[str, str] | None = None
) -> Path:
    run = root / run_id
    run.mkdir(parents=True, mode=0o700)
    (run / "config.json").write_text(json.dumps(config))
    now = time.time() - 60
    (run / "events.jsonl").write_text(
        "".join(
            json.dumps({"event": name, "run_id": run_id, "seq": i, "timestamp": now + i, "payload": payload}) + "\n"
            for i, (name, payload) in enumerate(events, 1)
        )
    )
    for rel, text in (files or {}).items():
        (run / rel).parent.mkdir(parents=True, exist_ok=True)
        (run / rel).write_text(text)
    return run


def metrics(step: int) -> tuple[str, dict]:
    return "metrics", {
        "global_step": step,
        "episodic_return": float(step),
        "sps": 100,
        "losses": {IMG: 0.5 / step, SCRIPT: 1.0 / step},
        "agents": {SVG: {"charts/episodic_return": step / 2}, QUOTES: {"charts/episodic_return": 1.0}},
    }


def hostile_runs(root: Path) -> None:
    config = {
        "worker": IMG,
        "algo": SCRIPT,
        "env_id": SVG,
        "total_timesteps": 1000,
        "extras": {"experiment_name": IMG, "tags": [SCRIPT, QUOTES], QUOTES: SVG},
    }
    started = ("run_started", {"worker": IMG, "algo": SCRIPT, "env_id": SVG})
    write_run(
        root,
        "hostile",
        config,
        [
            started,
            metrics(100),
            metrics(200),
            ("heartbeat", {"note": IMG, SCRIPT: SVG, "metrics": {"global_step": 200}}),
        ],
        {f"logs/{FILE_NAME}.log": f"{IMG}\n{SCRIPT}\n{SVG}\n", "manifest.json": json.dumps({"notes": SCRIPT})},
    )
    write_run(
        root,
        "hostile-failed",
        config,
        [started, metrics(100), ("run_failed", {"error": f"{IMG} {SCRIPT}"})],
        {f"checkpoints/{FILE_NAME}.pt": "weights"},
    )


def rllib_style_run(root: Path) -> None:
    """Directory checkpoints as the RLlib worker writes them (``checkpoints/step_<N>/``), announced
    with absolute paths from where the run was made (as an imported or copied-back run carries
    them), one of them also listed by the manifest; completed, no heartbeat, no FastLane."""
    files = {}
    for step in (100, 200):
        files[f"checkpoints/step_{step:09d}/rllib_checkpoint.json"] = "{}"
        files[f"checkpoints/step_{step:09d}/mosaic_step.json"] = json.dumps({"global_step": step})
    files["manifest.json"] = json.dumps(
        {
            "schema": "mosaic.manifest/1",
            "status": "completed",
            "checkpoints": {"files": [{"path": "checkpoints/step_000000200", "step": 200, "size_bytes": None}]},
        }
    )
    elsewhere = "/home/someone/var/trainer/runs/dir-checkpoints/checkpoints"
    write_run(
        root,
        "dir-checkpoints",
        {"worker": "rllib", "algo": "PPO", "env_id": "CartPole-v1", "total_timesteps": 200},
        [
            ("run_started", {}),
            ("checkpoint_saved", {"path": f"{elsewhere}/step_000000100", "global_step": 100}),
            ("checkpoint_saved", {"path": f"{elsewhere}/step_000000200", "global_step": 200}),
            ("run_completed", {}),
        ],
        files,
    )


def in_json(text: str) -> str:
    """``text`` as the page shows it inside JSON (config, manifest, event payloads)."""
    return json.dumps(text)[1:-1]


def no_script_ran(page, requests: list[str]) -> None:
    assert page.evaluate("window.__pwned") is None
    assert page.evaluate("window.__violations") == []  # not even an attempt the CSP had to stop
    assert page.evaluate("document.querySelectorAll('#bold, img[src=x], svg[onload], script:not([src])').length") == 0
    assert not [r for r in requests if "/pwned" in r]


def test_hostile_names_from_a_runs_files_are_shown_as_text(serve, browser, artifacts, workdir):
    root = workdir / "var/trainer/runs"
    root.mkdir(parents=True, mode=0o700)
    hostile_runs(root)
    rllib_style_run(root)
    _base, server = serve()
    page = browser.new_page()
    page.add_init_script(WATCH)
    requests: list[str] = []
    failed: list[str] = []
    errors: list[str] = []
    page.on("request", lambda request: requests.append(request.url))
    page.on("response", lambda response: response.status >= 400 and failed.append(f"{response.status} {response.url}"))
    page.on("pageerror", lambda error: errors.append(str(error)))
    page.goto(server.ready["url"])

    # The run list: worker, algorithm and env id from the config.
    page.wait_for_selector('#runs tr[data-run-id="hostile"]')
    row = page.text_content('#runs tr[data-run-id="hostile"]')
    assert IMG in row and SCRIPT in row and SVG in row
    page.screenshot(path=str(artifacts / "1-list.png"), full_page=True)
    no_script_ran(page, requests)

    # A running run: charts and their legends, heartbeat fields, config, manifest, logs.
    page.goto(server.ready["url"].split("?")[0] + "#/run/hostile")
    page.wait_for_selector("#chart-return .legend span")
    legends = page.text_content("#charts")
    for name in (f"losses/{IMG}", f"losses/{SCRIPT}", f"episodic_return@{SVG}", f"episodic_return@{QUOTES}"):
        assert name in legends, name
    assert IMG in page.text_content("#heartbeat") and SVG in page.text_content("#heartbeat")
    assert all(in_json(text) in page.text_content("#config") for text in (IMG, SCRIPT, QUOTES))
    page.wait_for_selector("#logs pre")
    logs = page.text_content("#logs")
    assert f"{FILE_NAME}.log" in logs and IMG in logs and SCRIPT in logs and SVG in logs
    assert in_json(SCRIPT) in page.text_content("#manifest")
    page.screenshot(path=str(artifacts / "2-running.png"), full_page=True)
    no_script_ran(page, requests)

    # A failed run: its failure message, a checkpoint named as markup; its heartbeat panel shows its end.
    page.goto(server.ready["url"].split("?")[0] + "#/run/hostile-failed")
    page.wait_for_selector("#events li.run_failed")
    assert in_json(f"{IMG} {SCRIPT}") in page.text_content("#events li.run_failed")
    page.wait_for_selector(f"#files li:has-text('{FILE_NAME}.pt')")
    assert "run failed" in page.text_content("#heartbeat")
    no_script_ran(page, requests)

    # Comparing: chart titles are metric keys.
    page.goto(server.ready["url"].split("?")[0] + "#/compare/hostile,hostile-failed")
    page.wait_for_selector("#compare-charts .chart h4")
    titles = page.eval_on_selector_all("#compare-charts .chart h4", "nodes => nodes.map(n => n.textContent)")
    assert f"losses/{IMG}" in titles and f"losses/{SCRIPT}" in titles
    page.screenshot(path=str(artifacts / "3-compare.png"), full_page=True)
    no_script_ran(page, requests)

    # Directory checkpoints (RLlib's), a completed run's end in place of "none yet", no frame asked for.
    page.goto(server.ready["url"].split("?")[0] + "#/run/dir-checkpoints")
    page.wait_for_selector("#files li:has-text('checkpoints/step_000000200 (step 200)')")
    assert "checkpoints/step_000000100 (step 100)" in page.text_content("#files")
    page.wait_for_selector("#heartbeat:has-text('run completed')")
    assert "none yet" not in page.text_content("#heartbeat")
    assert page.is_hidden("#frame") and page.text_content("#frame-none") == "no frame yet"
    page.screenshot(path=str(artifacts / "4-directory-checkpoints.png"), full_page=True)

    # The second wall: markup put into the page on purpose still runs no inline script.
    page.evaluate("""() => { const box = document.createElement('div');
        box.innerHTML = `<img src=x onerror="window.__pwned='csp'">`; document.body.append(box); }""")
    page.wait_for_function("window.__violations.length > 0")
    assert page.evaluate("window.__pwned") is None and "script-src-attr" in page.evaluate("window.__violations")
    assert failed == [f"404 {server.ready['url'].split('?')[0]}x"]  # only the planted <img src=x>
    assert errors == []
    print(f"screenshots: {artifacts}")


def test_every_response_carries_the_content_security_policy(serve, workdir):
    root = workdir / "var/trainer/runs"
    root.mkdir(parents=True, mode=0o700)
    rllib_style_run(root)
    base, _server = serve()
    for path, token, status in (
        ("/", True, 200),
        ("/static/app.js", True, 200),
        ("/api/runs", True, 200),
        ("/api/runs/dir-checkpoints/files", True, 200),
        ("/api/runs/nope/files", True, 404),
        ("/nowhere", True, 404),
        ("/", False, 401),
    ):
        got, headers, _body = http(base + path, token=token)
        headers = {k.lower(): v for k, v in headers.items()}
        assert got == status, path
        policy = dict(part.strip().split(" ", 1) for part in headers["content-security-policy"].split(";"))
        assert policy["script-src"] == "'self'" and policy["object-src"] == "'none'", path
        assert policy["base-uri"] == "'none'" and policy["frame-ancestors"] == "'none'", path
        assert headers["x-content-type-options"] == "nosniff", path
    # The page itself: no inline script, no inline handler, scripts only from /static.
    page = http(base + "/")[2].decode()
    assert not re.search(r"<[^>]*\s(on\w+|style)\s*=", page, re.IGNORECASE)
    for tag in page.split("<script")[1:]:
        assert tag.lstrip().startswith('src="/static/') and tag.split(">", 1)[1].startswith("</script>")
    status, _h, body = http(base + "/api/runs/dir-checkpoints/files")
    listed = [(c["path"], c["step"]) for c in json.loads(body)["checkpoints"]]
    assert listed == [("checkpoints/step_000000100", 100), ("checkpoints/step_000000200", 200)]
