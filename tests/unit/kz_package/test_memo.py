"""`by_content`: answers kept for small inputs, computed afresh for large ones."""

from __future__ import annotations

import pytest

from kz_package.memo import by_content

pytestmark = pytest.mark.unit


def test_small_inputs_are_answered_once_large_ones_every_time() -> None:
    calls: list[bytes] = []

    @by_content(4)
    def size(data: bytes, extra: int) -> int:
        calls.append(data)
        return len(data) + extra

    assert [size(b"abcd", 1), size(b"abcd", 1), size(b"abcd", 2)] == [5, 5, 6]
    assert [size(b"abcde", 0), size(b"abcde", 0)] == [5, 5]
    assert calls == [b"abcd", b"abcd", b"abcde", b"abcde"]  # (abcd, 1) once; abcde each time
