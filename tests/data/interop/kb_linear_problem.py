import torch
import torch.nn as nn


class Model(nn.Module):
    """y = x @ W^T + b (nn.Linear)."""

    def __init__(self, in_features: int, out_features: int):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x):
        return self.linear(x)


def get_inputs():
    return [torch.randn(16, 64)]


def get_init_inputs():
    return [64, 32]
