import torch


def generate_input(world_size: int, size: int, seed: int):
    return torch.rand(size)


def ref_kernel(data):
    return data
