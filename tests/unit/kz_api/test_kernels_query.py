"""Filtering, sorting and paging of the kernel list, and its answer cache."""

from __future__ import annotations

import pytest

from kz_api.errors import ApiError
from kz_api.kernels_query import KernelQuery, KernelsCache, query_kernels

pytestmark = pytest.mark.unit

ENTRIES = [
    {"id": "sm90/GEMM/dense/fp8/b", "title": "Beta", "best": {"value": 3.0}, "accepted_count": 2},
    {"id": "cpu/Norm/RMSNorm/fp32/a", "title": "Alpha", "best": None, "accepted_count": 0},
    {"id": "sm90/GEMM/dense/fp16/c", "title": "Gamma", "best": {"value": 1.0}, "tags": ["tiny"]},
]


def _ids(query: KernelQuery) -> list[str]:
    return [e["id"] for e in query_kernels(ENTRIES, query, 7).items]


@pytest.mark.parametrize(
    ("query", "ids"),
    [
        (
            KernelQuery(),
            ["cpu/Norm/RMSNorm/fp32/a", "sm90/GEMM/dense/fp16/c", "sm90/GEMM/dense/fp8/b"],
        ),
        (KernelQuery(arch="sm90", quant="fp8"), ["sm90/GEMM/dense/fp8/b"]),
        (KernelQuery(q="TINY"), ["sm90/GEMM/dense/fp16/c"]),
        (
            KernelQuery(sort="best"),
            ["sm90/GEMM/dense/fp16/c", "sm90/GEMM/dense/fp8/b", "cpu/Norm/RMSNorm/fp32/a"],
        ),
        (KernelQuery(sort="-title", limit=2), ["sm90/GEMM/dense/fp16/c", "sm90/GEMM/dense/fp8/b"]),
        (KernelQuery(offset=2), ["sm90/GEMM/dense/fp8/b"]),
    ],
)
def test_query(query: KernelQuery, ids: list[str]) -> None:
    """Filters narrow, sort orders (missing values last), limit and offset page."""
    assert _ids(query) == ids


def test_unknown_sort_is_invalid() -> None:
    """An unknown sort key names the allowed ones."""
    with pytest.raises(ApiError, match="sort must be one of"):
        query_kernels(ENTRIES, KernelQuery(sort="colour"), 0)


def test_cache_is_cleared_when_the_fold_moves() -> None:
    """A cached answer is served at the same position and dropped at the next."""
    cache, query = KernelsCache(), KernelQuery()
    assert cache.get(1, query) is None
    data = cache.put(query, query_kernels(ENTRIES, query, 1))
    assert cache.get(1, query) == data
    assert cache.get(2, query) is None
