"""Health, index.json (ETag, gzip, `?at=`), the last audit report and Prometheus metrics."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated, Any

import msgspec
import nats.errors
from litestar import Controller, Response, get
from litestar.openapi import ResponseSpec
from litestar.params import HeaderParameter, QueryParameter

from kz_api.context import Ctx
from kz_api.controllers.events import MAX_SEQ
from kz_api.errors import ApiError
from kz_api.index_cache import RenderedIndex, rendered
from kz_api.metrics import render_metrics
from kz_api.models import FoldDoc, HealthDoc, NatsDoc, QueueDepth, SkippedDoc, SkippedEventDoc
from kz_api.openapi import errors
from kz_events.errors import LogUnavailable
from kz_events.screen import Screen
from kz_projector.index import render_index
from kz_projector.index_writer import build_index

__all__ = ["SystemController"]

NOT_MODIFIED = ResponseSpec(data_container=None, description="Not modified")


async def _log_seq(ctx: Ctx) -> int | None:
    """The log's last sequence; None when NATS is away or the event stream is gone."""
    if not ctx.log.connected:
        return None
    try:
        return await ctx.log.last_seq()
    except (LogUnavailable, nats.errors.Error):
        return None


async def _index_at(ctx: Ctx, at: int) -> RenderedIndex:
    last = await ctx.log.last_seq()
    if at > last:
        raise ApiError(
            400, "invalid_input", f"at must be at most the log's last sequence {last}, got {at}"
        )

    async def build(upto: int) -> RenderedIndex:
        state = await build_index(ctx.log, ctx.packages, upto=upto)
        return rendered(render_index(state), upto)

    return await ctx.time_travel.get(at, build)


def _index_response(
    index: RenderedIndex, if_none_match: str | None, accept_encoding: str | None
) -> Response[bytes]:
    headers = {"ETag": index.etag, "Cache-Control": "no-cache", "Vary": "Accept-Encoding"}
    if if_none_match and index.etag in {tag.strip() for tag in if_none_match.split(",")}:
        return Response(b"", status_code=304, headers=headers)
    if accept_encoding and "gzip" in accept_encoding:
        headers["Content-Encoding"] = "gzip"
        return Response(index.gzipped, media_type="application/json", headers=headers)
    return Response(index.body, media_type="application/json", headers=headers)


def _skipped(screen: Screen) -> SkippedDoc:
    return SkippedDoc(
        total=screen.total,
        by_kind=dict(sorted(screen.counts.items())),
        recent=[
            SkippedEventDoc(seq=s.seq, subject=s.subject, kind=s.kind, reason=s.reason)
            for s in list(screen.recent)[-10:]
        ],
    )


class SystemController(Controller):
    path = "/"
    tags = ["system"]

    @get("/api/health", responses=errors(), summary="Health, stream position, lags, queues")
    async def health(self, ctx: Ctx) -> HealthDoc:
        log_seq = await _log_seq(ctx)
        models = ctx.models
        doc = HealthDoc(
            status="ok" if log_seq is not None else "unavailable",
            nats=NatsDoc(connected=log_seq is not None, stream_seq=log_seq),
            fold=FoldDoc(
                seq=models.seq,
                lag=None if log_seq is None else max(0, log_seq - models.seq),
                caught_up=log_seq is not None and models.seq >= log_seq,
            ),
            projector_lag=models.awaiting_commit(),
            queue={
                a: QueueDepth(queued=q, running=r) for a, (q, r) in models.queue_depth().items()
            },
            runners=len(models.live_runners(datetime.now(UTC))),
            skipped_events=_skipped(models.screen),
        )
        if log_seq is None:
            raise ApiError(
                503,
                "log_unavailable",
                "the event log (NATS, stream KZ_EVENTS) is unreachable or gone",
                details=msgspec.to_builtins(doc),
            )
        return doc

    @get(
        "/api/index.json",
        responses={**errors(), 304: NOT_MODIFIED},
        summary="The projected index (ETag, gzip, ?at=<seq>)",
    )
    async def index(
        self,
        ctx: Ctx,
        at: Annotated[int | None, QueryParameter(ge=0, le=MAX_SEQ)] = None,
        if_none_match: Annotated[
            str | None, HeaderParameter(name="If-None-Match", required=False)
        ] = None,
        accept_encoding: Annotated[
            str | None, HeaderParameter(name="Accept-Encoding", required=False)
        ] = None,
    ) -> Response[dict[str, Any]]:
        index = ctx.index_cache.get(ctx.models) if at is None else await _index_at(ctx, at)
        return _index_response(index, if_none_match, accept_encoding)  # type: ignore[return-value]

    @get("/api/audit", responses=errors(404), summary="The last audit report")
    async def audit(self, ctx: Ctx) -> dict[str, Any]:
        path = ctx.settings.data_dir / "audit.json"
        if not path.is_file():
            raise ApiError(404, "no_audit", "no audit report yet: run `kz audit`")
        try:
            report = msgspec.json.decode(path.read_bytes())
        except msgspec.DecodeError as exc:
            raise ApiError(500, "bad_audit", "the audit report is not valid JSON") from exc
        if not isinstance(report, dict):
            raise ApiError(500, "bad_audit", "the audit report is not a JSON object")
        return report

    @get(
        "/metrics",
        media_type="text/plain; version=0.0.4",
        responses=errors(),
        summary="Prometheus metrics",
    )
    async def metrics(self, ctx: Ctx) -> str:
        log_seq = await _log_seq(ctx)
        models = ctx.models
        return render_metrics(
            ctx.metrics,
            queue=models.queue_depth(),
            log_seq=log_seq if log_seq is not None else models.seq,
            fold_seq=models.seq,
            projector_lag=models.awaiting_commit(),
            runners=len(models.live_runners(datetime.now(UTC))),
            skipped=dict(models.screen.counts),
        )
