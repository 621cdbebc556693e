"""desc.yaml's `x-problem` (a board imported from a problem set) reaches the package's
summary as a bounded note of plain fields; anything else gives none."""

from __future__ import annotations

import pytest

from kz_package.model import problem_note

pytestmark = pytest.mark.unit


def test_a_problem_note_keeps_its_plain_fields_and_licence_bounded() -> None:
    """Known fields as strings, the licence's too, each at most 2,000 characters; unknown
    fields and empty licence fields are left out."""
    note = problem_note(
        {
            "format": "kernelbench",
            "id": "level2/1",
            "board_version": 2,
            "digest": "x" * 64,
            "licence": {"spdx": "MIT", "conditions": "c" * 5000, "title": ""},
        }
    )
    assert note == {
        "format": "kernelbench",
        "id": "level2/1",
        "board_version": "2",
        "licence": {"spdx": "MIT", "conditions": "c" * 2000},
    }


@pytest.mark.parametrize("value", [None, "gpumode", ["a"], {}])
def test_anything_but_a_problem_gives_no_note(value: object) -> None:
    """No mapping, or one with nothing known in it, is no problem."""
    assert problem_note(value) is None
