"""The demo content of `kz up`: the example kernels, then real variants submitted through the
API so the boards have competition (new kernels in the same groups, and faster sources for
existing ones)."""

from __future__ import annotations

import re
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

import httpx

from kz_package import pack_directory

__all__ = ["DEMO_SUBMISSIONS", "DemoSubmission", "prepare", "submit_demo"]

REPO = Path(__file__).resolve().parents[1]
EXAMPLES = REPO / "examples" / "kernels"
VARIANTS = REPO / "examples" / "variants"


@dataclass(frozen=True)
class DemoSubmission:
    base: str  # the example package's kernel id
    variant: str  # folder under examples/variants holding src/ ("*_ref": the shipped src/)
    kernel_id: str  # where it is submitted (a new name makes a new kernel on the same board)
    submitter: str
    message: str


DEMO_SUBMISSIONS = (
    # First the shipped references, so each kernel has a measured baseline to beat ...
    DemoSubmission(
        "cpu/Norm/RMSNorm/fp32/numpy_ref",
        "rmsnorm_ref",
        "cpu/Norm/RMSNorm/fp32/numpy_ref",
        "examples",
        "reference run",
    ),
    DemoSubmission(
        "cpu/Softmax/row/fp32/numpy_ref",
        "softmax_ref",
        "cpu/Softmax/row/fp32/numpy_ref",
        "examples",
        "reference run",
    ),
    DemoSubmission(
        "cpu/GEMM/dense/fp32/numpy_ref",
        "gemm_ref",
        "cpu/GEMM/dense/fp32/numpy_ref",
        "examples",
        "reference run",
    ),
    # ... then competitors on the same boards, and a faster source for an existing kernel.
    DemoSubmission(
        "cpu/Norm/RMSNorm/fp32/numpy_ref",
        "rmsnorm_fast",
        "cpu/Norm/RMSNorm/fp32/numpy_vectorized",
        "ada",
        "vectorised RMSNorm",
    ),
    DemoSubmission(
        "cpu/Norm/RMSNorm/fp32/numpy_ref",
        "rmsnorm_slow",
        "cpu/Norm/RMSNorm/fp32/python_loops",
        "grace",
        "pure Python RMSNorm",
    ),
    DemoSubmission(
        "cpu/Softmax/row/fp32/numpy_ref",
        "softmax_fast",
        "cpu/Softmax/row/fp32/numpy_inplace",
        "ada",
        "in-place softmax",
    ),
    DemoSubmission(
        "cpu/GEMM/dense/fp32/numpy_ref",
        "gemm_fast",
        "cpu/GEMM/dense/fp32/blas_matmul",
        "linus",
        "one BLAS call",
    ),
    DemoSubmission(
        "cpu/Softmax/row/fp32/numpy_ref",
        "softmax_fast",
        "cpu/Softmax/row/fp32/numpy_ref",
        "grace",
        "vectorise the reference",
    ),
)


def prepare(sub: DemoSubmission, into: Path) -> Path:
    """The example package with the variant's sources, renamed to `sub.kernel_id`."""
    pkg = into / sub.kernel_id.replace("/", "_")
    into.mkdir(parents=True, exist_ok=True)
    shutil.copytree(EXAMPLES / sub.base, pkg)
    if not sub.variant.endswith("_ref"):
        shutil.rmtree(pkg / "src")
        shutil.copytree(VARIANTS / sub.variant / "src", pkg / "src")
    if sub.kernel_id != sub.base:
        desc = pkg / ".kernel_package" / "desc.yaml"
        text = desc.read_text().replace(sub.base, sub.kernel_id)
        desc.write_text(re.sub(r"(?m)^title: .*$", f"title: {sub.message}", text))
        result = pkg / ".kernel_package" / "bench_result.yaml"
        result.write_text(result.read_text().replace(sub.base, sub.kernel_id))
    return pkg


def submit_demo(base_url: str) -> list[str]:
    """Submit every demo variant through the HTTP API; returns the submission ids."""
    ids: list[str] = []
    with (
        tempfile.TemporaryDirectory(prefix="kz-demo-") as tmp,
        httpx.Client(base_url=base_url, timeout=60) as client,
    ):
        for number, sub in enumerate(DEMO_SUBMISSIONS):
            pkg = prepare(sub, Path(tmp) / str(number))
            tarball = Path(tmp) / f"{pkg.name}.tar.gz"
            pack_directory(pkg, tarball)
            with tarball.open("rb") as handle:
                response = client.post(
                    "/api/submissions",
                    headers={"X-Submitter-Id": sub.submitter},
                    data={
                        "kernel_id": sub.kernel_id,
                        "submitter_id": sub.submitter,
                        "message": sub.message,
                    },
                    files={"package": (tarball.name, handle, "application/gzip")},
                )
            if response.status_code == 202:
                ids.append(response.json()["submission_id"])
            else:
                print(f"demo: {sub.kernel_id} refused: {response.text[:200]}", flush=True)
    return ids
