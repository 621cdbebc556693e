"""The checked outcome of desc.yaml and bench_result.yaml is kept by content: the same bytes get
the same answer, and no caller can change what another one gets."""

from __future__ import annotations

import pytest

from kz_package import PackageError, read_package, validate_package_files
from kz_package.judge import judge_changes
from kz_testing import package_files, package_tarball

pytestmark = pytest.mark.unit

KERNEL = "cpu/Norm/RMSNorm/fp32/cache_test"
SCOREBOARD = f"schema_version: 1\nkernel_id: {KERNEL}\nx-notes: {{runs: [3.5, 4.0]}}\n"


def _checked(**changes: bytes) -> object:
    files = package_files(KERNEL)
    files.update({f".kernel_package/{name}": data for name, data in changes.items()})
    return validate_package_files(read_package(package_tarball(files)))


def _problems(**changes: bytes) -> list[str]:
    with pytest.raises(PackageError) as caught:
        _checked(**changes)
    return [str(p) for p in caught.value.problems]


def test_each_check_gets_its_own_copy_of_the_data() -> None:
    """Changing the scoreboard one check returned leaves the next check of the same bytes as
    it was."""
    first = _checked(**{"bench_result.yaml": SCOREBOARD.encode()})
    assert first.bench_result is not None  # type: ignore[attr-defined]
    first.bench_result["x-notes"]["runs"].append(99.0)  # type: ignore[attr-defined]
    first.bench_result["kernel_id"] = "changed"  # type: ignore[attr-defined]
    second = _checked(**{"bench_result.yaml": SCOREBOARD.encode()})
    assert second.bench_result["x-notes"] == {"runs": [3.5, 4.0]}  # type: ignore[attr-defined]
    assert second.bench_result["kernel_id"] == KERNEL  # type: ignore[attr-defined]


def test_the_same_bad_bytes_get_the_same_problems_every_time() -> None:
    """A refused desc.yaml is refused again with the very same problems."""
    bad = package_files(KERNEL, better="sideways")[".kernel_package/desc.yaml"]
    first = _problems(**{"desc.yaml": bad})
    assert first == _problems(**{"desc.yaml": bad})
    assert any("metric.better" in p for p in first)


def test_judge_metric_follows_the_bytes() -> None:
    """The judge compares the metric of each desc.yaml it is given, kept or not."""
    current = read_package(package_tarball(package_files(KERNEL)))
    same = read_package(package_tarball(package_files(KERNEL, title="Other title")))
    higher = read_package(package_tarball(package_files(KERNEL, better="higher")))
    for _ in range(2):
        assert judge_changes(current, same) == []
        assert judge_changes(current, higher) == ["desc.yaml:metric"]


def test_the_same_bad_script_gets_the_same_problem_every_time() -> None:
    """A script that does not parse is refused again, with its line, when sent again."""
    bad = b"def broken(:\n    pass\n"
    first = _problems(**{"benchmark.py": bad})
    assert first == _problems(**{"benchmark.py": bad})
    assert first == [".kernel_package/benchmark.py: line 1: not valid Python: invalid syntax"]
