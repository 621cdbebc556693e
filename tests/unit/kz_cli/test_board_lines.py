"""`kz boards BOARD` prints every row of a board, an unranked one (disputed, suspect, held
back) with a dash for its rank and why, never a traceback."""

from __future__ import annotations

import pytest

from kz_cli.cmd_boards import ranking_lines

pytestmark = pytest.mark.unit

BOARD = "cpu/KernelBench/L2_1_Linear_GELU_Scale/fp32"


def test_an_unranked_row_shows_a_dash_and_why() -> None:
    rows = [
        {"kernel_id": f"{BOARD}/fast", "rank": 1, "score": {"speedup": 2.0},
         "provenance": {"agent": "a", "model": "m"}},
        {"kernel_id": f"{BOARD}/fused", "rank": None, "score": {"speedup": 1.0039},
         "unranked": "disputed: a second run did not agree with it"},
    ]  # fmt: skip
    assert ranking_lines(BOARD, rows) == [
        f"{BOARD}:",
        f"    1        2x  {BOARD}/fast  a m",
        f"    -        1x  {BOARD}/fused  (unranked: disputed: a second run did not agree with it)",
    ]
