"""`ast.parse` one thread at a time: the one way the platform parses Python.

CPython 3.11 keeps ast.parse's recursion-depth bookkeeping in state shared by threads: two
parses at once (the API validates uploads, and scans them with the tripwire, on worker
threads) can fail with "SystemError: AST constructor recursion depth mismatch". The same error
also comes, rarely, with one thread (in a test process, from inspect and hypothesis parsing
whole modules); the bookkeeping starts afresh with each parse, so a parse that fails so is
tried again.
"""

from __future__ import annotations

import ast
import threading
from typing import Any

__all__ = ["parse_python"]

_PARSE_LOCK = threading.RLock()
_AST_PARSE = ast.parse  # the interpreter's own, even where a process routes ast.parse here
_MISMATCH = "AST constructor recursion depth mismatch"
_TRIES = 3


def parse_python(
    source: str | bytes, filename: str = "<unknown>", mode: str = "exec", **options: Any
) -> Any:
    """`ast.parse`, safe to call from several threads at once (same arguments). A process
    whose other code parses on threads too (a test process: pytest, hypothesis, inspect) may
    set `ast.parse = parse_python` so that every parse takes the one lock."""
    with _PARSE_LOCK:
        for attempt in range(_TRIES):
            try:
                return _AST_PARSE(source, filename, mode, **options)
            except SystemError as exc:  # each parse starts the bookkeeping afresh: try again
                if _MISMATCH not in str(exc) or attempt == _TRIES - 1:
                    raise
        raise AssertionError("unreachable")
