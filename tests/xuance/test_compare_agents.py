"""Multi-agent runs compare on team return, per agent on request: `mosaic experiment run` of XuanCe's
MAPPO and IQL on simple_spread (2 seeds, tiny budgets), one seed evaluated (`mosaic evaluate`: its
episodes carry per-agent returns); then `mosaic compare` with and without `--agent`. On
simple_spread the team return is the sum of the agents' returns, so each run's team score (as
`--export marl-eval.json` writes it, eval or train) equals the sum of its agents' scores; the
`--agent` table's IQM is rliable's on that agent's scores; the export is marl-eval's raw-data
layout (env → task → algorithm → run → step_i / absolute_metrics)."""

import json
import subprocess

import numpy as np
import pytest
from conftest import MOSAIC, SMALL, SPREAD

pytestmark = pytest.mark.slow  # four XuanCe runs of 800 steps and an evaluation

AGENTS = ("agent_0", "agent_1", "agent_2")
EXTRAS = ", ".join(f"{k} = {json.dumps(v)}" for k, v in SMALL.items())
SPEC = 'name = "spread"\nseeds = [1, 2]\ntotal_timesteps = 800\nparallel = 2\n' + "".join(
    f'[[group]]\nworker = "xuance"\nalgo = "{algo}"\nenv = "{SPREAD}"\nextras = {{ {EXTRAS} }}\n'
    for algo in ("mappo", "iql")
)


def mosaic(args, cwd, env, timeout=600):
    done = subprocess.run(
        [*MOSAIC, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return done


@pytest.fixture(scope="module")
def experiment(xuance_env, tmp_path_factory):
    workdir = tmp_path_factory.mktemp("spread")
    (workdir / "spec.toml").write_text(SPEC)
    root = workdir / "runs"
    mosaic(["experiment", "run", "spec.toml", "--runs-dir", str(root)], workdir, xuance_env)
    evaluated = sorted(d.name for d in root.iterdir() if "-iql-" in d.name)[0]
    mosaic(["evaluate", evaluated, "--episodes", "3", "--runs-dir", str(root)], workdir, xuance_env)
    return workdir, root, evaluated, xuance_env


def exported(workdir, root, env, *args):
    """(the scores by group and run directory order, the marl-eval file, stderr) of one compare."""
    out = workdir / f"marl-eval{'-'.join(args)}.json"
    done = mosaic(
        [
            "compare",
            "spread",
            "--runs-dir",
            str(root),
            "--reps",
            "300",
            "--seed",
            "3",
            "--json",
            "--export",
            str(out),
            *args,
        ],
        workdir,
        env,
    )
    return json.loads(out.read_text()), json.loads(done.stdout), done.stderr


def test_team_scores_are_the_sum_of_the_agents_and_the_table_is_rliables(experiment):
    from rliable import library, metrics

    workdir, root, _evaluated, env = experiment
    team, team_table, team_err = exported(workdir, root, env)
    assert "4 runs in 2 groups; scores: eval 1, train 3" in team_err
    per_agent = {agent: exported(workdir, root, env, "--agent", agent) for agent in AGENTS}
    task = team["mosaic"][SPREAD]
    assert sorted(task) == ["iql mpe/simple_spread_v3", "mappo mpe/simple_spread_v3"]
    for label, runs in task.items():
        assert sorted(runs) == ["run_0", "run_1"]
        for run, data in runs.items():
            agents = [per_agent[a][0]["mosaic"][SPREAD][label][run]["absolute_metrics"]["return"][0] for a in AGENTS]
            assert data["absolute_metrics"]["return"][0] == pytest.approx(sum(agents), abs=1e-4)
            assert all(a > data["absolute_metrics"]["return"][0] for a in agents)  # negative returns

    data, table, err = per_agent["agent_1"]
    assert "scores: eval 1, train 3 (agent agent_1's return" in err
    for label, runs in data["mosaic"][SPREAD].items():
        matrix = np.array([[runs[r]["absolute_metrics"]["return"][0]] for r in sorted(runs)])
        np.random.seed(3)  # rliable draws its bootstrap from numpy's global state
        points, intervals = library.get_interval_estimates(
            {"g": matrix}, lambda x: np.array([metrics.aggregate_iqm(x)]), reps=300
        )
        shown = table["sections"][SPREAD]["groups"][label]["IQM"]
        assert shown["point"] == pytest.approx(points["g"][0], abs=1e-6)
        assert [shown["low"], shown["high"]] == pytest.approx([intervals["g"][0][0], intervals["g"][1][0]], abs=1e-6)
        team_iqm = team_table["sections"][SPREAD]["groups"][label]["IQM"]["point"]
        assert shown["point"] > team_iqm  # one agent's (negative) return is above the team's sum


def test_the_export_is_marl_evals_layout(experiment):
    workdir, root, _evaluated, env = experiment
    data, _table, _err = exported(workdir, root, env, "--agent", "agent_0")
    assert list(data) == ["mosaic"] and list(data["mosaic"]) == [SPREAD]
    counts = set()
    for runs in data["mosaic"][SPREAD].values():
        for steps in runs.values():
            keys = list(steps)
            assert keys[-1] == "absolute_metrics" and list(steps["absolute_metrics"]) == ["return"]
            assert keys[:-1] == [f"step_{i}" for i in range(1, len(keys))]
            counted = [steps[k]["step_count"] for k in keys[:-1]]
            assert all(isinstance(c, int) for c in counted) and counted == sorted(counted) and counted[-1] > 400
            assert all(len(steps[k]["return"]) == 1 and steps[k]["return"][0] < 0 for k in keys[:-1])
            counts.add(tuple(counted))
    assert len(counts) == 1  # one step grid for every run of the task, as marl-eval reads it


def test_an_agent_no_run_has_is_refused_in_one_line(experiment):
    workdir, root, _evaluated, env = experiment
    done = subprocess.run(
        [*MOSAIC, "compare", "spread", "--runs-dir", str(root), "--agent", "agent_9"],
        cwd=workdir,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2 and len(lines) == 1 and "Traceback" not in done.stderr, done.stderr
    assert "--agent agent_9" in lines[0] and "charts/episodic_return/agent_9" in lines[0]
