import torch
import torch.nn as nn


class ModelNew(nn.Module):
    """The same layer, then GELU and the scale in place on the product (one allocation)."""

    def __init__(self, in_features, out_features, scale):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)
        self.scale = scale

    def forward(self, x):
        y = torch.addmm(self.linear.bias, x, self.linear.weight.t())
        return torch.nn.functional.gelu(y).mul_(self.scale)
