import torch
import torch.nn as nn


class Model(nn.Module):
    """Conv, then LayerNorm over the last axis, whose size equals out_channels only by the
    problem's choice of sizes (scaling the sizes apart breaks it; scaling them together does not)."""

    def __init__(self, in_channels, out_channels, norm_shape):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, 1)
        self.norm = nn.LayerNorm(norm_shape)

    def forward(self, x):
        return self.norm(self.conv(x))


batch_size = 64
in_channels = 32
out_channels = 128
height, width = 32, 128
norm_shape = (out_channels,)


def get_inputs():
    return [torch.rand(batch_size, in_channels, height, width)]


def get_init_inputs():
    return [in_channels, out_channels, norm_shape]
