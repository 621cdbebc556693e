"""The three-way merge of an edited package onto main, per file and per line."""

from __future__ import annotations

import pytest

from kz_api.rebase import merge_packages, merge_text

pytestmark = pytest.mark.unit

BASE = b"".join(b"l%d\n" % i for i in range(8))


@pytest.mark.parametrize(
    ("ours", "theirs", "merged"),
    [
        (
            BASE.replace(b"l1", b"A"),
            BASE.replace(b"l6", b"B"),
            BASE.replace(b"l1", b"A").replace(b"l6", b"B"),
        ),
        (BASE, BASE.replace(b"l3", b"X"), BASE.replace(b"l3", b"X")),
        (BASE.replace(b"l3", b"X"), BASE.replace(b"l3", b"X"), BASE.replace(b"l3", b"X")),
        (BASE + b"tail\n", b"head\n" + BASE, b"head\n" + BASE + b"tail\n"),
    ],
)
def test_merge_text_combines_separate_changes(ours: bytes, theirs: bytes, merged: bytes) -> None:
    """Changes that do not touch merge; identical changes merge once."""
    assert merge_text(BASE, ours, theirs) == merged


@pytest.mark.parametrize(
    ("ours", "theirs"),
    [
        (BASE.replace(b"l3", b"X"), BASE.replace(b"l3", b"Y")),
        (BASE.replace(b"l3", b"X"), BASE.replace(b"l4", b"Y")),
    ],
)
def test_merge_text_refuses_touching_changes(ours: bytes, theirs: bytes) -> None:
    """Changes to the same or adjacent lines are a conflict."""
    assert merge_text(BASE, ours, theirs) is None


def test_merge_packages_per_file() -> None:
    """One-sided changes, additions and deletions apply; a both-sides edit conflicts."""
    base = {"a": b"1\n", "b": b"2\n", "c": b"3\n", "d": b"4\n"}
    ours = {"a": b"1 main\n", "b": b"2\n", "c": b"3\n", "d": b"4 main\n", "new_main": b"m\n"}
    theirs = {"a": b"1\n", "b": b"2 edit\n", "d": b"4 edit\n", "new_edit": b"e\n"}
    outcome = merge_packages(base, ours, theirs)
    assert outcome.conflicts == ["d"]
    assert outcome.files == {
        "a": b"1 main\n",
        "b": b"2 edit\n",
        "new_main": b"m\n",
        "new_edit": b"e\n",
    }
