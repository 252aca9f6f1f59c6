"""The agents of cleanrl_worker.agents: layers exactly as MOSAIC documents them, orthogonal init,
and the bundled PPO building the right one for a checkpoint (old checkpoints included)."""

from __future__ import annotations

import json
from types import SimpleNamespace

import gymnasium as gym
import numpy as np
import pytest
import torch
import torch.nn as nn

from cleanrl_worker.agents.minigrid import CompactMinigridAgent, MinigridAgent, MinigridCNN
from cleanrl_worker.agents.mlp import MLPAgent, SeparateMLPAgent
from cleanrl_worker.algorithms import ppo
from cleanrl_worker.checkpoint import CheckpointError, load_checkpoint, load_policy
from tests.conftest import run_cli

MINIGRID = SimpleNamespace(
    single_observation_space=gym.spaces.Box(0, 255, (7, 7, 3), np.uint8), single_action_space=gym.spaces.Discrete(7)
)
VECTOR = SimpleNamespace(
    single_observation_space=gym.spaces.Box(-1, 1, (4,), np.float32), single_action_space=gym.spaces.Discrete(2)
)


def layers(module):
    """Each leaf layer as (type name, the numbers that define its shape)."""
    described = []
    for layer in module:
        if isinstance(layer, nn.Conv2d):
            described.append(
                ("Conv2d", layer.in_channels, layer.out_channels, layer.kernel_size, layer.stride, layer.padding)
            )
        elif isinstance(layer, nn.Linear):
            described.append(("Linear", layer.in_features, layer.out_features))
        else:
            described.append((type(layer).__name__,))
    return described


def assert_orthogonal(layer, gain):
    weight = layer.weight.detach().reshape(layer.weight.shape[0], -1).double()
    rows, cols = weight.shape
    product = weight @ weight.T if rows <= cols else weight.T @ weight
    assert torch.allclose(product, gain**2 * torch.eye(min(rows, cols), dtype=torch.float64), atol=1e-5)
    assert torch.count_nonzero(layer.bias) == 0


def test_minigrid_agent_has_the_documented_layers():
    agent = MinigridAgent(MINIGRID)
    assert layers(agent.cnn.network) == [
        ("Conv2d", 3, 32, (3, 3), (1, 1), (1, 1)),
        ("ReLU",),
        ("Conv2d", 32, 64, (3, 3), (1, 1), (1, 1)),
        ("ReLU",),
        ("Conv2d", 64, 64, (3, 3), (1, 1), (1, 1)),
        ("ReLU",),
        ("Flatten",),
        ("Linear", 3136, 128),
    ]
    assert layers(agent.actor) == [("Linear", 128, 128), ("ReLU",), ("Linear", 128, 7)]
    assert layers(agent.critic) == [("Linear", 128, 128), ("ReLU",), ("Linear", 128, 1)]
    assert agent.actor is not agent.critic and set(dict(agent.named_children())) == {"cnn", "actor", "critic"}


def test_minigrid_input_is_permuted_and_scaled_to_unit_range():
    cnn = MinigridCNN()
    seen = []
    cnn.network[0].register_forward_pre_hook(lambda _module, inputs: seen.append(inputs[0]))
    obs = torch.tensor(np.stack([np.full((7, 7, 3), [10, 5, 2]), np.zeros((7, 7, 3))]), dtype=torch.float32)
    obs[1, 2, 4] = torch.tensor([8.0, 1.0, 1.0])  # a goal cell (green, state 1) at row 2, column 4
    assert cnn(obs).shape == (2, 128)
    (first_conv_input,) = seen
    assert first_conv_input.shape == (2, 3, 7, 7)
    assert torch.all(first_conv_input[0] == 1.0)  # the largest codes map to 1
    assert first_conv_input.min() == 0.0 and first_conv_input.max() == 1.0
    assert torch.allclose(first_conv_input[1, :, 2, 4], torch.tensor([0.8, 0.2, 0.5]))


def test_minigrid_agent_outputs_and_orthogonal_init():
    agent = MinigridAgent(MINIGRID)
    obs = torch.randint(0, 3, (5, 7, 7, 3)).float()
    action, logprob, entropy, value = agent.get_action_and_value(obs)
    assert action.shape == logprob.shape == entropy.shape == (5,) and value.shape == (5, 1)
    assert agent.get_logits(obs).shape == (5, 7) and agent.get_value(obs).shape == (5, 1)
    for layer in [*agent.cnn.network, agent.actor[0], agent.critic[0]]:
        if isinstance(layer, (nn.Conv2d, nn.Linear)):
            assert_orthogonal(layer, np.sqrt(2))
    assert_orthogonal(agent.actor[2], 0.01)
    assert_orthogonal(agent.critic[2], 1.0)
    assert "cnn.scale" not in agent.state_dict()  # a constant, not a weight


def test_mlp_agent_has_a_shared_trunk_and_separate_heads():
    agent = MLPAgent(VECTOR)
    assert layers(agent.trunk) == [("Linear", 4, 64), ("Tanh",), ("Linear", 64, 64), ("Tanh",)]
    assert (agent.actor.in_features, agent.actor.out_features) == (64, 2)
    assert (agent.critic.in_features, agent.critic.out_features) == (64, 1)
    assert_orthogonal(agent.trunk[0], np.sqrt(2))
    assert_orthogonal(agent.trunk[2], np.sqrt(2))
    assert_orthogonal(agent.actor, 0.01)
    assert_orthogonal(agent.critic, 1.0)
    obs = torch.randn(3, 4)
    agent.get_value(obs).sum().backward()  # the critic trains the trunk, not the actor head
    assert agent.trunk[0].weight.grad is not None and agent.actor.weight.grad is None
    action, logprob, entropy, value = agent.get_action_and_value(obs)
    assert action.shape == (3,) and value.shape == (3, 1) and agent.get_logits(obs).shape == (3, 2)


def test_earlier_networks_keep_their_parameter_names():
    # what checkpoints written before --agent-arch hold
    assert list(SeparateMLPAgent(VECTOR).state_dict()) == [
        f"{net}.{i}.{p}" for net in ("critic", "actor") for i in (0, 2, 4) for p in ("weight", "bias")
    ]
    assert list(CompactMinigridAgent(MINIGRID).state_dict()) == [
        *(f"network.{i}.{p}" for i in (0, 2, 4, 7) for p in ("weight", "bias")),
        "actor.weight",
        "actor.bias",
        "critic.weight",
        "critic.bias",
    ]


@pytest.mark.parametrize(
    "arch, spaces, expected",
    [
        ("documented", MINIGRID, MinigridAgent),
        ("documented", VECTOR, MLPAgent),
        ("original", MINIGRID, CompactMinigridAgent),
        ("original", VECTOR, SeparateMLPAgent),
        ("auto", MINIGRID, MinigridAgent),
        ("auto", VECTOR, SeparateMLPAgent),
    ],
)
def test_ppo_builds_the_agent_its_args_name(arch, spaces, expected):
    assert type(ppo.policy_models(spaces, {"agent_arch": arch})["agent"]) is expected


def test_ppo_defaults_to_auto_and_reads_old_checkpoints_as_original():
    assert ppo.Args().agent_arch == "auto"
    assert type(ppo.policy_models(MINIGRID, {"gamma": 0.99})["agent"]) is CompactMinigridAgent
    assert type(ppo.policy_models(VECTOR, None)["agent"]) is SeparateMLPAgent


# ------------------------------------------------------------------ through `mosaic run` and policy_eval
@pytest.fixture(scope="module")
def minigrid_runs(tmp_path_factory):
    """PPO on MiniGrid-Empty-5x5-v0 for 512 steps, with the default --agent-arch and with `original`."""
    workdir = tmp_path_factory.mktemp("archs")
    results = {}
    for arch in ("documented", "original"):
        chosen = {"agent_arch": arch} if arch == "original" else {}  # the default, auto, picks documented
        results[arch] = run_cli(
            [
                "run",
                "--worker",
                "cleanrl",
                "--algo",
                "ppo",
                "--env-id",
                "MiniGrid-Empty-5x5-v0",
                "--total-timesteps",
                "512",
                "--run-id",
                f"ppo-{arch}",
                "--quiet",
                "--extras",
                json.dumps({**chosen, "num_envs": 2, "num_steps": 128, "save_model": True, "cuda": False}),
            ],
            cwd=workdir,
        )
    return workdir, results


@pytest.mark.parametrize("arch, expected", [("documented", MinigridAgent), ("original", CompactMinigridAgent)])
def test_each_architecture_trains_and_its_checkpoint_evaluates(minigrid_runs, arch, expected):
    workdir, results = minigrid_runs
    assert results[arch].returncode == 0, results[arch].stderr[-3000:]
    runs_root = workdir / "var" / "trainer" / "runs"
    (path,) = (runs_root / f"ppo-{arch}").glob("runs/*/ppo.cleanrl_model")
    ckpt = load_checkpoint(path)
    assert ckpt["args"]["agent_arch"] == arch
    assert list(ckpt["models"]["agent"]) == list(expected(MINIGRID).state_dict())

    evaluated = run_cli(
        [
            "run",
            "--worker",
            "cleanrl",
            "--env-id",
            "MiniGrid-Empty-5x5-v0",
            "--run-id",
            f"eval-{arch}",
            "--quiet",
            "--extras",
            json.dumps({"mode": "policy_eval", "policy_path": str(path), "eval_episodes": 2}),
        ],
        cwd=workdir,
    )
    assert evaluated.returncode == 0, evaluated.stderr[-3000:]
    summary = json.loads((runs_root / f"eval-{arch}" / "eval_summary.json").read_text())
    assert summary["status"] == "completed" and summary["episodes"] == 2
    assert summary["checkpoint"]["agent_arch"] == arch


def test_a_checkpoint_from_before_agent_arch_loads_the_original_network(minigrid_runs, tmp_path):
    workdir, results = minigrid_runs
    assert results["original"].returncode == 0, results["original"].stderr[-3000:]
    (path,) = (workdir / "var" / "trainer" / "runs" / "ppo-original").glob("runs/*/ppo.cleanrl_model")
    ckpt = load_checkpoint(path)
    old = tmp_path / "old.cleanrl_model"  # what the bundled PPO wrote before: no agent_arch in its args
    torch.save({**ckpt, "args": {k: v for k, v in ckpt["args"].items() if k != "agent_arch"}}, old)
    obs = np.random.default_rng(0).integers(0, 6, (8, 7, 7, 3)).astype(np.float32)
    then = load_policy(old, deterministic=True).act(obs)
    assert np.array_equal(then, load_policy(path, deterministic=True).act(obs))
    wrong = tmp_path / "wrong.cleanrl_model"
    torch.save({**ckpt, "args": {**ckpt["args"], "agent_arch": "documented"}}, wrong)
    with pytest.raises(CheckpointError, match="do not fit ppo's agent"):
        load_policy(wrong)
