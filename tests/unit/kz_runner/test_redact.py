"""`path_redactor` writes the runner's folders as stable names in a log."""

from __future__ import annotations

from pathlib import Path

import pytest

from kz_runner.redact import path_redactor

pytestmark = pytest.mark.unit


@pytest.mark.parametrize(
    ("line", "shown"),
    [
        (b"/r/task-1/pkg/src/k.py", b"<work>/src/k.py"),
        (b"/r/task-1/pkg", b"<work>"),
        (b'"/r/task-1/pkg"', b'"<work>"'),
        (b"/r/task-1/pkg.kz/judge/x", b"<judge>/x"),
        (b"/r/task-1/pkg2/x", b"<task>/pkg2/x"),
        (b"/r/task-10/pkg", b"/r/task-10/pkg"),
        (b"a /r/task-1/pkg:3 b /r/task-1", b"a <work>:3 b <task>"),
        (b"/other/place", b"/other/place"),
    ],
)
def test_each_folder_takes_its_name_and_the_longest_wins(line: bytes, shown: bytes) -> None:
    """Nested folders get their own names; a longer sibling name is not cut."""
    redact = path_redactor(
        {
            Path("/r/task-1"): "<task>",
            Path("/r/task-1/pkg"): "<work>",
            Path("/r/task-1/pkg.kz/judge"): "<judge>",
        }
    )
    assert redact(line) == shown


def test_a_folder_reached_through_a_link_is_named_both_ways(tmp_path: Path) -> None:
    """The resolved spelling of a folder behind a symlink is replaced as well."""
    real = tmp_path / "real"
    real.mkdir()
    (tmp_path / "link").symlink_to(real)
    redact = path_redactor({tmp_path / "link": "<work>"})
    assert redact(f"{real}/a {tmp_path}/link/b".encode()) == b"<work>/a <work>/b"


def test_no_folders_leave_the_log_as_it_is() -> None:
    assert path_redactor({})(b"/tmp/x") == b"/tmp/x"
