"""`mosaic runs card`, for real: a 2-seed CleanRL PPO experiment on CartPole, then its model card:
the Hub's front matter (library, tags, model-index with the env as dataset and the IQM as metric,
equal to what `mosaic compare` prints for the same seeds), the newest checkpoint and config beside
it, the evaluation protocol from eval.json once `mosaic evaluate` made one, and run text that
cannot break the front matter or the Markdown."""

from __future__ import annotations

import json
import shutil

import pytest
import yaml

from mosaic_core.events import read_events
from tests.conftest import run_cli

SPEC = """
name = "carded"
seeds = [1, 2]
total_timesteps = 1024

[[group]]
worker = "cleanrl"
algo = "ppo"
env = "CartPole-v1"
overrides = { learning_rate = 0.001 }
"""
HOSTILE = "evil: x\n---\nlibrary_name: injected\n# [click](http://x) <b>*"
ONE_LINE = ": x --- library_name: injected # [click](http://x) <b>* '\" &"  # the host refuses newlines here


def split(card: str) -> tuple[dict, str]:
    """The front matter (parsed) and the body; the card must open with exactly one front matter."""
    assert card.startswith("---\n"), card[:200]
    head, sep, body = card[4:].partition("\n---\n")
    assert sep, card[:500]
    return yaml.safe_load(head), body


@pytest.fixture(scope="module")
def experiment(tmp_path_factory):
    workdir = tmp_path_factory.mktemp("card")
    (workdir / "spec.toml").write_text(SPEC)
    root = workdir / "runs"
    result = run_cli(["experiment", "run", "spec.toml", "--runs-dir", str(root)], cwd=workdir, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    return workdir, root


@pytest.mark.slow
def test_an_experiments_card_has_the_hubs_front_matter_and_compares_iqm(experiment):
    workdir, root = experiment
    made = run_cli(["runs", "card", "carded", "-o", "card", "--runs-dir", str(root)], cwd=workdir, timeout=300)
    assert made.returncode == 0, made.stderr[-3000:]
    meta, body = split((workdir / "card" / "README.md").read_text())
    assert meta["library_name"] == "mosaic-cleanrl"
    assert {"reinforcement-learning", "cleanrl", "ppo", "CartPole-v1"} <= set(meta["tags"])
    (result,) = meta["model-index"][0]["results"]
    assert result["dataset"] == {"type": "CartPole-v1", "name": "CartPole-v1"}
    metrics = {m["type"]: m for m in result["metrics"]}

    shown = run_cli(["compare", "carded", "--runs-dir", str(root), "--json"], cwd=workdir, timeout=300)
    assert shown.returncode == 0, shown.stderr[-3000:]
    (group,) = json.loads(shown.stdout)["sections"]["CartPole-v1"]["groups"].values()
    iqm = group["IQM"]
    assert metrics["iqm_return"]["value"] == pytest.approx(iqm["point"], abs=1e-4)
    assert f"over 2 seeds, 95% CI [{iqm['low']:.2f}, {iqm['high']:.2f}]" in metrics["iqm_return"]["name"]
    assert f"| IQM | {iqm['point']:.2f} [{iqm['low']:.2f}, {iqm['high']:.2f}] |" in body

    # the model: the newest checkpoint of the exported seed, byte for byte, and its config
    config = json.loads((workdir / "card" / "config.json").read_text())
    run_dir = root / config["run_id"]
    (copied,) = (workdir / "card").glob("step_*")
    newest = max(run_dir.glob("checkpoints/step_*"), key=lambda p: int(p.name.split("_")[1].split(".")[0]))
    assert copied.name == newest.name and copied.read_bytes() == newest.read_bytes()
    assert "learning\\_rate | 0.001" in body
    # CleanRL's evaluation of the model it saves at the end is the run's evaluation (its eval.json)
    assert "The run's own evaluation of its saved model" in body and "10 episodes, stochastic actions" in body
    assert "--total-timesteps 1024 --seed " in body and "learning_rate" in body.split("```bash")[1]
    assert f"run {run_dir.name}, {newest.name}: wrote" in made.stderr and "huggingface-cli upload" in made.stderr

    # after `mosaic evaluate` of the same checkpoint, the card states that newer evaluation's protocol
    evaluated = run_cli(
        ["evaluate", run_dir.name, "--episodes", "3", "--runs-dir", str(root)], cwd=workdir, timeout=300
    )
    assert evaluated.returncode == 0, evaluated.stderr[-3000:]
    again = run_cli(["runs", "card", run_dir.name, "-o", "card2", "--runs-dir", str(root)], cwd=workdir, timeout=300)
    assert again.returncode == 0, again.stderr[-3000:]
    meta2, body2 = split((workdir / "card2" / "README.md").read_text())
    assert "`mosaic evaluate` of the checkpoint" in body2 and "3 episodes" in body2 and "normalisation frozen" in body2
    assert any(m["type"] == "iqm_return" for m in meta2["model-index"][0]["results"][0]["metrics"])


@pytest.mark.slow
def test_run_text_cannot_break_the_front_matter_or_the_markdown(experiment, tmp_path):
    workdir, root = experiment
    source = next(d for d in root.iterdir() if (d / "config.json").is_file())
    hostile_root = tmp_path / "runs"
    run_dir = hostile_root / "hostile"
    shutil.copytree(source, run_dir, symlinks=True)  # a run file someone else wrote (an imported run)
    config = json.loads((run_dir / "config.json").read_text())
    config.update(run_id="hostile", env_id="CartPole-v1" + ONE_LINE)  # (an unknown algo: no checkpoint layout)
    config["extras"]["algo_params"]["evil: k\n---"] = HOSTILE
    config["extras"]["notes"] = HOSTILE
    (run_dir / "config.json").write_text(json.dumps(config))
    made = run_cli(["runs", "card", "hostile", "-o", "card", "--runs-dir", str(hostile_root)], cwd=tmp_path)
    assert made.returncode == 0, made.stderr[-3000:]
    card = (tmp_path / "card" / "README.md").read_text()
    meta, body = split(card)
    assert set(meta) == {"library_name", "tags", "model-index"} and meta["library_name"] == "mosaic-cleanrl"
    assert meta["tags"][-2:] == ["ppo", "CartPole-v1" + ONE_LINE]  # kept as values, whole
    assert meta["model-index"][0]["results"][0]["dataset"]["type"] == "CartPole-v1" + ONE_LINE
    lines = body.splitlines()
    assert "---" not in lines and not any(line.startswith("library_name") for line in lines)
    headings = [line for line in lines if line.startswith("#")]
    assert headings == [headings[0], "## Evaluation", "## Hyperparameters", "## Reproduce"], headings
    prose, fence = body.split("```bash\n")
    assert "[click](" not in prose and "<b>" not in prose  # escaped; in the command, verbatim (a code block)
    assert len(fence.splitlines()) == 2 and fence.splitlines()[0].startswith("mosaic run ")
    assert read_events(run_dir / "events.jsonl")[-1]["event"] == "run_completed"
    assert "Notes: evil: x?---?library\\_name: injected?\\# \\[click\\]\\(http://x\\) \\<b\\>\\*" in body

    config["env_id"] = "CartPole-v1" + HOSTILE  # a newline where the host allows none: refused, nothing written
    (run_dir / "config.json").write_text(json.dumps(config))
    refused = run_cli(["runs", "card", "hostile", "-o", "card2", "--runs-dir", str(hostile_root)], cwd=tmp_path)
    assert refused.returncode == 2 and len(refused.stderr.strip().splitlines()) == 1, refused.stderr
    assert "control character" in refused.stderr and not (tmp_path / "card2").exists()
