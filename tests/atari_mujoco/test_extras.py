"""The envpool, jax, dm-control and procgen extras: bundled algorithms on EnvPool's Atari, DM Control
and Procgen, and upstream-style scripts run unmodified from a checkout through `mosaic run`, each for
a few hundred steps with its returns read back. Skipped where the extra is not installed (CI builds
them in their own venv: `make test-extras`).

The checkout is `MOSAIC_CLEANRL_HOME` when it names one (a real upstream CleanRL, run by hand),
else `fixture_checkout/` (scripts written here that import what the upstream ones do)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from cleanrl_worker.readiness import missing_extras
from mosaic_core.events import metric_steps, one_history
from tests.conftest import ctrl_c_half_way

from .conftest import MOSAIC, completed, extra_missing, finish, mosaic_command, scalars, start, wait_for_frame

FIXTURE_CHECKOUT = Path(__file__).with_name("fixture_checkout")
CHECKOUT = Path(os.environ.get("MOSAIC_CLEANRL_HOME") or FIXTURE_CHECKOUT)
SMALL_PPO = {"num_envs": 4, "num_steps": 64, "update_epochs": 1}


def returns_of(run_dir: Path) -> list[float]:
    return [value for _, value in scalars(run_dir).get("charts/episodic_return", [])]


@extra_missing("envpool", "envpool")
@pytest.mark.slow
def test_bundled_ppo_atari_envpool_trains_with_fastlane_frames(workdir):
    proc = start(
        workdir, *mosaic_command("envpool", "ppo_atari_envpool", "Pong-v5", 1024, {**SMALL_PPO, "fastlane": True})
    )
    frame = wait_for_frame("envpool", proc)
    events = completed(proc)
    assert frame.pixels.shape == (84, 84, 3)  # the newest of the four stacked frames, through publish_frame
    bridged = [e["payload"] for e in events if e["event"] == "metrics"]
    assert bridged and max(p["global_step"] for p in bridged) <= 1024
    tags = scalars(workdir / "var/trainer/runs/envpool")
    assert {"charts/SPS", "losses/value_loss", "losses/policy_loss"} <= set(tags)


@extra_missing("envpool", "envpool")
@pytest.mark.slow
def test_bundled_ppo_atari_envpool_follows_a_curriculum(workdir):
    schedule = [{"env_id": "ALE/Pong-v5", "until": "steps>=256"}, {"env_id": "ALE/Pong-v5"}]
    proc = start(
        workdir,
        *mosaic_command(
            "envpool-cur",
            "ppo_atari_envpool",
            "ALE/Pong-v5",
            768,  # float32 here,
            {**SMALL_PPO, "curriculum_schedule": schedule, "bf16": False},
        ),
    )  # bf16 above
    stages = [e["payload"] for e in completed(proc) if e["event"] == "curriculum_stage"]
    assert [s["stage"] for s in stages] == [0, 1] and stages[1]["condition"] == "steps>=256"
    manifest = json.loads((workdir / "var/trainer/runs/envpool-cur/manifest.json").read_text())["curriculum"]
    assert manifest["stage"] == 1 and manifest["progress"][1]["steps"] > 0


@extra_missing("shimmy", "dm-control")
@pytest.mark.slow
def test_bundled_algorithms_train_on_dm_control(workdir):
    proc = start(
        workdir,
        *mosaic_command("dmc", "ppo_continuous_action", "dm_control/cartpole-balance-v0", 2048, {"num_steps": 1024}),
    )
    completed(proc)
    returns = returns_of(workdir / "var/trainer/runs/dmc")  # cartpole-balance: 1000-step episodes
    assert len(returns) >= 2 and all(0 <= r <= 1000 for r in returns)


@extra_missing("procgen", "procgen")
@pytest.mark.slow
def test_bundled_ppo_procgen_trains_on_procgen(workdir):
    proc = start(
        workdir, *mosaic_command("procgen", "ppo_procgen", "procgen-coinrun-v0", 512, {**SMALL_PPO, "fastlane": True})
    )
    frame = wait_for_frame("procgen", proc)
    completed(proc)
    assert frame.pixels.ndim == 3 and frame.pixels.shape[2] == 3
    assert {"charts/SPS", "losses/value_loss"} <= set(scalars(workdir / "var/trainer/runs/procgen"))


# The two bundled algorithms whose envs' state cannot be saved still end a stop resumable: Ctrl-C half way
# with both cores busy saves a checkpoint, and `mosaic resume` completes the run (fresh episodes after it).
STOPPED = [
    pytest.param("ppo_atari_envpool", "Pong-v5", marks=extra_missing("envpool", "envpool"), id="ppo_atari_envpool"),
    pytest.param("ppo_procgen", "procgen-coinrun-v0", marks=extra_missing("procgen", "procgen"), id="ppo_procgen"),
]


@pytest.mark.slow
@pytest.mark.parametrize("attempt", range(int(os.environ.get("MOSAIC_STOP_REPEAT", "1"))))  # 20 before a release
@pytest.mark.parametrize("algo, env_id", STOPPED)
def test_a_stop_under_load_ends_resumable_and_resume_completes(workdir, busy_cores, algo, env_id, attempt):
    # each iteration's step reported as it ends, and 8 of 16 iterations left after the trigger: an
    # EnvPool run does 2,048 steps in a second or two, which a 1 s report interval could use up
    total, run_dir = 4096, workdir / "var/trainer/runs/halt"
    extras = {**SMALL_PPO, "metrics_interval_s": 0.05}
    host = start(workdir, *mosaic_command("halt", algo, env_id, total, extras, "--json"))
    err = ctrl_c_half_way(host, run_dir, total, busy_cores)
    end = json.loads((run_dir / "events.jsonl").read_text().splitlines()[-1])
    assert host.returncode == 130 and end["event"] == "run_cancelled", (end, err[-3000:])
    assert end["payload"]["resumable"] is True and Path(end["payload"]["checkpoint"]).exists(), end
    assert total // 2 <= end["payload"]["from_step"] < total, end

    events, err = finish(start(workdir, str(MOSAIC), "resume", "halt", "--json", "--quiet"))
    assert events[-1]["event"] == "run_completed", err[-3000:]
    assert f"from step {end['payload']['from_step']}" in err
    steps = metric_steps(one_history(events))
    assert steps == sorted(steps) and steps[-1] <= total, steps


# (name, env id, total steps, extras): a few hundred steps of each script that installs here. Upstream's
# EnvPool scripts are not among them: they speak envpool<0.7's old gym API (see cleanrl_worker.readiness).
UPSTREAM = [
    ("dqn_jax", "CartPole-v1", 500, {}),
    ("ppo_procgen", "starpilot", 512, {"num_envs": 4}),
]
EXTRAS_OF = {"dqn_jax": ("jax",), "ppo_procgen": ("procgen",)}


@pytest.mark.slow
@pytest.mark.parametrize("name, env_id, total, extras", UPSTREAM, ids=[case[0] for case in UPSTREAM])
def test_upstream_scripts_run_unmodified_from_a_checkout(workdir, name, env_id, total, extras):
    missing = missing_extras(EXTRAS_OF[name])
    if missing:
        pytest.skip(f"needs the {', '.join(missing)} extra")
    if not (CHECKOUT / "cleanrl" / f"{name}.py").is_file():
        pytest.skip(f"{CHECKOUT} has no cleanrl/{name}.py")
    command = [part for part in mosaic_command(name, name, env_id, total, extras)]
    command[-1] = json.dumps(extras)  # no "cuda": the JAX scripts have no such flag
    proc = start(workdir, *command, env={"MOSAIC_CLEANRL_HOME": str(CHECKOUT)})
    events = completed(proc)
    started = next(e["payload"] for e in events if e["event"] == "run_started")
    assert str(CHECKOUT) in json.dumps(started)  # the checkout's script ran, not a bundled one
    tags = scalars(workdir / f"var/trainer/runs/{name}")
    assert "charts/episodic_return" in tags or name == "ppo_procgen", sorted(tags)
