"""Accepted results out, in the field's formats: `GET /api/export/flashinfer-trace` answers
the FlashInfer Trace lines of every accepted result (of one board with `?board=`), or with
`?part=solutions` the Solutions they name (with their sources), `?part=definitions` the
Definitions of boards imported from FlashInfer Trace; JSON lines, as `kz export` writes them."""

from __future__ import annotations

import json
from typing import Annotated, Literal

from litestar import Controller, Response, get
from litestar.params import QueryParameter

from kz_api.context import Ctx
from kz_api.errors import ApiError
from kz_api.openapi import errors
from kz_api.readmodel import ReadModels, SubmissionView
from kz_events.errors import InvalidKernelId, ObjectNotFound
from kz_events.ids import KernelId
from kz_events.lifecycle import Status
from kz_problems.traces import Accepted, export_traces

__all__ = ["ExportController"]

JSON_LINES = "application/x-ndjson"
_ACCEPTED = (Status.ACCEPTED, Status.COMMITTED)


def _accepted(models: ReadModels, board: str | None) -> list[Accepted]:
    """The read models' accepted results (not disqualified, no confirmation runs)."""
    found = []
    for view in models.submissions.values():
        state = view.state
        if state.status not in _ACCEPTED or state.disqualified or state.result is None:
            continue
        if view.submitted.confirms is not None:
            continue
        if board is not None and KernelId.parse(state.kernel_id).group != board:
            continue
        found.append(_record(models, view))
    return found


def _record(models: ReadModels, view: SubmissionView) -> Accepted:
    state = view.state
    at = next((when for _, kind, when, _ in view.events if kind == "accepted"), state.updated_at)
    runner = models.runners.get(state.runner_id or "")
    return Accepted(
        submission_id=state.submission_id,
        kernel_id=state.kernel_id,
        submitter_id=state.submitter_id,
        result=state.result or {},
        package_digest=state.package_digest,
        at=at or view.submitted.occurred_at,
        environment={"device": runner.device} if runner is not None and runner.device else {},
    )


def _board(board: str | None) -> str | None:
    if board is None:
        return None
    parts = board.split("/")
    try:
        if len(parts) != 4:
            raise InvalidKernelId("a board has four segments")
        KernelId(parts[0], parts[1], parts[2], parts[3], "x")
    except InvalidKernelId as exc:
        raise ApiError(400, "invalid_input", f"board must be arch/op_class/sub_class/quant, got "
                       f"{board!r}: {exc.message}") from exc  # fmt: skip
    return board


class ExportController(Controller):
    path = "/api/export"
    tags = ["export"]

    @get(
        "/flashinfer-trace",
        responses=errors(),
        summary="Accepted results as FlashInfer Trace lines (JSONL)",
        media_type=JSON_LINES,
    )
    async def flashinfer_trace(
        self,
        ctx: Ctx,
        board: Annotated[str | None, QueryParameter(max_length=300)] = None,
        part: Annotated[Literal["traces", "solutions", "definitions"], QueryParameter()] = "traces",
    ) -> Response[bytes]:
        results = _accepted(ctx.models, _board(board))
        packages = {}
        for digest in dict.fromkeys(r.package_digest for r in results):
            try:
                files = await ctx.packages.files(digest)
            except ObjectNotFound:
                continue
            packages[digest] = {path: data for path, (_mode, data) in files.items()}
        export = export_traces(results, packages, board=board)
        items = {"traces": export.traces, "solutions": export.solutions,
                 "definitions": export.definitions}[part]  # fmt: skip
        body = b"".join(json.dumps(item).encode() + b"\n" for item in items)
        return Response(body, media_type=JSON_LINES)
