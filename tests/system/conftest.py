"""Fixtures of the system suite: whole stacks as processes, with their logs printed when a test
fails and every process ended after it."""

from __future__ import annotations

from collections.abc import Callable, Generator, Iterator
from pathlib import Path
from typing import Any

import pytest
from system_stack import Stack


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, Any, Any]:
    """Keep each phase's report on the item, so fixtures can see whether the test failed."""
    report = yield
    setattr(item, f"report_{report.when}", report)
    return report


@pytest.fixture
def make_stack(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Callable[..., Stack]]:
    """Start stacks under the test's tmp dir; on failure print each process's log tail."""
    stacks: list[Stack] = []

    def make(**kw: Any) -> Stack:
        stack = Stack(tmp_path / f"stack-{len(stacks)}", **kw)
        stacks.append(stack)
        return stack.start()

    yield make
    failed = getattr(request.node, "report_call", None)
    for stack in stacks:
        if failed is not None and failed.failed:
            print(f"\n===== logs of {stack.root} =====\n{stack.tails(40)}")
        stack.close()
