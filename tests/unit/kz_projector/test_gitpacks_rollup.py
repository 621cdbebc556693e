"""The geometric roll-up rule for the kernel repo's packs."""

from __future__ import annotations

import pytest

from kz_projector.gitpacks import roll_up

pytestmark = pytest.mark.unit


@pytest.mark.parametrize(
    ("counts", "split"),
    [
        ([], 0),
        ([5], 0),
        ([1, 2, 6, 18, 54], 0),  # each twice all below it already: nothing to do
        ([3, 3, 3, 3], 4),  # equal packs all go
        ([1, 1, 1, 100], 3),  # small packs below a big one roll up, the big one stays
        ([2, 3, 100, 150], 4),  # 150 < 2 * 105: the big ones break it too
        ([10, 11, 1000], 2),
    ],
)
def test_roll_up_keeps_the_progression(counts: list[int], split: int) -> None:
    """Packs that break "each at least twice all the smaller ones together" are rolled up."""
    assert roll_up(counts) == split


def test_after_a_roll_up_the_progression_holds() -> None:
    """Rolling up what `roll_up` names leaves a geometric progression."""
    counts = sorted([7, 1, 1, 2, 30, 31, 200, 5, 3])
    split = roll_up(counts)
    after = sorted([sum(counts[:split]), *counts[split:]])
    assert roll_up(after) == 0
