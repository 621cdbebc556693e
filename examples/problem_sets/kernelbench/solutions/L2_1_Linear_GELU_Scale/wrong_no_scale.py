import torch
import torch.nn as nn


class ModelNew(nn.Module):
    """Forgets the scale: fast, and wrong."""

    def __init__(self, in_features, out_features, scale):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x):
        return torch.nn.functional.gelu(self.linear(x))
