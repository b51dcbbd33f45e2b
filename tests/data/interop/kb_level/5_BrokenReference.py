import torch
import torch.nn as nn


class Model(nn.Module):
    """A reference that fails on its own inputs: a workload problem, not a kernel one."""

    def __init__(self):
        super().__init__()

    def forward(self, a, b):
        return a @ b


M = 4096
K = 2048


def get_inputs():
    return [torch.rand(M, K), torch.rand(M, K)]


def get_init_inputs():
    return []
