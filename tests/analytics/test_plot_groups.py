"""`mosaic plot --group seed`: runs that differ only in their seed are one group, drawn as a mean
line with a ± std (or min–max) band; `--table` prints each group's runs' scores (runstore.score), mean ± sample std.
Runs are made here as a runs root with config.json and real TensorBoard event files
(tensorboardX writes them, TensorBoard's own reader reads them back)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from PIL import Image

from mosaic_analytics import curves
from tests.conftest import run_cli


def make_run(root: Path, run_id: str, seed: int, lr: float, env_id: str, values: list[float], every: int = 100):
    from tensorboardX import SummaryWriter

    run_dir = root / run_id
    (run_dir / "logs").mkdir(parents=True)
    config = {
        "run_id": run_id,
        "algo": "ppo",
        "env_id": env_id,
        "total_timesteps": every * len(values),
        "seed": seed,
        "worker_id": None,
        "worker": "cleanrl",
        "argv": ["--seed", str(seed)],
        "extras": {"algo_params": {"learning_rate": lr}, "optuna_seed": seed},
    }
    (run_dir / "config.json").write_text(json.dumps(config))
    writer = SummaryWriter(str(run_dir / "runs" / run_id))
    for index, value in enumerate(values):
        writer.add_scalar(curves.DEFAULT_TAG, value, (index + 1) * every + seed)  # steps differ per seed
    writer.close()


@pytest.fixture(scope="module")
def seeds(tmp_path_factory):
    workdir = tmp_path_factory.mktemp("groups")
    root = workdir / "runs"
    for seed, level in ((1, 10.0), (2, 20.0), (3, 30.0)):
        make_run(root, f"slow-s{seed}", seed, 1e-3, "CartPole-v1", [level] * 30)
    for seed, level in ((1, 100.0), (2, 110.0)):
        make_run(root, f"fast-s{seed}", seed, 1e-2, "CartPole-v1", [level] * 30)
    make_run(root, "acro-s1", 1, 1e-3, "Acrobot-v1", [-80.0] * 30)
    return workdir, root


def plot(workdir, root, *args):
    return run_cli(["plot", "--runs-dir", str(root), *args], cwd=workdir)


def test_table_gives_final_mean_and_std_per_seed_group(seeds):
    workdir, root = seeds
    result = plot(workdir, root, "--group", "seed", "--table", "slow-s1", "fast-s1", "slow-s2", "slow-s3", "fast-s2")
    assert result.returncode == 0, result.stderr
    rows = [line for line in result.stdout.splitlines() if line.startswith("ppo")]
    assert re.match(r"ppo CartPole-v1 learning_rate=0\.001\s+3\s+20\.00 ± 10\.00\s+10\.00\s+30\.00$", rows[0])
    assert re.match(r"ppo CartPole-v1 learning_rate=0\.01\s+2\s+105\.00 ± 7\.07\s+100\.00\s+110\.00$", rows[1])
    assert not (workdir / "curves.png").exists()  # --table alone writes no picture


def test_group_plot_draws_a_band_per_group(seeds):
    workdir, root = seeds
    result = plot(
        workdir,
        root,
        "--group",
        "seed",
        "slow-s1",
        "slow-s2",
        "slow-s3",
        "fast-s1",
        "fast-s2",
        "-o",
        "bands.png",
        "--band",
        "minmax",
    )
    assert result.returncode == 0, result.stderr
    assert "learning_rate=0.001: 3 runs" in result.stderr and "learning_rate=0.01: 2 runs" in result.stderr
    with Image.open(workdir / "bands.png") as image:
        colors = {rgb for _n, rgb in image.convert("RGB").getcolors(maxcolors=1 << 20)}
    assert any(abs(r - 31) + abs(g - 119) + abs(b - 180) < 20 for r, g, b in colors)  # C0 mean line
    assert any(abs(r - 255) + abs(g - 127) + abs(b - 14) < 20 for r, g, b in colors)  # C1 mean line


def test_group_by_env(seeds):
    workdir, root = seeds
    result = plot(workdir, root, "--group", "env", "--table", "slow-s1", "slow-s2", "acro-s1")
    assert result.returncode == 0, result.stderr
    assert re.search(r"^CartPole-v1\s+2\s+15\.00 ± 7\.07", result.stdout, re.M)
    assert re.search(r"^Acrobot-v1\s+1\s+-80\.00 ± 0\.00", result.stdout, re.M)


def test_table_needs_group(seeds):
    workdir, root = seeds
    result = plot(workdir, root, "--table", "slow-s1")
    assert result.returncode == 2 and "--table needs --group" in result.stderr


def test_aggregate_aligns_runs_on_the_steps_they_share():
    a = curves.Curve("a", steps=[0, 10, 20, 30], values=[0.0, 10.0, 20.0, 30.0])
    b = curves.Curve("b", steps=[5, 25], values=[5.0, 25.0])
    band = curves.aggregate("g", [a, b], window=1)
    assert band.steps[0] == 5 and band.steps[-1] == 25 and band.runs == 2
    assert band.mean == pytest.approx(band.steps)  # both are y = x, interpolated
    assert max(band.std) == pytest.approx(0.0, abs=1e-9)
    assert band.finals == [30.0, 25.0]
