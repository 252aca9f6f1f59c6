"""`mosaic plot` reads the runs' TensorBoard files back with TensorBoard's own reader and writes a
PNG; `mosaic tensorboard` serves a run on 127.0.0.1. Damaged or missing data: clear messages."""

import json
import os
import re
import shutil
import signal
import subprocess
import urllib.error
import urllib.request

import pytest
from PIL import Image

from mosaic_analytics import curves
from tests.conftest import BIN, run_cli


@pytest.fixture(scope="module")
def plots(finished_runs, tmp_path_factory):
    """A copy of the session's runs plus runs with damaged event files."""
    workdir = tmp_path_factory.mktemp("plots")
    root = workdir / "runs"
    shutil.copytree(finished_runs.root, root)
    for name, damage in (("truncated", "truncate"), ("corrupt", "random")):
        shutil.copytree(root / "done", root / name)
        (event_file,) = [root / name / f for f in curves.event_files(root / name)]
        if damage == "truncate":
            os.truncate(event_file, event_file.stat().st_size * 2 // 3)
        else:
            event_file.write_bytes(os.urandom(4096))
    (root / "empty" / "logs").mkdir(parents=True)
    (root / "empty" / "config.json").write_text("{}")
    return workdir, root


def plot(workdir, root, *args):
    return run_cli(["plot", "--runs-dir", str(root), *args], cwd=workdir)


def test_plot_overlays_runs_into_a_png(plots):
    workdir, root = plots
    result = plot(workdir, root, "done", "stopped", "-o", "curves.png", "--smooth", "5")
    assert result.returncode == 0, result.stderr
    assert re.search(r"done: \d+ points, stopped: \d+ points", result.stderr)
    with Image.open(workdir / "curves.png") as image:
        assert image.format == "PNG" and image.size == (900, 550)
        pixels = image.convert("RGB")
        colors = pixels.getcolors(maxcolors=1 << 20)
    assert len(colors) > 50  # not blank: axes, text, two curves
    top = {rgb for _count, rgb in sorted(colors, reverse=True)[:40]}
    assert any(abs(r - 31) + abs(g - 119) + abs(b - 180) < 30 for r, g, b in top)  # C0, the first run's blue


def test_smoothing_is_a_trailing_mean():
    assert curves.smooth([1, 2, 3, 4], 2) == [1, 1.5, 2.5, 3.5]
    assert curves.smooth([5, 7], 1) == [5, 7]


def test_a_truncated_event_file_is_reported_and_what_was_read_is_plotted(plots):
    workdir, root = plots
    full = curves.read_scalars(root / "done", curves.DEFAULT_TAG)
    cut = curves.read_scalars(root / "truncated", curves.DEFAULT_TAG)
    assert cut.damaged and 0 < len(cut.steps) < len(full.steps) and cut.steps == full.steps[: len(cut.steps)]
    result = plot(workdir, root, "truncated", "-o", "cut.png")
    assert result.returncode == 0 and (workdir / "cut.png").stat().st_size > 0
    assert "truncated/runs/" in result.stderr and "truncated or corrupt" in result.stderr


@pytest.mark.parametrize(
    "args, message",
    [
        (["corrupt"], "run 'corrupt' has only damaged TensorBoard event files"),
        (["empty"], "run 'empty' has no TensorBoard event files; nothing to plot"),
        (
            ["done", "--tag", "charts/nope"],
            "run 'done' has no 'charts/nope' scalars in its 1 TensorBoard event file(s)",
        ),
        (["nope"], "no run 'nope' under"),
        (["done", "-o", "missing/dir/x.png"], "directory missing/dir does not exist"),
        (["done", "-o", "x.jpg"], "the output must be a .png file"),
        (["done", "--smooth", "0"], "--smooth must be >= 1"),
    ],
)
def test_plot_bad_input(plots, args, message):
    workdir, root = plots
    result = plot(workdir, root, *args)
    assert result.returncode == 2, result.stderr
    assert message in result.stderr and "Traceback" not in result.stderr
    assert not (workdir / "x.png").exists()


def _served_runs(workdir, root, *run_ids):
    """The runs a `mosaic tensorboard` serves (asked with its token; refused without)."""
    proc = subprocess.Popen(
        [str(BIN / "mosaic"), "tensorboard", *run_ids, "--runs-dir", str(root), "--port", "0"],
        cwd=workdir,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        url = token = None
        for line in proc.stdout:
            match = re.search(r"(http://127\.0\.0\.1:\d+/)\?token=([\w-]+)", line)
            if match:
                url, token = match.groups()
                break
        assert url, "TensorBoard did not say where it serves"
        with pytest.raises(urllib.error.HTTPError, match="401"):  # every request needs the token
            urllib.request.urlopen(url + "data/runs", timeout=30)
        request = urllib.request.Request(url + "data/runs", headers={"Authorization": f"Bearer {token}"})
        with urllib.request.urlopen(request, timeout=30) as response:
            served = json.loads(response.read())
        with urllib.request.urlopen(f"{url}?token={token}", timeout=30) as response:
            assert response.status == 200
        return served
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
            raise


def test_tensorboard_serves_a_run_or_every_run_on_loopback(plots):
    workdir, root = plots
    served = _served_runs(workdir, root, "done")
    assert len(served) == 1 and served[0].startswith("runs/CartPole-v1__tiny_cleanrl__1__")
    with_events = sorted(d.name for d in root.iterdir() if list(d.rglob("events.out.tfevents.*")))
    assert len(with_events) > 1, with_events  # the fixture has several runs with curves
    every = _served_runs(workdir, root)  # no run named: all of them, each under its id
    shown = {name.split("/", 1)[0] for name in every}  # a damaged file may be left out by TensorBoard itself
    assert {"done", "stopped"} <= shown <= set(with_events), every
    result = run_cli(["mosaic", "tensorboard", "empty", "--runs-dir", str(root)], cwd=workdir)
    assert result.returncode == 2 and "has no TensorBoard event files" in result.stderr
