"""The JSON documents of `kz --json` and of the MCP tools: one msgspec Struct per document
body, the minimum every answer holds (answers may carry more fields, never fewer).

`schemas/cli.schema.json` is generated from these (`python -m kz_cli.documents`; a test fails
when it drifts): each command's document is its body plus `command` and `schema_version`, and
an error is `{"error": {"code", "message", "fix"}}`. The MCP tools' output schemas are the same
bodies, so an agent reads one contract through either door.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any, Literal

import msgspec

from kz_cli.contract import SCHEMA_VERSION

__all__ = [
    "COMMAND_DOCUMENTS",
    "SCHEMA_PATH",
    "BenchDoc",
    "BoardRow",
    "BoardsDoc",
    "ErrorBody",
    "ErrorDoc",
    "ExportDoc",
    "FileDoc",
    "KernelDoc",
    "KernelsDoc",
    "LeaseDoc",
    "LogDoc",
    "ProblemsImportDoc",
    "RankingDoc",
    "StarterDoc",
    "StatusDoc",
    "ValidateDoc",
    "cli_schema",
    "object_schema",
]

SCHEMA_PATH = Path(__file__).resolve().parents[1] / "schemas" / "cli.schema.json"


class _Doc(msgspec.Struct, kw_only=True):
    pass


class ErrorBody(_Doc, kw_only=True):
    """What went wrong, in one sentence, and what to do about it."""

    code: str
    message: str
    fix: str
    details: dict[str, Any] | None = None


class ErrorDoc(_Doc, kw_only=True):
    error: ErrorBody


class StatusDoc(_Doc, kw_only=True):
    """A submission's state (`kz submit`, `kz status`; the MCP submit and status tools):
    queued (with its queue position), running, then accepted/committed, rejected, failed or
    cancelled; an ending other than accepted carries `error` with its reason and a fix."""

    submission_id: str
    kernel_id: str | None = None
    status: str
    version: int | None = None
    queue_position: int | None = None
    attempt: int | None = None
    runner_id: str | None = None
    result: dict[str, Any] | None = None
    commits: dict[str, str] | None = None
    provenance: dict[str, Any] | None = None
    log_url: str
    error: ErrorBody | None = None


class ValidateDoc(_Doc, kw_only=True):
    valid: bool
    kernel_id: str | None = None
    sha256: str | None = None
    checked_against: str | None = None
    judge: str | None = None
    error: ErrorBody | None = None


class BenchDoc(_Doc, kw_only=True):
    """A local judgement (`kz bench`): the outcome (accepted, rejected, build_failed,
    benchmark_error, invalid_result, timed_out), its sentence, the result document, and for
    anything but accepted the task's log."""

    outcome: str
    message: str
    result: dict[str, Any] | None
    log: str | None = None
    error: ErrorBody | None = None


class LogDoc(_Doc, kw_only=True):
    submission_id: str
    log_url: str
    log: str
    truncated: bool


class LeaseDoc(_Doc, kw_only=True):
    kernel_id: str
    holder: str | None
    lease_id: str | None = None
    expires_at: str | None = None


class KernelsDoc(_Doc, kw_only=True):
    items: list[dict[str, Any]]
    total: int


class BoardRow(_Doc, kw_only=True):
    board: str
    reviewed: bool
    judge_kernel: str | None
    reference: str | None
    kernels: int


class BoardsDoc(_Doc, kw_only=True):
    boards: list[BoardRow]
    total: int


class RankingDoc(_Doc, kw_only=True):
    """One board's ranked kernels: rank, kernel_id, score (speed-up over the board's pinned
    reference, with its interval), title and the provenance of its current result."""

    board: str
    log_seq: int | None
    ranking: list[dict[str, Any]]


class KernelDoc(_Doc, kw_only=True):
    """A kernel's detail (desc, scoreboard, files, commits, board) and its accepted history."""

    kernel: dict[str, Any]
    history: dict[str, Any] | None


class FileDoc(_Doc, kw_only=True):
    """One file of a package: its path, its content (UTF-8 text, or base64 for bytes that are
    not), and whether it is executable."""

    path: str
    content: str
    encoding: Literal["utf-8", "base64"] = "utf-8"
    executable: bool = False


class StarterDoc(_Doc, kw_only=True):
    """A new kernel's package (`kz new`; the MCP start_kernel tool returns its files)."""

    kernel_id: str
    judge_kernel: str
    reference: dict[str, Any] | None
    files: list[Any]
    next: list[str]
    dir: str | None = None


class ServiceDoc(_Doc, kw_only=True):
    """A long-running command (up, server, api, runner, projector, mcp --http) says it
    started; its logs go to stderr."""

    state: Literal["starting", "ready"]


class IndexDoc(_Doc, kw_only=True):
    path: str | None
    bytes: int
    log_seq: int | None
    index: dict[str, Any] | None = None


class AuditDoc(_Doc, kw_only=True):
    ok: bool


class ImportDoc(_Doc, kw_only=True):
    imported: list[dict[str, Any]]


class ProblemsImportDoc(_Doc, kw_only=True):
    """What `kz problems import` made: each problem's board (`state` imported, unchanged or
    written with --out), and the problems it skipped with the reason and where."""

    format: str
    path: str
    arch: str
    boards: list[dict[str, Any]]
    skipped: list[dict[str, Any]]
    counts: dict[str, int]


class ExportDoc(_Doc, kw_only=True):
    """What `kz export` wrote: the Trace lines' file, the data set's folder beside it, and how
    many traces, solutions and definitions."""

    format: str
    out: str
    folder: str
    board: str | None
    traces: int
    solutions: int
    definitions: int


class AgentsInitDoc(_Doc, kw_only=True):
    flavour: str
    written: list[str]


# The body of each command's `--json` document (`events tail --json` writes JSON Lines: one
# event object per line, each with its stream `seq`).
COMMAND_DOCUMENTS: dict[str, type[_Doc]] = {
    "submit": StatusDoc,
    "status": StatusDoc,
    "validate": ValidateDoc,
    "bench": BenchDoc,
    "logs": LogDoc,
    "claim": LeaseDoc,
    "kernels": KernelsDoc,
    "boards": BoardsDoc,
    "boards BOARD": RankingDoc,
    "new": StarterDoc,
    "index": IndexDoc,
    "audit": AuditDoc,
    "import": ImportDoc,
    "agents init": AgentsInitDoc,
    "problems import": ProblemsImportDoc,
    "export": ExportDoc,
    "up": ServiceDoc,
    "server": ServiceDoc,
    "api": ServiceDoc,
    "runner": ServiceDoc,
    "projector": ServiceDoc,
    "mcp": ServiceDoc,
}


def object_schema(cls: type[msgspec.Struct]) -> dict[str, Any]:
    """A Struct's JSON Schema with the object at its root (`$defs` beside it), as MCP wants."""
    (ref,), defs = msgspec.json.schema_components([cls], ref_template="#/$defs/{name}")
    name = ref["$ref"].rsplit("/", 1)[1]
    root = dict(defs[name])
    others = {k: v for k, v in defs.items() if k != name}
    return {**root, "$defs": others} if others else root


def cli_schema() -> dict[str, Any]:
    """The schema of every `--json` document: one `$defs` entry per command."""
    found: set[type[_Doc]] = {*COMMAND_DOCUMENTS.values(), ErrorDoc}
    classes = sorted(found, key=lambda c: c.__name__)
    _, defs = msgspec.json.schema_components(classes, ref_template="#/$defs/{name}")
    header: dict[str, Any] = {
        "command": {"type": "string"},
        "schema_version": {"const": SCHEMA_VERSION},
    }
    commands: dict[str, Any] = {
        name: {
            "allOf": [{"$ref": f"#/$defs/{cls.__name__}"}],
            "properties": {**header, "command": {"const": name.split(" BOARD")[0]}},
            "required": ["command", "schema_version"],
        }
        for name, cls in COMMAND_DOCUMENTS.items()
    }
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": "kz:cli",
        "title": "kz --json documents",
        "description": __doc__,
        "x-schema-version": SCHEMA_VERSION,
        "x-commands": commands,
        "$defs": defs,
    }


def render() -> str:
    return json.dumps(cli_schema(), indent=2, sort_keys=True) + "\n"


if __name__ == "__main__":  # pragma: no cover - the generator's entry point
    if sys.argv[1:] == ["--check"]:
        sys.exit(0 if SCHEMA_PATH.read_text() == render() else 1)
    SCHEMA_PATH.write_text(render())
