"""Hostile clients against `kz api` as a real process: wrong and missing auth, malformed JSON and
multipart, bodies over the limit, slow-loris connections, endless headers, 2,000 long-polls,
event-feed readers that never read, cursors past the log, oversized registrations and a crowd
asking for past indexes.

The server must answer each with the error envelope (or close the connection), keep serving a
normal request meanwhile, keep its memory bounded, and leave no event and no object behind.
"""

from __future__ import annotations

import asyncio
import json
import socket
import uuid
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
from hostile_helpers import (
    HEAD_TIMEOUT_S,
    KERNEL,
    RUNNER_KEY,
    SLOW_READER_S,
    TOKEN,
    UPLOAD_LIMIT,
    ApiProcess,
    RawAnswer,
    log_state,
    parse_answer,
    raw_request,
    read_all,
    seed_registrations,
    tarball,
)

pytestmark = pytest.mark.system

MIB = 1024 * 1024
# Generous bounds on the API process's resident memory above its idle baseline.
ATTACK_RSS_BOUND = 300 * MIB
AFTER_RSS_BOUND = 200 * MIB
FEED_RSS_BOUND = 150 * MIB  # 100 stalled event streams: before the bounds they took 500 MiB
SUBMITTER = {"Authorization": f"Bearer {TOKEN}"}
RUNNER = {"X-Runner-Key": RUNNER_KEY}


@pytest.fixture(scope="module")
def api(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ApiProcess]:
    """One `kz api` process (token mode, 256 KiB upload limit) for the whole module."""
    proc = ApiProcess(tmp_path_factory.mktemp("hostile")).start()
    try:
        yield proc
    finally:
        proc.stop()


@asynccontextmanager
async def leaves_no_trace(api: ApiProcess) -> AsyncIterator[None]:
    """Assert that what runs inside appends no event, stores no object and leaves no
    temporary file behind (the API cleans up after each refused upload)."""
    before = await log_state(api.nats.url)
    yield
    assert await log_state(api.nats.url) == before
    for _ in range(50):  # a handler cleans up after its client is gone, a moment later
        if not api.leftovers():
            break
        await asyncio.sleep(0.1)
    assert api.leftovers() == []


def envelope(answer: RawAnswer | httpx.Response) -> dict[str, Any]:
    """The `error` object of an answer, after checking the envelope's shape."""
    body = answer.body if isinstance(answer, RawAnswer) else answer.content
    doc = json.loads(body)
    assert set(doc) == {"error"}, doc
    error = doc["error"]
    assert isinstance(error["code"], str) and error["code"], doc
    assert isinstance(error["message"], str) and error["message"], doc
    assert isinstance(error.get("details", {}), dict), doc
    return dict(error)


async def control_request(api: ApiProcess) -> None:
    """A normal request from an innocent client gets its answer (within a generous 10 s)."""
    async with httpx.AsyncClient(base_url=api.base, timeout=10) as client:
        resp = await client.get("/api/kernels")
    assert resp.status_code == 200


def _dummy(param: dict[str, Any]) -> str:
    kind = param.get("schema", {}).get("type", "string")
    return {"integer": "1", "number": "1", "array": "cpu"}.get(kind, "x")


def protected_operations(schema: dict[str, Any]) -> list[tuple[str, str, dict[str, str], str]]:
    """(method, path, other required headers, runner|submitter) of each operation that can 401;
    path and query parameters get dummy values so that auth is the request's only fault."""
    out = []
    auth = {"authorization", "x-submitter-id", "x-runner-key"}
    for template, operations in schema["paths"].items():
        for method, op in operations.items():
            if not isinstance(op, dict) or "401" not in op.get("responses", {}):
                continue
            path, query, headers = template, [], {}
            for param in op.get("parameters", []):
                name, where = param["name"], param["in"]
                if where == "path":
                    value = str(uuid.uuid4()) if name == "submission_id" else "x"
                    path = path.replace("{" + name + "}", value)
                elif where == "query" and param.get("required"):
                    query.append(f"{name}={_dummy(param)}")
                elif where == "header" and param.get("required") and name.lower() not in auth:
                    headers[name] = _dummy(param)
            names = {p["name"].lower() for p in op.get("parameters", [])}
            role = "runner" if "x-runner-key" in names else "submitter"
            full = path + ("?" + "&".join(query) if query else "")
            out.append((method.upper(), full, headers, role))
    return out


WRONG_AUTH: dict[str, list[dict[str, str]]] = {
    "submitter": [
        {},
        {"Authorization": "Bearer not-a-known-token"},
        {"Authorization": f"Basic {TOKEN}"},
        {"Authorization": "Bearer"},
        {"X-Submitter-Id": "alice"},  # the open-mode header proves nothing in token mode
        {"X-Runner-Key": RUNNER_KEY},  # a runner key is not a submitter
    ],
    "runner": [
        {},
        {"X-Runner-Key": "not-a-known-key"},
        {"X-Runner-Key": TOKEN},  # a submitter token is not a runner key
        {"Authorization": f"Bearer {TOKEN}"},
    ],
}


async def test_every_protected_endpoint_refuses_missing_and_wrong_auth(api: ApiProcess) -> None:
    """Each operation the schema marks 401 answers 401 `unauthenticated` to missing or wrong
    credentials, and none of those requests leaves a trace."""
    async with httpx.AsyncClient(base_url=api.base, timeout=30) as client:
        schema = (await client.get("/schema/openapi.json")).json()
        operations = protected_operations(schema)
        assert len(operations) >= 12, [op[:2] for op in operations]
        async with leaves_no_trace(api):
            for method, path, headers, role in operations:
                for auth in WRONG_AUTH[role]:
                    resp = await client.request(method, path, headers={**headers, **auth})
                    assert resp.status_code == 401, (method, path, auth, resp.text)
                    assert envelope(resp)["code"] == "unauthenticated", (method, path, auth)


def _multipart(boundary: str, parts: list[tuple[str, str | None, bytes]]) -> bytes:
    out = b""
    for name, filename, data in parts:
        disposition = f'form-data; name="{name}"' + (f'; filename="{filename}"' if filename else "")
        out += f"--{boundary}\r\nContent-Disposition: {disposition}\r\n\r\n".encode()
        out += data + b"\r\n"
    return out + f"--{boundary}--\r\n".encode()


def malformed_uploads(valid: bytes) -> list[tuple[str, dict[str, str], bytes]]:
    """(why, headers, body) of upload requests that must be refused with a 4xx envelope."""
    mp = "multipart/form-data; boundary=XyZ"
    good = [("kernel_id", None, KERNEL.encode()), ("package", "p.tar.gz", valid)]
    many = [(f"f{i}", None, b"v") for i in range(100)]
    return [
        ("no content type", {}, valid),
        ("JSON instead of multipart", {"Content-Type": "application/json"}, b'{"a": 1}'),
        ("multipart without boundary", {"Content-Type": "multipart/form-data"}, valid),
        ("garbage body", {"Content-Type": mp}, b"\x00\xff garbage without any boundary"),
        ("truncated multipart", {"Content-Type": mp}, _multipart("XyZ", good)[:-40]),
        ("boundary mismatch", {"Content-Type": mp}, _multipart("Other", good)),
        ("no package part", {"Content-Type": mp}, _multipart("XyZ", good[:1])),
        ("no kernel_id", {"Content-Type": mp}, _multipart("XyZ", good[1:])),
        (
            "package not gzip",
            {"Content-Type": mp},
            _multipart("XyZ", [good[0], ("package", "p.tar.gz", b"not a tarball" * 50)]),
        ),
        (
            "bad kernel id",
            {"Content-Type": mp},
            _multipart("XyZ", [("kernel_id", None, b"../../etc/passwd"), good[1]]),
        ),
        ("too many parts", {"Content-Type": mp}, _multipart("XyZ", [*many, *good])),
        (
            "oversized text field",
            {"Content-Type": mp},
            _multipart("XyZ", [("message", None, b"m" * (UPLOAD_LIMIT // 2)), *good]),
        ),
    ]


MALFORMED_JSON: list[bytes] = [
    b"{",
    b"",
    b"[1, 2, 3]",
    b'{"runner_id": 5, "arches": "cpu"}',
    b'{"runner_id": "r1", "arches": []}',
    b'{"runner_id": "r1", "arches": ["cpu"], "unknown_field": 1}',
    b"\xff\xfe\x00garbage",
    b'{"runner_id": "' + b"r" * 100_000 + b'", "arches": ["cpu"]}',
]


async def test_malformed_json_and_multipart_get_the_envelope(
    api: ApiProcess, tmp_path: Path
) -> None:
    """Broken JSON bodies and broken multipart uploads from authenticated clients are refused
    with a 4xx envelope, and leave no event and no object."""
    valid = tarball("valid")
    json_paths = ["/api/runner/register", "/api/runner/claim", "/api/runner/heartbeat"]
    async with httpx.AsyncClient(base_url=api.base, timeout=30) as client, leaves_no_trace(api):
        for path in json_paths:
            for body in MALFORMED_JSON:
                resp = await client.post(
                    path, content=body, headers={**RUNNER, "Content-Type": "application/json"}
                )
                assert 400 <= resp.status_code < 500, (path, body[:40], resp.text)
                envelope(resp)
        for why, headers, body in malformed_uploads(valid):
            resp = await client.post(
                "/api/submissions", content=body, headers={**SUBMITTER, **headers}
            )
            assert 400 <= resp.status_code < 500, (why, resp.status_code, resp.text)
            assert envelope(resp)["code"] != "internal_error", why


async def test_deeply_nested_json_is_refused_as_invalid_input(api: ApiProcess) -> None:
    """A JSON body nested 100,000 deep is refused with a 400 envelope, not a server error."""
    body = b"[" * 100_000 + b"]" * 100_000
    async with httpx.AsyncClient(base_url=api.base, timeout=30) as client, leaves_no_trace(api):
        resp = await client.post(
            "/api/runner/register",
            content=body,
            headers={**RUNNER, "Content-Type": "application/json"},
        )
    assert resp.status_code == 400 and envelope(resp)["code"] == "invalid_input", resp.text


async def _send_big(
    port: int, head: str, chunk: bytes, total: int, *, chunked: bool
) -> tuple[RawAnswer, int]:
    """Stream `total` bytes (chunked, or under an honest Content-Length) until done or the
    server stops reading; its answer and how many bytes went out."""
    framing = "Transfer-Encoding: chunked" if chunked else f"Content-Length: {total}"
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    answer = asyncio.create_task(read_all(reader, 60))
    sent = 0
    try:
        writer.write(head.encode() + f"\r\n{framing}\r\n\r\n".encode())
        try:
            while sent < total and not answer.done():
                writer.write(f"{len(chunk):x}\r\n".encode() + chunk + b"\r\n" if chunked else chunk)
                await writer.drain()
                sent += len(chunk)
                # drain() returns without yielding while the socket takes the bytes: let the
                # reader take the answer as it arrives, as a client reading while it sends does
                # (else the answer waits unread until the server ends its linger with a reset).
                await asyncio.sleep(0)
        except ConnectionError:
            pass  # the server answered and closed while we were still sending: expected
        return parse_answer(await answer), sent
    finally:
        writer.close()


async def test_bodies_over_the_limit_are_refused_with_413(api: ApiProcess) -> None:
    """Uploads over the limit (declared by Content-Length, or streamed with an honest length or
    chunked) and oversized JSON bodies are refused with a 413 envelope, before the body ends,
    without storing anything."""
    upload_head = (
        "POST /api/submissions HTTP/1.1\r\nHost: t\r\n"
        f"Authorization: Bearer {TOKEN}\r\nContent-Type: multipart/form-data; boundary=XyZ"
    )
    json_head = (
        "POST /api/runner/register HTTP/1.1\r\nHost: t\r\n"
        f"X-Runner-Key: {RUNNER_KEY}\r\nContent-Type: application/json"
    )
    # Far over what the server lingers over after answering (64 MiB: a client that sends all
    # first still reads its 413), so an answer that comes first stops the sending.
    total = 256 * MIB
    rss_before = api.rss_bytes()
    async with leaves_no_trace(api):
        declared = await raw_request(
            api.port, upload_head + f"\r\nContent-Length: {10**9}", b"--XyZ\r\n"
        )
        streamed = {
            "upload, honest length": await _send_big(
                api.port, upload_head, b"A" * 65536, total, chunked=False
            ),
            "upload, chunked": await _send_big(
                api.port, upload_head, b"B" * 65536, total, chunked=True
            ),
            "JSON, chunked": await _send_big(
                api.port, json_head, b"[" * 65536, total, chunked=True
            ),
        }
        await control_request(api)
    assert declared.status == 413 and envelope(declared)["code"] == "package_too_large"
    for why, (answer, sent) in streamed.items():
        assert sent < total, f"{why}: no answer before the whole body went out"
        assert answer.status == 413, (why, answer)
        expected = "body_too_large" if why.startswith("JSON") else "package_too_large"
        assert envelope(answer)["code"] == expected, why
    assert api.rss_bytes() - rss_before < AFTER_RSS_BOUND


async def _loris(port: int, head: bytes, trickle: bytes, stop: asyncio.Event) -> bool:
    """Open a connection, send `head`, then one byte of `trickle` every 0.5 s until `stop`;
    True when the server closed the connection on its own."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(head)
        await writer.drain()
        for byte in trickle:
            if stop.is_set() or reader.at_eof():
                break
            writer.write(bytes([byte]))
            await writer.drain()
            await asyncio.sleep(0.5)
        return reader.at_eof()
    except ConnectionError:
        return True
    finally:
        writer.close()


async def test_slow_loris_clients_do_not_starve_others(api: ApiProcess) -> None:
    """300 connections trickling request heads and upload bodies a byte at a time leave the
    server answering others, with bounded memory and no trace; those still sending their head
    after the head timeout are cut off."""
    stop = asyncio.Event()
    heads = (
        b"GET /api/kernels HTTP/1.1\r\nHost: t\r\nX-Slow: ",
        b"POST /api/submissions HTTP/1.1\r\nHost: t\r\n"
        + f"Authorization: Bearer {TOKEN}\r\n".encode()
        + b"Content-Type: multipart/form-data; boundary=XyZ\r\nContent-Length: 100000\r\n\r\n"
        + b'--XyZ\r\nContent-Disposition: form-data; name="package"; filename="p"\r\n\r\n',
    )
    rss_before = api.rss_bytes()
    async with leaves_no_trace(api):
        tasks = [
            asyncio.create_task(_loris(api.port, heads[i % 2], b"a" * 1000, stop))
            for i in range(300)
        ]
        await asyncio.sleep(3)
        rss_during = api.rss_bytes()
        for _ in range(3):
            await control_request(api)
        await asyncio.sleep(HEAD_TIMEOUT_S)
        stop.set()
        closed = await asyncio.gather(*tasks)
    assert api.alive()
    assert rss_during - rss_before < ATTACK_RSS_BOUND
    assert all(closed[0::2]), f"{closed[0::2].count(False)} slow request heads were not cut off"
    await control_request(api)


async def test_endless_request_head_is_cut_off(api: ApiProcess) -> None:
    """A client that sends header lines without end is answered or dropped after a bounded
    amount, instead of the server buffering it all."""
    reader, writer = await asyncio.open_connection("127.0.0.1", api.port)
    # A small send buffer, so what went out is what the server took plus a little in flight,
    # not megabytes the kernel queues for a server that is slow to answer on a busy host.
    writer.get_extra_info("socket").setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 64 * 1024)
    answered = asyncio.create_task(read_all(reader, 60))  # a client stops once answered
    sent = 0
    try:
        writer.write(b"GET /api/health HTTP/1.1\r\nHost: t\r\n")
        while sent < 16 * MIB and not answered.done():
            line = b"X-Pad-%d: " % sent + b"a" * 1000 + b"\r\n"
            writer.write(line)
            await writer.drain()
            await asyncio.sleep(0)  # let the answer in
            sent += len(line)
    except ConnectionError:
        pass  # reset by the server: cut off
    finally:
        writer.close()
        answered.cancel()
    assert sent < 1 * MIB, f"the server kept reading a request head of {sent} bytes"
    await control_request(api)


async def _hold_long_poll(port: int, path: str) -> RawAnswer:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(
            f"GET {path} HTTP/1.1\r\nHost: t\r\nAuthorization: Bearer {TOKEN}\r\n"
            "Connection: close\r\n\r\n".encode()
        )
        await writer.drain()
        return parse_answer(await read_all(reader, 60))
    finally:
        writer.close()


async def test_two_thousand_long_polls_held_and_woken(api: ApiProcess, tmp_path: Path) -> None:
    """2,000 status long-polls held open at once leave the server answering others with bounded
    memory; one change wakes every one of them with the new status."""
    async with httpx.AsyncClient(base_url=api.base, timeout=30) as client:
        resp = await client.post(
            "/api/submissions",
            files={"package": ("p.tar.gz", tarball("poll"), "application/gzip")},
            data={"kernel_id": KERNEL},
            headers=SUBMITTER,
        )
        assert resp.status_code == 202, resp.text
        answer = resp.json()
        rss_before = api.rss_bytes()
        path = f"{answer['status_url']}?since={answer['version']}&timeout=50"
        polls = [asyncio.create_task(_hold_long_poll(api.port, path)) for _ in range(2000)]
        await asyncio.sleep(8)  # let them all connect and park
        assert not any(poll.done() for poll in polls)
        rss_during = api.rss_bytes()
        await control_request(api)
        cancel = await client.post(
            f"/api/submissions/{answer['submission_id']}/cancel", json={}, headers=SUBMITTER
        )
        assert cancel.status_code == 200, cancel.text
        woken = await asyncio.gather(*polls)
    statuses = [
        json.loads(ans.body)["status"] if ans.status == 200 else ans.status for ans in woken
    ]
    assert statuses == ["cancelled"] * 2000, sorted(set(map(str, statuses)))
    assert rss_during - rss_before < ATTACK_RSS_BOUND
    assert api.rss_bytes() - rss_before < ATTACK_RSS_BOUND


async def test_a_request_head_not_done_in_time_gets_408(api: ApiProcess) -> None:
    """A connection that has not finished its request head within the head timeout (or sent
    nothing at all) gets a 408 envelope and is closed; a kept-alive connection is timed the
    same way for each new request."""
    reader, writer = await asyncio.open_connection("127.0.0.1", api.port)
    idle_reader, idle_writer = await asyncio.open_connection("127.0.0.1", api.port)
    try:
        writer.write(b"GET /api/health HTTP/1.1\r\nHost: t\r\nX-Half: ")
        await writer.drain()
        answer = parse_answer(await read_all(reader, HEAD_TIMEOUT_S + 5))
        idle = parse_answer(await read_all(idle_reader, HEAD_TIMEOUT_S + 5))
    finally:
        writer.close()
        idle_writer.close()
    for got in (answer, idle):
        assert got.status == 408 and envelope(got)["code"] == "request_timeout", got
    reader, writer = await asyncio.open_connection("127.0.0.1", api.port)
    try:
        writer.write(b"GET /api/health HTTP/1.1\r\nHost: t\r\n\r\n")
        assert parse_answer(await read_all(reader, 10)).status == 200
        writer.write(b"GET /api/health HTTP/1.1\r\nHost: t\r\n")  # never ends
        await writer.drain()
        second = parse_answer(await read_all(reader, HEAD_TIMEOUT_S + 5))
    finally:
        writer.close()
    assert second.status == 408, second


async def _open_feed(port: int, last_event_id: int) -> tuple[asyncio.StreamReader, Any]:
    """A `GET /api/events` whose client has a tiny receive buffer and never reads."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.setblocking(False)
    await asyncio.get_running_loop().sock_connect(sock, ("127.0.0.1", port))
    reader, writer = await asyncio.open_connection(sock=sock, limit=4096)
    writer.write(
        f"GET /api/events HTTP/1.1\r\nHost: t\r\nLast-Event-ID: {last_event_id}\r\n\r\n".encode()
    )
    await writer.drain()
    return reader, writer


TCP_STATES_ENDED = {7, 8}  # TCP_CLOSE (reset), TCP_CLOSE_WAIT (the server's FIN came)


def _ended_by_server(writer: Any) -> bool:
    """Whether the server ended the connection (reset or closed), seen without reading: the
    client has stopped reading, so its transport would not notice."""
    sock = writer.get_extra_info("socket")
    state = sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, 8)[0]
    return state in TCP_STATES_ENDED


async def _until_all_dropped(writers: list[Any], timeout_s: float) -> int:
    """Wait (without reading) until the server ended every connection; how many it kept."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    while loop.time() < deadline:
        kept = sum(not _ended_by_server(w) for w in writers)
        if kept == 0:
            return 0
        await asyncio.sleep(0.5)
    return sum(not _ended_by_server(w) for w in writers)


async def test_event_feed_readers_that_never_read_are_dropped(api: ApiProcess) -> None:
    """100 unauthenticated event streams from sequence 0 over a log of about 10 MB whose
    clients never read keep the API's memory bounded, leave others served, and are dropped by
    the server once they have read nothing for the slow-reader timeout."""
    await seed_registrations(api.nats.url, 2500)
    rss_before = api.rss_bytes()
    feeds = [await _open_feed(api.port, 0) for _ in range(100)]
    await asyncio.sleep(2)
    rss_during = api.rss_bytes()
    await control_request(api)
    # Each stream fills its connection at the pace the shared machine allows, then stalls.
    kept = await _until_all_dropped([w for _, w in feeds], SLOW_READER_S + 60)
    for _, writer in feeds:
        writer.close()
    assert kept == 0, f"{kept} of 100 stalled streams were kept open"
    assert rss_during - rss_before < FEED_RSS_BOUND, (rss_before, rss_during)
    await control_request(api)
    assert api.rss_bytes() - rss_before < FEED_RSS_BOUND


async def test_a_cursor_past_the_log_is_400_at_once(api: ApiProcess) -> None:
    """`Last-Event-ID: 10^26` (and one just past the head) are refused with 400 at once."""
    for value in (str(10**26), "999999999"):
        answer = await raw_request(
            api.port, f"GET /api/events HTTP/1.1\r\nHost: t\r\nLast-Event-ID: {value}", timeout_s=5
        )
        assert answer.status == 400, (value, answer)
        assert envelope(answer)["code"] in {"invalid_input", "invalid_cursor"}


async def test_oversized_registrations_are_refused_and_store_nothing(api: ApiProcess) -> None:
    """Ten registrations carrying 7 MiB of labels each are refused with 413 and stored
    nowhere; /api/runners stays small."""
    labels = {f"l{i}": "y" * MIB for i in range(7)}
    async with httpx.AsyncClient(base_url=api.base, timeout=60) as client, leaves_no_trace(api):
        for i in range(10):
            resp = await client.post(
                "/api/runner/register",
                json={"runner_id": f"big{i}", "arches": ["cpu"], "labels": labels},
                headers=RUNNER,
            )
            assert resp.status_code == 413 and envelope(resp)["code"] == "body_too_large"
        runners = await client.get("/api/runners")
    assert runners.status_code == 200 and len(runners.content) < 20 * MIB


async def test_a_crowd_asking_for_past_indexes_is_limited(api: ApiProcess) -> None:
    """40 anonymous requests for 40 different past indexes at once: the API folds the log for
    only a few of them, tells the others to come back (429 with Retry-After), and keeps
    serving others meanwhile."""
    async with httpx.AsyncClient(base_url=api.base, timeout=120) as client:
        last = (await client.get("/api/health")).json()["nats"]["stream_seq"]
        if last < 100:  # run alone: give the crowd 40 distinct positions to ask for
            await seed_registrations(api.nats.url, 100)
            last += 100
        asks = [client.get(f"/api/index.json?at={max(1, last - i)}") for i in range(40)]
        answers = await asyncio.gather(*asks, control_request(api))
    codes = [resp.status_code for resp in answers[:40]]
    assert set(codes) <= {200, 429}, codes
    assert codes.count(200) <= 8 and codes.count(429) >= 30, codes
    refused = next(resp for resp in answers[:40] if resp.status_code == 429)
    assert envelope(refused)["code"] == "rate_limited" and refused.headers["retry-after"]
