import torch
import torch.nn as nn


class Model(nn.Module):
    """Max over one dimension (the problem's sizes are module constants, as in KernelBench)."""

    def __init__(self, dim: int):
        super().__init__()
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.max(x, dim=self.dim)[0]


batch_size = 4096
features = 65536
dim = 1


def get_inputs():
    x = torch.rand(batch_size, features)
    return [x]


def get_init_inputs():
    return [dim]
