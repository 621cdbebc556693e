"""Every GPU cheating family of kz_testing.gpu_cheats, run through the real sandbox on a GPU.

Each candidate really attempts its trick and prints `TRIED <family>`; `defended()` says whether
the outcome shows the family defended (rejected, flagged, or measured for its real cost) and
the attempt ran. Skipped where torch has no CUDA device (here, and in CI).
"""

from __future__ import annotations

import pytest

from kz_testing.gpu_cheats import GPU_CASES, GpuCase, defended
from tests.integration.gpu.gpu_helpers import RunPackage, cuda_missing

_MISSING = cuda_missing()
pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(_MISSING is not None, reason=_MISSING or ""),
]


@pytest.mark.parametrize("case", GPU_CASES, ids=lambda case: case.family)
def test_the_gpu_family_is_defended(case: GpuCase, judge_gpu_package: RunPackage) -> None:
    outcome = judge_gpu_package(case.judge, case.files)
    ok, why = defended(case, outcome.reason, outcome.result, outcome.log)
    assert ok, (
        f"{case.family} ({case.defended_by}: {case.why}): {why}\n"
        + outcome.log.decode(errors="replace")[-6000:]
    )
