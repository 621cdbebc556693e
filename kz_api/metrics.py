"""Prometheus text exposition of the API's counters and the read models' gauges."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from litestar.enums import ScopeType
from litestar.types import ASGIApp, Message, Receive, Scope, Send

__all__ = ["Metrics", "metrics_middleware", "render_metrics"]


@dataclass
class Metrics:
    """Request counters by method, route template and status."""

    requests: Counter[tuple[str, str, int]] = field(default_factory=Counter)

    def count(self, method: str, route: str, status: int) -> None:
        self.requests[(method, route, status)] += 1


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _labels(**labels: Any) -> str:
    inner = ",".join(f'{k}="{_escape(str(v))}"' for k, v in labels.items())
    return "{" + inner + "}" if inner else ""


def render_metrics(
    metrics: Metrics,
    *,
    queue: dict[str, tuple[int, int]],
    log_seq: int,
    fold_seq: int,
    projector_lag: int,
    runners: int,
    skipped: dict[str, int] | None = None,
) -> str:
    """The metrics as Prometheus text format 0.0.4."""
    lines = [
        "# HELP kz_api_requests_total HTTP requests answered.",
        "# TYPE kz_api_requests_total counter",
    ]
    for (method, route, status), count in sorted(metrics.requests.items()):
        lines.append(
            f"kz_api_requests_total{_labels(method=method, route=route, status=status)} {count}"
        )
    lines += [
        "# HELP kz_queue_depth Submissions per architecture and state.",
        "# TYPE kz_queue_depth gauge",
    ]
    for arch, (queued, running) in sorted(queue.items()):
        lines.append(f"kz_queue_depth{_labels(arch=arch, state='queued')} {queued}")
        lines.append(f"kz_queue_depth{_labels(arch=arch, state='running')} {running}")
    gauges = [
        ("kz_log_seq", "Last sequence of the event log.", log_seq),
        ("kz_fold_seq", "Last sequence folded into the API's read models.", fold_seq),
        ("kz_fold_lag", "Events the read models are behind the log.", max(0, log_seq - fold_seq)),
        ("kz_projector_lag", "Accepted submissions not committed yet.", projector_lag),
        ("kz_runners", "Registered runners.", runners),
    ]
    for name, help_text, value in gauges:
        lines += [f"# HELP {name} {help_text}", f"# TYPE {name} gauge", f"{name} {value}"]
    lines += [
        "# HELP kz_skipped_events_total Stored messages the read models skipped, by rule "
        "(undecodable, misfiled, repeated event_id, unknown type).",
        "# TYPE kz_skipped_events_total counter",
    ]
    for kind in ("undecodable", "misfiled", "repeated", "unknown_type"):
        lines.append(f"kz_skipped_events_total{_labels(kind=kind)} {(skipped or {}).get(kind, 0)}")
    return "\n".join(lines) + "\n"


def metrics_middleware(app: ASGIApp) -> ASGIApp:
    """Count every HTTP answer by method, route template and status."""

    async def middleware(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != ScopeType.HTTP:
            await app(scope, receive, send)
            return
        status = 500

        async def capture(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = int(message["status"])
            await send(message)

        try:
            await app(scope, receive, capture)
        finally:
            ctx = getattr(getattr(scope.get("app"), "state", None), "ctx", None)
            metrics = getattr(ctx, "metrics", None)
            route = str(scope.get("path_template") or "unmatched")
            if isinstance(metrics, Metrics):
                metrics.count(str(scope.get("method", "")), route, status)

    return middleware
