"""The sm90 example packages on a GPU: each board's own judge and build, through the real
sandbox, accept the shipped reference and the right variant as a first result and reject the
wrong variant. Skipped where torch has no CUDA device (here, and in CI)."""

from __future__ import annotations

from pathlib import Path

import pytest

from kz_events.ids import KernelId
from tests.integration.gpu.gpu_helpers import GPU_VARIANTS, RunPackage, cuda_missing

_MISSING = cuda_missing()
pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(_MISSING is not None, reason=_MISSING or ""),
]

REPO = Path(__file__).resolve().parents[3]
EXAMPLES = REPO / "examples" / "kernels"
VARIANTS = REPO / "examples" / "variants"
CASES = [
    (kernel_id, variant, verdict)
    for kernel_id, variants in sorted(GPU_VARIANTS.items())
    for variant, verdict in {"(shipped)": "accepted", **variants}.items()
]


def _sources(folder: Path) -> dict[str, str]:
    return {p.relative_to(folder).as_posix(): p.read_text() for p in folder.rglob("*.py")}


@pytest.mark.parametrize(("kernel_id", "variant", "verdict"), CASES)
def test_an_sm90_example_judges_its_variants(
    kernel_id: str, variant: str, verdict: str, judge_gpu_package: RunPackage
) -> None:
    package = EXAMPLES / kernel_id / ".kernel_package"
    src = EXAMPLES / kernel_id / "src" if variant == "(shipped)" else VARIANTS / variant / "src"
    outcome = judge_gpu_package(
        (package / "benchmark.py").read_text(),
        _sources(src),
        kernel_id=KernelId.parse(kernel_id),
        build=(package / "build_test_env.py").read_text(),
        step_timeout_s=300.0,
    )
    log = outcome.log.decode(errors="replace")[-6000:]
    assert outcome.reason == verdict, log
    assert outcome.result is not None
    assert outcome.result["correctness"]["passed"] is (verdict == "accepted"), log
