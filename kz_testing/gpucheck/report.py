"""The GPU check's rows, its table (printed last), figures.json and the packed logs."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

__all__ = ["FAIL", "PASS", "SKIP", "Row", "pack_logs", "render_table", "write_outputs"]

PASS, FAIL, SKIP = "PASS", "FAIL", "SKIP"
MAX_LOG_FILES = 5  # with the set-up log scripts/gpu_check.sh writes: at most 6
_FIGURE_WIDTH = 78


@dataclass(frozen=True, slots=True)
class Row:
    """One check: PASS, FAIL or SKIP, its figure (or the reason it failed), and more detail."""

    check: str
    status: str
    figure: str
    detail: str = ""


def render_table(rows: Sequence[Row]) -> str:
    width = max([len(r.check) for r in rows] + [5])
    lines = [f"{'check':<{width}}  status  figure", f"{'-' * width}  ------  {'-' * 30}"]
    for row in rows:
        figure = " ".join(row.figure.split())
        if len(figure) > _FIGURE_WIDTH:
            figure = figure[: _FIGURE_WIDTH - 3] + "..."
        lines.append(f"{row.check:<{width}}  {row.status:<6}  {figure}")
    counts = {s: sum(1 for r in rows if r.status == s) for s in (PASS, FAIL, SKIP)}
    lines.append(f"{counts[PASS]} passed, {counts[FAIL]} failed, {counts[SKIP]} skipped")
    return "\n".join(lines) + "\n"


def pack_logs(logs: dict[str, list[tuple[str, str]]], into: Path) -> list[Path]:
    """Each group of (title, text) parts as one file `<group>.log` under `into`; at most
    MAX_LOG_FILES groups (the rest are appended to the last)."""
    into.mkdir(parents=True, exist_ok=True)
    groups = list(logs.items())
    if len(groups) > MAX_LOG_FILES:
        extra = [part for _, parts in groups[MAX_LOG_FILES - 1 :] for part in parts]
        groups = [*groups[: MAX_LOG_FILES - 1], ("more", extra)]
    written = []
    for name, parts in groups:
        path = into / f"{name}.log"
        with path.open("a") as handle:
            for title, text in parts:
                handle.write(f"===== {title} =====\n{text}")
                if not text.endswith("\n"):
                    handle.write("\n")
        written.append(path)
    return written


def write_outputs(out: Path, rows: Sequence[Row], figures: dict[str, Any]) -> str:
    """figures.json (every figure and row) and table.txt; returns the table."""
    out.mkdir(parents=True, exist_ok=True)
    document = {"rows": [asdict(r) for r in rows], "figures": figures}
    (out / "figures.json").write_text(json.dumps(document, indent=2, default=str) + "\n")
    table = render_table(rows)
    (out / "table.txt").write_text(table)
    return table
