"""`ast.parse` one thread at a time: the one way the platform parses Python.

CPython 3.11 keeps ast.parse's recursion-depth bookkeeping in state shared by threads: two
parses at once (the API validates uploads, and scans them with the tripwire, on worker
threads) can fail with "SystemError: AST constructor recursion depth mismatch".
"""

from __future__ import annotations

import ast
import threading

__all__ = ["parse_python"]

_PARSE_LOCK = threading.Lock()


def parse_python(source: str | bytes, filename: str) -> ast.Module:
    """`ast.parse`, safe to call from several threads at once."""
    with _PARSE_LOCK:
        return ast.parse(source, filename=filename)
