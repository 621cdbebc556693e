"""Host paths out of a task's log: the runner's folders are written as stable names
(`<work>/src/kernel.py`), so a stored log says nothing of the host's layout and reads the same
on every runner and every attempt.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Callable, Mapping
from pathlib import Path

__all__ = ["path_redactor"]

# A path ends where a path character does not follow: `<work>` must not eat `/pkg2`.
_END = rb"(?![A-Za-z0-9._+-])"


def _spellings(path: Path) -> set[str]:
    """The ways a folder may be printed: as given, absolute, and with links resolved."""
    found = {str(path), str(path.absolute())}
    with contextlib.suppress(OSError):  # a folder already gone keeps its given spellings
        found.add(str(path.resolve()))
    return {s.rstrip("/") for s in found if len(s.rstrip("/")) > 1}


def path_redactor(names: Mapping[Path, str]) -> Callable[[bytes], bytes]:
    """A function replacing each folder of `names` (and anything below it) by its name in a
    log; the longest folder wins, so nested folders get their own names."""
    table: dict[bytes, bytes] = {}
    for path, name in names.items():
        for spelling in _spellings(path):
            table.setdefault(spelling.encode(), name.encode())
    if not table:
        return lambda data: data
    ordered = sorted(table, key=len, reverse=True)
    pattern = re.compile(b"(?:" + b"|".join(re.escape(p) for p in ordered) + b")" + _END)

    def redact(data: bytes) -> bytes:
        return pattern.sub(lambda found: table[found.group(0)], data)

    return redact
