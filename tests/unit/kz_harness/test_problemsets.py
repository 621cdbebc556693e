"""The judge of an imported problem (kz_harness.problemsets): inputs drawn the set's way from
the secret seed, the set's own reference, and what every worker is told at LOAD."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from kz_harness.errors import HarnessError
from kz_harness.judge import Benchmark
from kz_harness.problemsets import problem_benchmark
from kz_problems import read_set

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.unit

SETS = Path(__file__).resolve().parents[3] / "examples" / "problem_sets"


@pytest.fixture(autouse=True)
def imports() -> Iterator[None]:
    """The problem's modules a judge installs, taken away after each test."""
    meta, modules = list(sys.meta_path), set(sys.modules)
    yield
    sys.meta_path[:] = meta
    for name in set(sys.modules) - modules:
        del sys.modules[name]


def _benchmark(fmt: str, problem_id: str, **changes: Any) -> Benchmark:
    problems, _ = read_set(fmt, SETS / fmt)
    problem = next(p for p in problems if p.problem_id == problem_id)
    return problem_benchmark({**problem.judge, "device": "cpu", **changes}, problem.sources)


def _draw(bench: Benchmark, seed: int, workload: int = 0) -> tuple[Any, ...]:
    return bench.make_inputs(bench.workloads[workload], np.random.default_rng(seed))


@pytest.mark.parametrize(
    ("fmt", "problem_id"),
    [("kernelbench", "level2/1_Linear_GELU_Scale"), ("gpumode", "kz_demo/matmul_py"),
     ("flashinfer", "rmsnorm_h4096")],
)  # fmt: skip
def test_inputs_come_from_the_secret_seed(fmt: str, problem_id: str) -> None:
    """The same secret seed draws the same inputs, another seed others: nothing fixed. (GPU
    MODE's output buffer is `torch.empty`, as the set makes it: whatever memory held.)"""
    bench = _benchmark(fmt, problem_id)
    first, again, other = _draw(bench, 1), _draw(bench, 1), _draw(bench, 2)
    drawn = slice(0, 2) if fmt == "gpumode" else slice(None)
    assert all(np.array_equal(a, b) for a, b in zip(first[drawn], again[drawn], strict=True))
    assert not np.array_equal(first[0], other[0])
    assert all(type(a) is np.ndarray and a.flags.c_contiguous for a in first)


def test_kernelbench_weights_come_from_the_public_init_seed() -> None:
    """Two judges of one problem build the same model (the init seed is the board's, not the
    task's), tell every worker that seed and the init inputs, and check against Model."""
    one = _benchmark("kernelbench", "level2/1_Linear_GELU_Scale")
    two = _benchmark("kernelbench", "level2/1_Linear_GELU_Scale")
    init = one.load_fields["init"]
    assert (
        one.load_fields["framework"] == "torch" and one.load_fields["convention"] == "kernelbench"
    )
    assert init["init_seed"] == 42 and init["init_args"] == [1024, 1024, 0.5]
    assert init["outputs"] == [{"name": "output0", "dtype": "float32"}]
    x = _draw(one, 3)
    assert np.array_equal(one.reference(*x), two.reference(*x))
    torch.manual_seed(42)
    linear = torch.nn.Linear(1024, 1024)
    with torch.no_grad():
        expected = torch.nn.functional.gelu(linear(torch.from_numpy(x[0]))) * 0.5
    assert np.allclose(one.reference(*x), expected.numpy(), atol=1e-6)


def test_gpumode_tells_workers_the_data_structure_and_the_task_modules() -> None:
    bench = _benchmark("gpumode", "kz_demo/matmul_py")
    init = bench.load_fields["init"]
    assert init["structure"] == {"tuple": [{"leaf": 0}, {"leaf": 1}, {"leaf": 2}]}
    assert sorted(init["modules"]) == ["reference", "task", "utils"]
    a, b, c = _draw(bench, 5, workload=1)
    assert (a.shape, b.shape, c.shape) == ((384, 512), (512, 768), (384, 768))
    assert bench.output(bench.workloads[1], (a, b, c)).shape == (384, 768)
    assert np.allclose(bench.reference(a, b, c), a.astype(np.float64) @ b, atol=1e-3)


def test_flashinfer_scalars_come_from_the_workload_and_bf16_stays_exact() -> None:
    bench = _benchmark("flashinfer", "rmsnorm_h4096")
    x, weight, eps = _draw(bench, 9)
    assert eps.tolist() == [np.float32(1e-6)] and x.shape == (512, 4096)
    as_bf16 = torch.from_numpy(x).to(torch.bfloat16).float().numpy()
    assert np.array_equal(x, as_bf16)
    assert [i["dtype"] for i in bench.load_fields["init"]["inputs"]] == [
        "bfloat16", "bfloat16", "float32"]  # fmt: skip
    assert bench.output(bench.workloads[0], (x, weight, eps)).dtype == "float32"


def test_two_outputs_are_judged_as_one_flat_array() -> None:
    bench = _benchmark("flashinfer", "add_rmsnorm_h2048")
    drawn = _draw(bench, 4)
    out = bench.reference(*drawn)
    assert out.shape == (2 * 512 * 2048,)
    assert np.allclose(out[512 * 2048 :], (drawn[0] + drawn[1]).reshape(-1))


def test_a_reference_that_returns_no_tensor_is_refused_at_start() -> None:
    problems, _ = read_set("kernelbench", SETS / "kernelbench")
    problem = problems[0]
    broken = problem.sources["problem"].replace(
        "return torch.softmax(x, dim=-1)", "return float(x.sum())"
    )
    with pytest.raises(HarnessError, match="the reference returned a float"):
        problem_benchmark({**problem.judge, "device": "cpu"}, {"problem": broken})
    with pytest.raises(HarnessError, match="format must be one of"):
        problem_benchmark({**problem.judge, "format": "triton"}, problem.sources)
