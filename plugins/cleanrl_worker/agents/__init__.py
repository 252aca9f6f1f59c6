"""The bundled PPO's networks, importable on their own (MOSAIC's documented ``cleanrl_worker.agents``).

- :mod:`cleanrl_worker.agents.minigrid`: :class:`~cleanrl_worker.agents.minigrid.MinigridAgent`
  (MOSAIC's documented CNN for MiniGrid/BabyAI 7x7x3 images) and
  :class:`~cleanrl_worker.agents.minigrid.CompactMinigridAgent` (the smaller CNN the bundled
  PPO used before).
- :mod:`cleanrl_worker.agents.mlp`: :class:`~cleanrl_worker.agents.mlp.MLPAgent` (MOSAIC's
  documented shared-trunk MLP) and :class:`~cleanrl_worker.agents.mlp.SeparateMLPAgent`
  (CleanRL ppo.py's two separate MLPs, which the bundled PPO used before).

Every agent takes the vector env (only ``single_observation_space`` and
``single_action_space`` are read) and offers the interface the bundled PPO calls:
``get_value(x)``, ``get_logits(x)`` and ``get_action_and_value(x, action=None)``.
``ARCHITECTURES`` names the two families the PPO script's ``--agent-arch`` chooses from
(``original``: the networks the bundled PPO had first; ``auto``: the one that learns better
for the observation kind).
"""

ARCHITECTURES = ("documented", "original")
