import torch
from task import input_t, output_t
from utils import make_match_reference


def generate_input(m: int, n: int, k: int, seed: int) -> input_t:
    gen = torch.Generator()
    gen.manual_seed(seed)
    a = torch.empty(m, k, dtype=torch.float32)
    a.uniform_(-1, 1, generator=gen)
    b = torch.empty(k, n, dtype=torch.float32)
    b.uniform_(-1, 1, generator=gen)
    c = torch.empty(m, n, dtype=torch.float32)
    return a, b, c


def ref_kernel(data: input_t) -> output_t:
    a, b, c = data
    return a @ b


check_implementation = make_match_reference(ref_kernel, rtol=1e-04, atol=1e-04)
