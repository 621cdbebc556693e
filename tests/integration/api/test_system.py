"""Health, index.json (ETag, 304, gzip, ?at=), SSE, audit, metrics, schema, web UI, and the
error envelope on Litestar's own 404, 405 and validation answers."""

from __future__ import annotations

import asyncio
import gzip
import json
import re
from typing import Any

import pytest
from api_helpers import KERNEL, Api, import_kernel, tarball

from kz_events.server import EmbeddedServer

pytestmark = pytest.mark.integration


def _code(resp: Any) -> str:
    return str(resp.json()["error"]["code"])


async def test_health_reports_positions_and_queues(api: Api) -> None:
    """Health is ok with the stream position, fold lag and queue depth per arch."""
    await api.submit(tarball())
    body = (await api.client.get("/api/health")).json()
    assert body["status"] == "ok" and body["nats"]["stream_seq"] == 1
    assert body["fold"] == {"seq": 1, "lag": 0, "caught_up": True}
    assert body["queue"] == {"cpu": {"queued": 1, "running": 0}}


async def test_health_is_503_when_nats_is_gone(api: Api, nats_server: EmbeddedServer) -> None:
    """With the NATS server stopped, health answers 503 with the envelope."""
    nats_server.stop()
    try:
        resp = await api.client.get("/api/health")
        assert resp.status_code == 503 and _code(resp) == "log_unavailable"
        assert resp.json()["error"]["details"]["nats"]["connected"] is False
    finally:
        nats_server.start()
        for _ in range(100):
            if api.log.connected and (await api.client.get("/api/health")).status_code == 200:
                break
            await asyncio.sleep(0.1)


async def test_index_etag_gzip_and_at(api: Api) -> None:
    """index.json carries an ETag, answers 304 to If-None-Match, gzips, and folds ?at=<seq>."""
    first = await import_kernel(api)
    await import_kernel(api, "sm90/Attention/MHA/fp16/flash_v3")
    resp = await api.client.get("/api/index.json")
    assert resp.status_code == 200
    etag = resp.headers["etag"]
    doc = resp.json()
    assert doc["log_seq"] == 2 and len(doc["kernels"]) == 2
    same = await api.client.get("/api/index.json", headers={"If-None-Match": etag})
    assert same.status_code == 304 and same.content == b""
    zipped = await api.client.get("/api/index.json", headers={"Accept-Encoding": "gzip"})
    assert zipped.headers["content-encoding"] == "gzip"
    past = (await api.client.get("/api/index.json", params={"at": first})).json()
    assert past["log_seq"] == first and [k["id"] for k in past["kernels"]] == [KERNEL]
    future = await api.client.get("/api/index.json", params={"at": 99})
    assert future.status_code == 400 and _code(future) == "invalid_input"
    assert (
        json.loads(
            gzip.decompress(zipped.content) if zipped.content[:2] == b"\x1f\x8b" else zipped.content
        )["log_seq"]
        == 2
    )


async def test_events_stream_is_resumable(api: Api) -> None:
    """SSE ids are stream sequences; Last-Event-ID resumes after the given one."""
    await import_kernel(api)
    await import_kernel(api, "sm90/Attention/MHA/fp16/flash_v3")
    all_ = await api.client.get("/api/events", params={"limit": 2})
    assert all_.headers["content-type"].startswith("text/event-stream")
    assert "id: 1" in all_.text and "id: 2" in all_.text and "event: imported" in all_.text
    resumed = await api.client.get(
        "/api/events", params={"limit": 1}, headers={"Last-Event-ID": "1"}
    )
    assert "id: 2" in resumed.text and "id: 1\r\n" not in resumed.text


async def test_audit_report(api: Api) -> None:
    """/api/audit is 404 until `kz audit` wrote its report, then serves it."""
    missing = await api.client.get("/api/audit")
    assert missing.status_code == 404 and _code(missing) == "no_audit"
    api.settings.data_dir.mkdir(parents=True, exist_ok=True)
    (api.settings.data_dir / "audit.json").write_text('{"ok": true, "checked": 3}')
    assert (await api.client.get("/api/audit")).json() == {"ok": True, "checked": 3}


async def test_metrics_in_prometheus_format(api: Api) -> None:
    """/metrics counts requests and shows queue depth and lags."""
    await api.submit(tarball())
    text = (await api.client.get("/metrics")).text
    assert 'kz_queue_depth{arch="cpu",state="queued"} 1' in text
    assert "kz_fold_lag 0" in text and "kz_projector_lag 0" in text
    assert 'kz_api_requests_total{method="POST",route="/api/submissions",status="202"} 1' in text


async def test_schema_and_webui(api: Api) -> None:
    """The OpenAPI document and the web UI folder are served."""
    schema = (await api.client.get("/schema/openapi.json")).json()
    assert "/api/submissions" in schema["paths"]
    docs = await api.client.get("/schema")
    assert docs.status_code == 200 and docs.headers["content-type"].startswith("text/html")
    assert "/schema/openapi.json" in docs.text
    assert not re.search(r"""(src|href)=["']?(https?:)?//""", docs.text)  # nothing from elsewhere
    webui = await api.client.get("/webui/js/api.js")
    assert webui.status_code == 200


@pytest.mark.parametrize(
    ("method", "path", "status", "code"),
    [
        ("GET", "/api/nowhere", 404, "not_found"),
        ("PUT", "/api/health", 405, "method_not_allowed"),
        ("GET", "/api/submissions?limit=0", 400, "invalid_input"),
        ("GET", "/api/events?limit=abc", 400, "invalid_input"),
    ],
)
async def test_framework_errors_use_the_envelope(
    api: Api, method: str, path: str, status: int, code: str
) -> None:
    """Litestar's own 404, 405 and validation answers come in the error envelope."""
    resp = await api.client.request(method, path)
    assert resp.status_code == status
    error = resp.json()["error"]
    assert error["code"] == code and error["message"] and isinstance(error["details"], dict)
    assert "Traceback" not in resp.text
