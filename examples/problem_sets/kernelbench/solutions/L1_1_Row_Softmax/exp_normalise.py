import torch
import torch.nn as nn


class ModelNew(nn.Module):
    """Softmax written out: subtract the row maximum, exponentiate in place, divide by the sum."""

    def __init__(self):
        super().__init__()

    def forward(self, x):
        y = x - x.amax(dim=-1, keepdim=True)
        y.exp_()
        return y.div_(y.sum(dim=-1, keepdim=True))
