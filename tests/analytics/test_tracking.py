"""W&B: flags the script's own parser reads back, the child's environment, the mode rules,
the run-name wrapper around wandb.init, and the manifest section."""

import json
import os
import runpy
import subprocess
import sys
from pathlib import Path

import pytest
import tyro

from mosaic_analytics import plugin, tracking
from mosaic_core.config import build_config
from mosaic_core.runs import RunContext, RunDirectory

SCRIPT = Path(__file__).with_name("tiny_cleanrl.py")
Args = runpy.run_path(str(SCRIPT))["Args"]  # the script's own Args (its __main__ block does not run)


def config(**extras):
    return build_config(
        {"run_id": "r1", "algo": "ppo", "env_id": "CartPole-v1", "total_timesteps": 10, "extras": extras}
    )


@pytest.mark.parametrize(
    "extras",
    [
        {"track_wandb": True, "wandb_project_name": "demo", "wandb_entity": "team"},
        {"track_wandb": False, "wandb_project_name": "--sneaky --total-timesteps 5"},
        {"track_wandb": True, "wandb_entity": "-dash"},
        {"track_wandb": True, "wandb_project": "--sneaky --total-timesteps 5"},
        {},
    ],
)
def test_tracking_settings_become_the_cleanrl_workers_flags_round_trip_through_tyro(extras, tmp_path):
    """The plugin publishes settings, never flags; the CleanRL worker turns them into its own."""
    from cleanrl_worker.launcher import tracking_flags
    from mosaic_core.runs import RunContext, RunDirectory

    assert not hasattr(plugin, "mosaic_build_args")
    published = plugin.mosaic_run_settings(config(**extras)) or []
    run = RunContext(config(**extras), RunDirectory(tmp_path, "r1"), "cleanrl", settings=tuple(published))
    args = tyro.cli(Args, args=tracking_flags(run))
    assert args.track is (extras.get("track_wandb") is True)
    project = extras.get("wandb_project_name") or extras.get("wandb_project")
    assert args.wandb_project_name == (project if args.track and project else Args.wandb_project_name)
    assert args.wandb_entity == (extras.get("wandb_entity") if args.track else None)
    assert args.total_timesteps == Args.total_timesteps  # nothing injected


def test_child_env_puts_wandb_inside_the_run_dir_and_passes_the_key(tmp_path):
    run_dir = tmp_path / "r1"
    env = tracking.child_env(
        run_dir, {"track_wandb": True, "wandb_api_key": "k" * 40, "wandb_run_name": "nice", "notes": "why"}, environ={}
    )
    assert env["WANDB_API_KEY"] == "k" * 40 and env["WANDB_NAME"] == "nice" and env["WANDB_NOTES"] == "why"
    for name in ("WANDB_DIR", "WANDB_CACHE_DIR", "WANDB_DATA_DIR", "WANDB_ARTIFACT_DIR"):
        assert Path(env[name]) == run_dir or run_dir in Path(env[name]).parents
    assert "WANDB_MODE" not in env  # a credential is there: wandb decides
    own = tracking.child_env(run_dir, {}, environ={"WANDB_CACHE_DIR": "/var/cache/mine"})
    assert "WANDB_CACHE_DIR" not in own  # a user's own setting is inherited untouched


def test_a_user_forcing_offline_is_never_overridden(tmp_path):
    for forced in ("offline", "disabled"):
        env = tracking.child_env(
            tmp_path,
            {"track_wandb": True, "wandb_mode": "online", "wandb_api_key": "k" * 40},
            environ={"WANDB_MODE": forced},
        )
        assert "WANDB_MODE" not in env  # the inherited value stays
    env = tracking.child_env(tmp_path, {"track_wandb": True, "wandb_mode": "offline"}, environ={"WANDB_MODE": "online"})
    assert env["WANDB_MODE"] == "offline"


def test_tracking_without_any_credential_runs_offline(tmp_path):
    environ = {"HOME": str(tmp_path), "NETRC": str(tmp_path / "none")}
    assert tracking.child_env(tmp_path, {"track_wandb": True}, environ=environ)["WANDB_MODE"] == "offline"
    (tmp_path / "netrc").write_text("machine api.wandb.ai login user password " + "p" * 40 + "\n")
    environ["NETRC"] = str(tmp_path / "netrc")
    assert "WANDB_MODE" not in tracking.child_env(tmp_path, {"track_wandb": True}, environ=environ)
    assert "WANDB_MODE" not in tracking.child_env(tmp_path, {}, environ={})  # not tracking: untouched


def test_the_hook_contributes_the_child_env(tmp_path):
    run = RunContext(config(wandb_run_name="x"), RunDirectory(tmp_path, "r1"), "cleanrl")
    env = plugin.mosaic_child_env(run)
    assert env["WANDB_DIR"] == str(tmp_path / "r1") and env["WANDB_NAME"] == "x"


WRAPPER_CHECK = """
import json, sys
from pathlib import Path
from mosaic_core.channel import ChannelReceiver, ChannelSender, new_address
from mosaic_core.child import ChildContext
from mosaic_analytics import tracking

got = []
receiver = ChannelReceiver(new_address("wandb-test"), lambda kind, payload: got.append((kind, payload))).start()
child = ChildContext("r1", Path.cwd(), {"wandb_run_name": "chosen"}, ChannelSender(receiver.address))
tracking.install_init_wrapper(child)
import wandb

run = wandb.init(project="p", name="script-name", config={"a": 1})
name = run.name
run.finish()
receiver.close()
print(json.dumps({"name": name, "got": got}))
"""


def test_wandb_init_wrapper_sets_the_requested_name(tmp_path):
    """wandb.init(name=...) from the script beats WANDB_NAME, so the wrapper puts our name in."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("WANDB_")}
    env.update(tracking.child_env(tmp_path, {}, environ={}), WANDB_MODE="offline", WANDB_SILENT="true")
    proc = subprocess.run(
        [sys.executable, "-c", WRAPPER_CHECK], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout.splitlines()[-1])
    assert result["name"] == "chosen"
    ((kind, info),) = result["got"]
    assert kind == tracking.INFO_KIND and info["name"] == "chosen" and info["project"] == "p"
    assert info["offline"] is True and info["dir"].startswith("wandb/offline-run-")
    section = tracking.manifest_section(tmp_path, {"track_wandb": True}, info, environ={"WANDB_MODE": "offline"})
    assert section["run_path"] == f"p/{info['id']}" and section["dir"] == info["dir"]
    assert section["sync_command"] == f"wandb sync {info['dir']}" and section["mode"] == "offline"
    assert [p.name for p in tmp_path.iterdir()] == ["wandb"]  # all of wandb's files in one place


def test_manifest_section_from_the_directory_alone(tmp_path):
    assert tracking.manifest_section(tmp_path, {}, {}, environ={}) is None
    (tmp_path / "wandb" / "offline-run-20250101_000000-abc123").mkdir(parents=True)
    section = tracking.manifest_section(
        tmp_path, {"track_wandb": True, "wandb_project_name": "p", "wandb_entity": "e"}, {}, environ={}
    )
    assert section["run_id"] == "abc123" and section["run_path"] == "e/p/abc123" and section["mode"] == "offline"


def test_wandb_proxy_keys_reach_the_child_env_in_mosaics_order(tmp_path):
    host = {"WANDB_VPN_HTTP_PROXY": "http://vpn:3128", "HTTPS_PROXY": "http://generic:8080", "NO_PROXY": "corp"}
    env = tracking.child_env(tmp_path, {"track_wandb": True, "wandb_use_vpn_proxy": True}, host)
    assert env["WANDB_HTTP_PROXY"] == env["HTTP_PROXY"] == env["http_proxy"] == "http://vpn:3128"
    assert env["WANDB_HTTPS_PROXY"] == env["https_proxy"] == "http://generic:8080"
    assert env["NO_PROXY"] == "corp,localhost,127.0.0.1"
    explicit = {"track_wandb": True, "wandb_https_proxy": "http://mine:1"}
    assert tracking.child_env(tmp_path, explicit, host)["HTTPS_PROXY"] == "http://mine:1"  # extras beat the host
    assert not {"HTTP_PROXY", "WANDB_HTTP_PROXY"} & set(tracking.child_env(tmp_path, {"track_wandb": True}, host))


def test_bad_proxy_keys_are_refused_naming_the_key():
    from mosaic_analytics.extras import validate

    problems = validate({"wandb_use_vpn_proxy": "yes", "wandb_http_proxy": "vpn:3128", "wandb_https_proxy": 3})
    assert any(p.startswith("extras.wandb_use_vpn_proxy: must be true or false") for p in problems)
    assert any(p.startswith("extras.wandb_http_proxy: 'vpn:3128' is not a proxy URL") for p in problems)
    assert any(p.startswith("extras.wandb_https_proxy: must be a non-empty string") for p in problems)
