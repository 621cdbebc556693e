"""The report of `scripts/run_tests.py`: what each layer counted, and the verdict."""

from __future__ import annotations

import importlib.util
import sys
import threading
from pathlib import Path
from types import ModuleType

import pytest

pytestmark = pytest.mark.unit

SCRIPT = Path(__file__).resolve().parents[3] / "scripts" / "run_tests.py"


def _script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("run_tests", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["run_tests"] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


run_tests = _script()


def test_junit_counts_add_up_every_suite() -> None:
    """pytest-xdist writes one suite per run; the counts are the suites' sums, passed derived."""
    xml = (
        '<testsuites><testsuite tests="10" failures="1" errors="2" skipped="3"/>'
        '<testsuite tests="5" failures="0" errors="0" skipped="1"/></testsuites>'
    )
    assert run_tests.junit_counts(xml) == "8 passed, 1 failed, 2 errors, 4 skipped"
    assert (
        run_tests.junit_counts('<testsuite tests="2"/>')
        == "2 passed, 0 failed, 0 errors, 0 skipped"
    )


def test_tap_counts_read_the_node_summary() -> None:
    out = "TAP version 13\nok 1 - x\n# tests 66\n# pass 64\n# fail 1\n# skipped 1\n"
    assert run_tests.tap_counts(out) == "64 passed, 1 failed, 1 skipped"


def test_the_report_names_every_failed_layer() -> None:
    """Every layer gets a row, whatever happened before it; the verdict lists the red ones."""
    outcomes = [
        run_tests.Outcome("lint", "passed", "ok", 1.0),
        run_tests.Outcome("unit+integration", "failed", "9 passed, 1 failed", 300.0),
        run_tests.Outcome("system", "failed", "no tests collected", 2.5),
        run_tests.Outcome("js", "skipped", "node missing", 0.0),
    ]
    text = run_tests.report(outcomes)
    assert len(text.splitlines()) == 6
    assert "unit+integration  failed     300.0s  9 passed, 1 failed" in text
    assert text.endswith("FAILED: unit+integration, system")
    assert run_tests.report(outcomes[:1]).endswith("every layer passed")


def test_side_by_side_layers_run_at_once_and_report_in_their_order(tmp_path: Path) -> None:
    """The browser and system layers run together: each one's counts come back under its own
    name, in the suite's order, and neither waits for the other to end before it starts."""
    suite = run_tests.Suite(tmp_path)
    started = threading.Event()

    def webui() -> tuple[str, str]:
        assert started.wait(10), "the other layer never started"  # it runs meanwhile
        return "passed", "webui counts"

    def system() -> tuple[str, str]:
        started.set()
        return "failed", "system counts"

    layers = {"webui": webui, "system": system}
    outcomes = suite.side_by_side(["webui", "system"], layers)
    assert [(o.layer, o.result, o.counts) for o in outcomes] == [
        ("webui", "passed", "webui counts"),
        ("system", "failed", "system counts"),
    ]
    assert suite.apart == set()
