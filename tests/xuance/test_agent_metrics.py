"""A multi-agent run's per-agent values in the host's views (no XuanCe needed): the dashboard's
series, ``mosaic runs show`` and ``mosaic plot --agents`` (TAG/AGENT TensorBoard scalars)."""

import json
import subprocess
import sys

import pytest

from mosaic_dashboard.curves import Curves


def test_dashboard_draws_each_agent_beside_the_team():
    curves = Curves()
    new = curves.add(
        {
            "global_step": 5,
            "episodic_return": -3.0,
            "agents": {"agent_0": {"charts/episodic_return": -1.0}, "agent_1": {"losses/x": 2.0}},
        }
    )
    assert new == {"episodic_return": [5, -3.0], "episodic_return@agent_0": [5, -1.0]}


def _fake_run(root, run_id):
    """A run directory as a multi-agent worker leaves it: config, manifest, TensorBoard scalars."""
    tensorboardX = pytest.importorskip("tensorboardX")
    run = root / run_id
    run.mkdir(parents=True)
    (run / "config.json").write_text(
        json.dumps(
            {
                "run_id": run_id,
                "worker": "xuance",
                "algo": "mappo",
                "env_id": "mpe/simple_spread_v3",
                "total_timesteps": 100,
            }
        )
    )
    (run / "manifest.json").write_text(
        json.dumps(
            {
                "status": "completed",
                "metrics": {
                    "global_step": 100,
                    "episodic_return": -30.0,
                    "agents": {
                        "agent_0": {"charts/episodic_return": -9.5},
                        "agent_1": {"charts/episodic_return": -10.5},
                    },
                },
            }
        )
    )
    writer = tensorboardX.SummaryWriter(str(run / "tb"))
    for step in range(0, 100, 10):
        writer.add_scalar("charts/episodic_return", -30.0 + step / 10, step)
        writer.add_scalar("charts/episodic_return/agent_0", -10.0 + step / 10, step)
        writer.add_scalar("charts/episodic_return/agent_1", -11.0 + step / 10, step)
    writer.close()
    return run


def test_runs_show_and_plot_per_agent(tmp_path):
    pytest.importorskip("matplotlib")
    _fake_run(tmp_path / "runs", "ma-run")
    mosaic = [sys.executable, "-m", "mosaic_core.cli.main"]
    shown = subprocess.run(
        [*mosaic, "runs", "show", "ma-run", "--runs-dir", str(tmp_path / "runs")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert shown.returncode == 0, shown.stderr
    assert "agent_0" in shown.stdout and "episodic_return -9.50" in shown.stdout
    out = tmp_path / "agents.png"
    plotted = subprocess.run(
        [*mosaic, "plot", "ma-run", "--agents", "-o", str(out), "--runs-dir", str(tmp_path / "runs")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert plotted.returncode == 0, plotted.stderr
    assert out.stat().st_size > 1000 and "10 points" in plotted.stderr
    from mosaic_analytics.curves import read_agent_scalars

    agents = read_agent_scalars(tmp_path / "runs" / "ma-run", "charts/episodic_return", label="ma-run")
    assert [c.label for c in agents] == ["ma-run agent_0", "ma-run agent_1"]
    assert agents[1].values[0] == -11.0 and len(agents[1].steps) == 10
