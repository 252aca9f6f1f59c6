"""Orthogonal initialisation, as in CleanRL's PPO (one helper for every bundled agent)."""

import numpy as np
import torch


def layer_init(layer, std=np.sqrt(2), bias_const=0.0):
    """Orthogonal weights with gain ``std``, constant bias; returns the layer."""
    torch.nn.init.orthogonal_(layer.weight, std)
    torch.nn.init.constant_(layer.bias, bias_const)
    return layer
