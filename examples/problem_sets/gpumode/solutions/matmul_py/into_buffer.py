import torch
from task import input_t, output_t


def custom_kernel(data: input_t) -> output_t:
    """The product written straight into the output buffer the task hands over."""
    a, b, c = data
    return torch.matmul(a, b, out=c)
