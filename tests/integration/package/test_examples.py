"""The example kernels: each validates with `kz validate`, and each CPU benchmark really runs,
accepting a faster variant and rejecting a slower one."""

from __future__ import annotations

import json
import runpy
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml

from kz_cli.main import main
from kz_harness.checks import compare
from kz_package import validate_result_document
from kz_package.pyparse import parse_python
from tests.integration.gpu.gpu_helpers import GPU_VARIANTS

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[3]
EXAMPLES = REPO / "examples" / "kernels"
PACKAGES = sorted(p.parent for p in EXAMPLES.rglob(".kernel_package"))
CPU = {
    "cpu/Norm/RMSNorm/fp32/numpy_ref": "rmsnorm",
    "cpu/Softmax/row/fp32/numpy_ref": "softmax",
    "cpu/GEMM/dense/fp32/numpy_ref": "gemm",
}


def _kernel_id(package: Path) -> str:
    return package.relative_to(EXAMPLES).as_posix()


def test_examples_cover_the_promised_kernels() -> None:
    """Three CPU kernels and three sm90 GPU boards (RMSNorm, GEMM, softmax) ship as examples."""
    ids = {_kernel_id(p) for p in PACKAGES}
    assert set(CPU) <= ids
    assert set(GPU_VARIANTS) | {"sm90/Norm/RMSNorm/bf16/triton_rowwise"} <= ids


@pytest.mark.parametrize("package", PACKAGES, ids=_kernel_id)
def test_kz_validate_passes_on_every_example(
    package: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`kz validate DIR --kernel-id ID` exits 0 with a one-line summary for each example, and a
    line saying what its judge was compared with (here no server: the package alone)."""
    code = main(["validate", str(package), "--kernel-id", _kernel_id(package)])
    out = capsys.readouterr().out
    assert code == 0, out
    assert out.startswith(f"valid: {_kernel_id(package)} (")
    _summary, judge = out.strip().splitlines()
    assert judge.startswith(("checked the package alone", "judge: "))


def test_kz_validate_lists_every_problem_and_exits_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A broken copy of an example fails with one line per problem: path, field, message."""
    package = tmp_path / "pkg"
    shutil.copytree(EXAMPLES / "cpu/GEMM/dense/fp32/numpy_ref", package)
    desc = package / ".kernel_package" / "desc.yaml"
    desc.write_text(desc.read_text().replace("better: lower", "better: faster"))
    (package / ".kernel_package" / "benchmark.py").unlink()
    assert main(["validate", str(package)]) == 2  # refused: do not retry as it is
    assert capsys.readouterr().out.splitlines() == [
        ".kernel_package/benchmark.py: is required",
        '.kernel_package/desc.yaml: metric.better: must be "lower" or "higher", got "faster"',
    ]
    assert main(["validate", str(package), "--json"]) == 2
    document = json.loads(capsys.readouterr().out)
    assert document["valid"] is False
    assert document["error"]["code"] == "invalid_package"
    assert len(document["error"]["details"]["problems"]) == 2


def test_kz_validate_reads_tarballs_and_checks_the_form_kernel_id(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A tarball validates too, and a --kernel-id that differs from desc.yaml is refused."""
    from kz_package import pack_directory

    tarball = tmp_path / "p.tar.gz"
    digest = pack_directory(EXAMPLES / "cpu/Softmax/row/fp32/numpy_ref", tarball)
    assert main(["validate", str(tarball), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["sha256"] == digest
    assert main(["validate", str(tarball), "--kernel-id", "cpu/Softmax/row/fp32/other"]) == 2
    assert "kernel_id: must equal the submission's kernel id" in capsys.readouterr().out


def _run_benchmark(
    package: Path, tmp_path: Path, kernel_id: str, baseline: float | None
) -> dict[str, object]:
    """`kz bench` the package (the real sandbox, the judge apart from the candidate)."""
    tmp_path.mkdir(parents=True, exist_ok=True)
    argv = ["bench", str(package), "--json"]
    if baseline is not None:
        base = tmp_path / "baseline.yaml"
        base.write_text(yaml.safe_dump({"schema_version": 1, "kernel_id": kernel_id,
                                        "best": {"value": baseline}}))  # fmt: skip
        argv += ["--baseline", str(base)]
    out = subprocess.run([sys.executable, "-m", "kz_cli.main", *argv], cwd=REPO,
                         capture_output=True, text=True, timeout=120, check=False)  # fmt: skip
    assert out.returncode in (0, 1) and out.stdout.strip(), out.stdout + out.stderr
    answer = json.loads(out.stdout.splitlines()[-1])
    return validate_result_document(answer["result"])


@pytest.mark.parametrize("kernel_id", sorted(CPU))
def test_cpu_example_benchmark_writes_a_valid_verdict(kernel_id: str, tmp_path: Path) -> None:
    """The reference is accepted as a first result, and judged against a baseline when one exists.

    A baseline far out of reach keeps the verdict independent of machine speed (one far
    beaten is the variants' case below).
    """
    first = _run_benchmark(EXAMPLES / kernel_id, tmp_path / "first", kernel_id, None)
    assert first["accepted"] is True
    assert str(first["reason"]).startswith("first result for this kernel")
    unbeatable = _run_benchmark(EXAMPLES / kernel_id, tmp_path / "unbeaten", kernel_id, 1e-9)
    assert unbeatable["accepted"] is False
    assert str(unbeatable["reason"]).startswith("not 5% faster than current best")


@pytest.mark.parametrize("variant", ["fast", "slow"])
@pytest.mark.parametrize("kernel_id", sorted(CPU))
def test_cpu_variants_are_the_same_kernel_with_another_src(
    kernel_id: str, variant: str, tmp_path: Path
) -> None:
    """Each variant's src/ dropped into the package validates and passes the correctness checks."""
    package = tmp_path / "pkg"
    shutil.copytree(EXAMPLES / kernel_id, package)
    shutil.rmtree(package / "src")
    variant_src = REPO / "examples" / "variants" / f"{CPU[kernel_id]}_{variant}" / "src"
    shutil.copytree(variant_src, package / "src")
    assert main(["validate", str(package), "--kernel-id", kernel_id]) == 0
    result = _run_benchmark(package, tmp_path / "run", kernel_id, 1e12)
    assert result["correctness"]["passed"] is True  # type: ignore[index]
    assert result["accepted"] is True


# --- the sm90 examples, checked without a GPU (tests/integration/gpu runs them on one) -------


def _judge(kernel_id: str) -> Any:
    """The example's Benchmark, its benchmark.py run as a module (not as __main__)."""
    path = EXAMPLES / kernel_id / ".kernel_package" / "benchmark.py"
    return runpy.run_path(str(path), run_name="benchmark")["BENCHMARK"]


def _entry_defined(src: Path, entry: str) -> bool:
    """Whether src/ has the entry's module with a top-level function of the entry's name."""
    module, _, function = entry.partition(":")
    path = src / f"{module}.py"
    if not path.is_file():
        return False
    tree = parse_python(path.read_text(), str(path))
    return any(getattr(node, "name", None) == function for node in tree.body)


@pytest.mark.parametrize(
    ("kernel_id", "variant"),
    [(k, v) for k, variants in sorted(GPU_VARIANTS.items()) for v in sorted(variants)],
)
def test_gpu_variants_are_the_same_kernel_with_another_src(
    kernel_id: str, variant: str, tmp_path: Path
) -> None:
    """Each sm90 variant's src/ dropped into its package validates, parses (torch and triton
    are not imported here) and defines the board's entry point."""
    package = tmp_path / "pkg"
    shutil.copytree(EXAMPLES / kernel_id, package)
    shutil.rmtree(package / "src")
    shutil.copytree(REPO / "examples" / "variants" / variant / "src", package / "src")
    assert main(["validate", str(package), "--kernel-id", kernel_id]) == 0
    for path in (package / "src").rglob("*.py"):
        parse_python(path.read_text(), str(path))
    assert _entry_defined(package / "src", _judge(kernel_id).entry)


@pytest.mark.parametrize(
    "kernel_id", sorted(_kernel_id(p) for p in PACKAGES if _kernel_id(p).startswith("sm90/"))
)
def test_gpu_examples_declare_their_work_for_the_physical_floor(kernel_id: str) -> None:
    """Every sm90 board runs on CUDA and gives each workload its bytes and flops, and its
    shipped src/ defines the entry point."""
    bench = _judge(kernel_id)
    assert bench.device == "cuda"
    assert all(w.bytes_moved > 0 and w.flops > 0 for w in bench.workloads)
    assert _entry_defined(EXAMPLES / kernel_id / "src", bench.entry)


def _round_mantissa(array: Any, bits: int) -> Any:
    """float32 values rounded to `bits` mantissa bits (ties to even): 7 for bf16, 10 for fp16."""
    drop = 23 - bits
    raw = np.asarray(array, dtype=np.float32).view(np.uint32).astype(np.uint64)
    rounded = (raw + (1 << (drop - 1)) - 1 + ((raw >> drop) & 1)) >> drop << drop
    return rounded.astype(np.uint32).view(np.float32)


def _passes(bench: Any, out: Any, reference: Any) -> bool:
    return compare(out, reference, dtype=bench.dtype, atol=bench.atol, rtol=bench.rtol).passed


def test_the_fp32_softmax_board_passes_fp32_and_fails_bf16_and_fp16() -> None:
    """On the board's own inputs (a few rows of each workload's length): a float32 softmax is
    within its tolerance, the same one computed in bfloat16 or float16 is not."""
    bench = _judge("sm90/Softmax/Softmax/fp32/torch_softmax")
    rng = np.random.default_rng(3)
    for workload in bench.workloads:
        small = type(workload)("small", {**workload.params, "rows": 4})
        (x,) = bench.make_inputs(small, rng)
        reference = bench.reference(x)
        e = np.exp(x - x.max(axis=-1, keepdims=True))
        assert _passes(bench, e / e.sum(axis=-1, keepdims=True), reference)
        for bits in (7, 10):
            low = _round_mantissa(np.exp(_round_mantissa(x - x.max(-1, keepdims=True), bits)), bits)
            out = _round_mantissa(low / low.sum(axis=-1, keepdims=True), bits)
            assert not _passes(bench, out, reference), (workload.name, bits)


def test_the_bf16_gemm_board_passes_fp32_accumulation_and_fails_a_missing_k_slice() -> None:
    """On the board's own inputs (few rows and columns, each workload's k), bfloat16-rounded
    as the judge rounds them: a float32 product rounded to bfloat16 is within the tolerance;
    the wrong variant's product, which never adds the last 64 of k, is not."""
    bench = _judge("sm90/GEMM/GEMM/bf16/torch_matmul")
    rng = np.random.default_rng(5)
    for workload in bench.workloads:
        small = type(workload)("small", {**workload.params, "m": 16, "n": 32})
        a, b = (_round_mantissa(array, 7) for array in bench.make_inputs(small, rng))
        reference = bench.reference(a, b)
        assert bench.output(workload, (a, b)).shape == (workload["m"], workload["n"])
        assert _passes(bench, _round_mantissa(a @ b, 7), reference)
        short = a[:, :-64] @ b[:-64]
        assert not _passes(bench, _round_mantissa(short, 7), reference), workload.name
