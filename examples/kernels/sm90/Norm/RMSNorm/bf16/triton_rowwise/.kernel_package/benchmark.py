"""Benchmark of sm90/Norm/RMSNorm/bf16/triton_rowwise: checks the Triton kernel against a float32
torch reference computed from pristine inputs, times it with CUDA events through kz_harness,
compares with the current best and writes the result document to KZ_RESULT_PATH.
"""

from __future__ import annotations

import sys
from pathlib import Path

import torch

from kz_harness import (
    baseline_best,
    bench_gpu,
    compare,
    geomean,
    verdict,
    write_result,
)

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from rmsnorm_triton import rmsnorm

METRIC = {"name": "latency", "unit": "us", "better": "lower"}
MARGIN = 0.03  # a new result must beat the current best by 3 % to be accepted
WORKLOADS = {"t4096_h4096": (4096, 4096), "t16_h8192": (16, 8192)}  # as in desc.yaml
EPS = 1e-6


def make_inputs(shape, seed):
    gen = torch.Generator(device="cuda").manual_seed(seed)
    x = torch.randn(shape, generator=gen, device="cuda", dtype=torch.bfloat16)
    w = torch.rand(shape[1], generator=gen, device="cuda", dtype=torch.bfloat16) + 0.5
    return x, w


def reference(x, w):
    x32 = x.float()
    return x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + EPS) * w.float()


def main() -> int:
    checks, workloads = [], []
    for index, (name, shape) in enumerate(WORKLOADS.items()):
        inputs = make_inputs(shape, seed=index)
        pristine = [t.clone() for t in inputs]
        out = rmsnorm(*inputs)
        torch.cuda.synchronize()
        checks.append(compare(out.float().cpu(), reference(*pristine).cpu(), dtype="bf16",
                              name=name, inputs_before=[t.cpu() for t in pristine],
                              inputs_after=[t.cpu() for t in inputs]))
        stats = bench_gpu(rmsnorm, lambda s=shape, i=index: make_inputs(s, seed=100 + i),
                          budget_s=1.0, unit="us")
        workloads.append({"name": name, "value": stats.median, "stats": stats})
    value = geomean(w["value"] for w in workloads)
    accepted, reason = verdict(all(c.passed for c in checks), value, baseline_best(),
                               better=METRIC["better"], unit=METRIC["unit"], margin=MARGIN)
    environment = {"device": torch.cuda.get_device_name(), "torch": torch.__version__,
                   "cuda": str(torch.version.cuda)}
    write_result(accepted=accepted, reason=reason, metric={**METRIC, "value": value},
                 workloads=workloads, checks=checks, environment=environment)
    print(reason)
    return 0


if __name__ == "__main__":
    sys.exit(main())
