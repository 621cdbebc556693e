import torch
import torch.nn as nn


class Model(nn.Module):
    """
    A linear layer, then GELU, then a constant scale: three operations a fused kernel can do
    in one pass over the output.
    """

    def __init__(self, in_features, out_features, scale):
        super(Model, self).__init__()
        self.linear = nn.Linear(in_features, out_features)
        self.scale = scale

    def forward(self, x):
        x = self.linear(x)
        x = torch.nn.functional.gelu(x)
        return x * self.scale


batch_size = 256
in_features = 1024
out_features = 1024
scale = 0.5


def get_inputs():
    return [torch.randn(batch_size, in_features)]


def get_init_inputs():
    return [in_features, out_features, scale]
