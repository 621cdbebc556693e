"""`parse_python` keeps CPython 3.11's `ast.parse` to one thread at a time (its recursion-depth
bookkeeping is shared by threads; two parses at once failed uploads with a `SystemError` in
the full soak)."""

from __future__ import annotations

import ast
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from kz_package import pyparse, tripwire, validate

pytestmark = pytest.mark.unit


def test_parses_on_several_threads_never_overlap(monkeypatch: pytest.MonkeyPatch) -> None:
    inside = 0
    most = 0
    count = threading.Lock()
    real_parse = pyparse._AST_PARSE

    def slow_parse(*args: Any, **kwargs: Any) -> ast.Module:
        nonlocal inside, most
        with count:
            inside += 1
            most = max(most, inside)
        time.sleep(0.02)  # long enough for every other thread to arrive meanwhile
        with count:
            inside -= 1
        return real_parse(*args, **kwargs)

    monkeypatch.setattr(pyparse, "_AST_PARSE", slow_parse)
    with ThreadPoolExecutor(max_workers=4) as pool:
        trees = list(pool.map(lambda i: validate.parse_python(f"x = {i}\n", f"f{i}.py"), range(8)))
        # the tripwire's scans share the one lock with validation
        scans = [pool.submit(tripwire.scan_files, {"src/k.py": b"x = 1\n"}) for _ in range(4)]
        for scan in scans:
            scan.result()

    assert most == 1
    assert [ast.unparse(tree) for tree in trees] == [f"x = {i}" for i in range(8)]


def test_a_syntax_error_names_the_file() -> None:
    with pytest.raises(SyntaxError) as caught:
        validate.parse_python("def (:\n", "benchmark.py")
    assert caught.value.filename == "benchmark.py"


def test_a_spurious_recursion_depth_mismatch_is_parsed_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The interpreter's own parse stands in for nothing here but the one failure CPython
    3.11.7 can raise at random; a real SyntaxError or other SystemError still comes through."""
    real_parse = pyparse._AST_PARSE
    failures = iter([SystemError("AST constructor recursion depth mismatch (before=1, after=2)")])

    def flaky_parse(*args: Any, **kwargs: Any) -> Any:
        failure = next(failures, None)
        if failure is not None:
            raise failure
        return real_parse(*args, **kwargs)

    monkeypatch.setattr(pyparse, "_AST_PARSE", flaky_parse)
    assert ast.unparse(pyparse.parse_python("x = 1\n")) == "x = 1"

    failures = iter([SystemError("some other failure")])
    with pytest.raises(SystemError, match="some other failure"):
        pyparse.parse_python("x = 1\n")
