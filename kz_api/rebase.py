"""Three-way merge of an edited package onto main: per file, then per line (pure functions).

A file changed on one side only takes that side; changed on both, its lines merge when the
changed regions do not touch, else the path is a conflict. Binary files merge only when equal.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass, field

__all__ = ["MergeOutcome", "merge_packages", "merge_text"]

Hunk = tuple[int, int, list[bytes]]


@dataclass
class MergeOutcome:
    """The merged files (path → bytes; deleted paths absent) and the conflicting paths."""

    files: dict[str, bytes] = field(default_factory=dict)
    conflicts: list[str] = field(default_factory=list)


def _hunks(base: list[bytes], other: list[bytes]) -> list[Hunk]:
    matcher = difflib.SequenceMatcher(a=base, b=other, autojunk=False)
    return [
        (i1, i2, other[j1:j2]) for tag, i1, i2, j1, j2 in matcher.get_opcodes() if tag != "equal"
    ]


def _touch(a: Hunk, b: Hunk) -> bool:
    return a[0] <= b[1] and b[0] <= a[1]


def merge_text(base: bytes, ours: bytes, theirs: bytes) -> bytes | None:
    """Line merge of two edits of `base`; None when their changes touch."""
    base_lines = base.splitlines(keepends=True)
    tagged = sorted(
        [(h, 0) for h in _hunks(base_lines, ours.splitlines(keepends=True))]
        + [(h, 1) for h in _hunks(base_lines, theirs.splitlines(keepends=True))],
        key=lambda item: (item[0][0], item[0][1], item[1]),
    )
    merged: list[Hunk] = []
    for hunk, _side in tagged:
        if merged and _touch(merged[-1], hunk):
            if merged[-1] == hunk:
                continue
            return None
        merged.append(hunk)
    out: list[bytes] = []
    cursor = 0
    for start, end, lines in merged:
        out += base_lines[cursor:start] + lines
        cursor = end
    out += base_lines[cursor:]
    return b"".join(out)


def _merge_file(
    base: bytes | None, ours: bytes | None, theirs: bytes | None
) -> tuple[bool, bytes | None]:
    """(ok, content) for one path; content None means the path is deleted."""
    if theirs == base:
        return True, ours
    if ours in (base, theirs):
        return True, theirs
    if base is None or ours is None or theirs is None:
        return False, None
    merged = merge_text(base, ours, theirs)
    return (merged is not None), merged


def merge_packages(
    base: dict[str, bytes], ours: dict[str, bytes], theirs: dict[str, bytes]
) -> MergeOutcome:
    """Merge `theirs` (the edit, made from `base`) onto `ours` (main's current files)."""
    outcome = MergeOutcome()
    for path in sorted(set(base) | set(ours) | set(theirs)):
        ok, content = _merge_file(base.get(path), ours.get(path), theirs.get(path))
        if not ok:
            outcome.conflicts.append(path)
        elif content is not None:
            outcome.files[path] = content
    return outcome
