"""The example kernels: each validates with `kz validate`, and each CPU benchmark really runs,
accepting a faster variant and rejecting a slower one."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from kz_cli.main import main
from kz_package import validate_result_document

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
    """Three CPU kernels and one sm90 GPU kernel ship as examples."""
    ids = {_kernel_id(p) for p in PACKAGES}
    assert set(CPU) <= ids
    assert any(i.startswith("sm90/") for i in ids)


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


def test_kz_validate_lists_every_problem_and_exits_1(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A broken copy of an example fails with one line per problem: path, field, message."""
    package = tmp_path / "pkg"
    shutil.copytree(EXAMPLES / "cpu/GEMM/dense/fp32/numpy_ref", package)
    desc = package / ".kernel_package" / "desc.yaml"
    desc.write_text(desc.read_text().replace("better: lower", "better: faster"))
    (package / ".kernel_package" / "benchmark.py").unlink()
    assert main(["validate", str(package)]) == 1
    assert capsys.readouterr().out.splitlines() == [
        ".kernel_package/benchmark.py: is required",
        '.kernel_package/desc.yaml: metric.better: must be "lower" or "higher", got "faster"',
    ]
    assert main(["validate", str(package), "--json"]) == 1
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
    assert main(["validate", str(tarball), "--kernel-id", "cpu/Softmax/row/fp32/other"]) == 1
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

    Baselines far out of reach on either side keep the verdicts independent of machine speed.
    """
    first = _run_benchmark(EXAMPLES / kernel_id, tmp_path / "first", kernel_id, None)
    assert first["accepted"] is True
    assert str(first["reason"]).startswith("first result for this kernel")
    beaten = _run_benchmark(EXAMPLES / kernel_id, tmp_path / "beaten", kernel_id, 1e12)
    assert beaten["accepted"] is True
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
