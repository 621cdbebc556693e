"""A small HTTP server for browser tests: `webui/` at /webui/ and the fixture API at /api/.

It answers the routes the web UI reads with the JSON under `fixtures/`, keeps a little
state that tests can change (the index, submissions, the live event stream) and implements
the long-poll and Server-Sent Events the way CONTRACTS.md describes them.
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

__all__ = ["FixtureApi"]

ROOT = Path(__file__).resolve().parents[2]
WEBUI = ROOT / "webui"
FIXTURES = Path(__file__).resolve().parent / "fixtures"
TYPES = {
    ".html": "text/html; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".svg": "image/svg+xml",
}
SSE_REPLAY = 40
LONG_POLL_MAX_S = 60.0


def _load(path: Path) -> Any:
    return json.loads(path.read_text())


class FixtureApi:
    """The fixture API's state and server; start() binds a free loopback port."""

    def __init__(self, fixtures: Path = FIXTURES) -> None:
        self.fixtures = fixtures
        self.cond = threading.Condition()
        self.stopping = False
        self.reset()
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), _handler_for(self))
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(
            target=self.httpd.serve_forever, name="fixture-api", daemon=True
        )

    @property
    def base_url(self) -> str:
        host, port = self.httpd.server_address[:2]
        return f"http://{host!s}:{port}"

    def start(self) -> FixtureApi:
        self.thread.start()
        return self

    def stop(self) -> None:
        with self.cond:
            self.stopping = True
            self.cond.notify_all()
        self.httpd.shutdown()
        self.httpd.server_close()

    def reset(self) -> None:
        """Back to the fixture files: index, submissions and the event stream."""
        with self.cond:
            self.index: Any = _load(self.fixtures / "index.json")
            self.index_override: bytes | None = None
            self.events: list[dict[str, Any]] = _load(self.fixtures / "events.json")
            self.submissions: dict[str, Any] = {}
            self.cond.notify_all()

    # -- what tests change -------------------------------------------------------------

    def set_index(self, doc: Any) -> None:
        with self.cond:
            self.index = doc
            self.cond.notify_all()

    def serve_raw_index(self, body: bytes | None) -> None:
        """Serve these bytes as index.json (None: back to the document)."""
        with self.cond:
            self.index_override = body

    def publish(self, message: dict[str, Any]) -> None:
        """Append a feed message ({seq, subject, event}) to the live stream."""
        with self.cond:
            self.events.append(message)
            self.cond.notify_all()

    def put_submission(self, detail: dict[str, Any]) -> None:
        """Replace a submission's detail document; wakes its long-polls."""
        with self.cond:
            self.submissions[detail["submission_id"]] = detail
            self.cond.notify_all()

    def submission(self, sid: str) -> dict[str, Any] | None:
        with self.cond:
            if sid in self.submissions:
                return dict(self.submissions[sid])
        path = self.fixtures / "submissions" / f"{sid}.json"
        return _load(path) if re.fullmatch(r"[0-9a-f-]{36}", sid) and path.exists() else None

    def wait(self, predicate: Callable[[], bool], timeout: float) -> None:
        deadline = time.monotonic() + timeout
        with self.cond:
            while not predicate() and not self.stopping and time.monotonic() < deadline:
                self.cond.wait(min(0.5, max(0.0, deadline - time.monotonic())))


def _fresh_heartbeats(doc: Any) -> Any:
    """Heartbeats are live state, not history: date them a few seconds before now."""
    now = time.time()
    for n, runner in enumerate(doc["runners"]):
        beat = now - 2 - 3 * n
        runner["last_heartbeat_at"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(beat))
    return doc


def _handler_for(api: FixtureApi) -> type[BaseHTTPRequestHandler]:
    class Handler(_Handler):
        state = api

    return Handler


class _Handler(BaseHTTPRequestHandler):
    state: FixtureApi
    server_version = "kz-fixture-api"

    def log_message(self, format: str, *args: Any) -> None:
        return

    def do_GET(self) -> None:
        url = urlsplit(self.path)
        path = unquote(url.path)
        query = {k: v[-1] for k, v in parse_qs(url.query).items()}
        try:
            if path == "/webui" or path == "/":
                return self._redirect("/webui/")
            if path.startswith("/webui/"):
                return self._static(path.removeprefix("/webui/") or "index.html")
            if path.startswith("/api/"):
                return self._api(path.removeprefix("/api"), query)
            self._error(404, "not_found", f"no route {path}")
        except (BrokenPipeError, ConnectionResetError):
            return None

    # -- responses ---------------------------------------------------------------------

    def _send(
        self, status: int, body: bytes, ctype: str, headers: dict[str, str] | None = None
    ) -> None:
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        self.end_headers()
        self.wfile.write(body)

    def _json(self, doc: Any, status: int = 200, etag: bool = False) -> None:
        body = json.dumps(doc).encode()
        tag = f'"{hashlib.sha256(body).hexdigest()[:16]}"'
        if etag and self.headers.get("If-None-Match") == tag:
            self.send_response(304)
            self.send_header("ETag", tag)
            self.end_headers()
            return
        self._send(
            status,
            body,
            "application/json",
            {"ETag": tag, "Cache-Control": "no-cache"} if etag else {},
        )

    def _error(self, status: int, code: str, message: str) -> None:
        self._json({"error": {"code": code, "message": message, "details": {}}}, status)

    def _redirect(self, to: str) -> None:
        self.send_response(302)
        self.send_header("Location", to)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def _static(self, rel: str) -> None:
        target = (WEBUI / rel).resolve()
        if not target.is_relative_to(WEBUI) or not target.is_file():
            return self._error(404, "not_found", f"no file {rel}")
        self._send(
            200,
            target.read_bytes(),
            TYPES.get(target.suffix, "application/octet-stream"),
            {"Cache-Control": "no-cache"},
        )
        return None

    # -- the API -----------------------------------------------------------------------

    def _api(self, path: str, q: dict[str, str]) -> None:
        st = self.state
        if path == "/index.json":
            return self._index(q)
        if path == "/events":
            return self._sse()
        if path == "/runners":
            return self._json(_fresh_heartbeats(_load(st.fixtures / "runners.json")))
        if path == "/health":
            return self._json({"status": "ok"})
        if path == "/submissions":
            return self._submissions(q)
        m = re.fullmatch(r"/submissions/([^/]+)(/status|/logs)?", path)
        if m:
            return self._submission(m.group(1), m.group(2), q)
        m = re.fullmatch(r"/kernels/(.+?)(/bench-history)?", path)
        if m:
            return self._kernel(m.group(1), m.group(2))
        self._error(404, "not_found", f"no route /api{path}")
        return None

    def _index(self, q: dict[str, str]) -> None:
        st = self.state
        if "at" in q:
            at = int(q["at"])
            stored = sorted(int(p.stem) for p in (st.fixtures / "index_at").glob("*.json"))
            past = [s for s in stored if s <= at]
            if at < st.index["log_seq"] and past:
                return self._json(_load(st.fixtures / "index_at" / f"{past[-1]}.json"), etag=True)
            if at < st.index["log_seq"]:
                return self._error(404, "unknown_position", f"no index before #{stored[0]}")
        if st.index_override is not None:
            return self._send(200, st.index_override, "application/json")
        self._json(st.index, etag=True)
        return None

    def _kernel(self, kid: str, sub: str | None) -> None:
        kid = kid.replace("%2F", "/")
        folder = self.state.fixtures / "kernels" / kid
        if not re.fullmatch(r"[\w.+-]+(/[\w.+-]+){4}", kid) or not folder.is_dir():
            return self._error(404, "unknown_kernel", f"no kernel {kid}")
        self._json(_load(folder / ("history.json" if sub else "detail.json")))
        return None

    def _submissions(self, q: dict[str, str]) -> None:
        docs = _load(self.state.fixtures / "submissions.json")["submissions"]
        if q.get("kernel_id"):
            docs = [d for d in docs if d["kernel_id"] == q["kernel_id"]]
        limit = int(q.get("limit", "50"))
        self._json({"submissions": docs[:limit], "total": len(docs)})

    def _submission(self, sid: str, sub: str | None, q: dict[str, str]) -> None:
        st = self.state
        doc = st.submission(sid)
        if doc is None:
            return self._error(404, "unknown_submission", f"no submission {sid}")
        if sub == "/logs":
            log = st.fixtures / "submissions" / f"{sid}.log"
            text = doc.get("log_text") or (log.read_text() if log.exists() else None)
            if text is None:
                return self._error(404, "log_unavailable", "no log yet")
            return self._send(200, text.encode(), "text/plain; charset=utf-8")
        if sub == "/status":
            since = int(q.get("since", "-1"))
            timeout = min(float(q.get("timeout", "30")), LONG_POLL_MAX_S)
            st.wait(lambda: (st.submission(sid) or {}).get("version", 0) > since, timeout)
            doc = st.submission(sid) or doc
            status = {
                k: v
                for k, v in doc.items()
                if k not in ("events", "result_document", "log_url", "log_text")
            }
            return self._json({**status, "changed": doc["version"] > since})
        self._json({k: v for k, v in doc.items() if k != "log_text"})
        return None

    def _sse(self) -> None:
        st = self.state
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.end_headers()
        last = self.headers.get("Last-Event-ID")
        with st.cond:
            sent = (
                int(last)
                if last
                else (st.events[-SSE_REPLAY]["seq"] - 1 if len(st.events) > SSE_REPLAY else 0)
            )
        self.wfile.write(b"retry: 1000\n\n")
        self.wfile.flush()
        quiet = 0
        while not st.stopping:
            with st.cond:
                fresh = [m for m in st.events if m["seq"] > sent]
                if not fresh:
                    st.cond.wait(0.5)
            if not fresh:
                quiet += 1
                if quiet % 10 == 0:  # a comment line every ~5 s notices a closed client
                    self.wfile.write(b": keep-alive\n\n")
                    self.wfile.flush()
                continue
            for m in fresh:
                self.wfile.write(f"id: {m['seq']}\ndata: {json.dumps(m)}\n\n".encode())
                sent = m["seq"]
            self.wfile.flush()
