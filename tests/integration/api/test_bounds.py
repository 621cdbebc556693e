"""Bounds on what clients send: every field has a limit answered with a 4xx envelope that leaves
no event and no object; cursors and numbers are range-checked; package paths git can check
out; idempotency locks that do not outlive their requests; a health answer of 503 when the
event stream is gone."""

from __future__ import annotations

import io
import tarfile
from typing import Any

import pytest
from api_helpers import KERNEL, RESULT_DOC, Api, import_kernel, package, stream_events, tarball

from kz_api.models import MAX_LABELS, MAX_LOG_CHARS, MAX_RESULT_DOCUMENT_BYTES
from kz_events.subjects import EVENTS_STREAM, LOGS_BUCKET, PACKAGES_BUCKET

pytestmark = pytest.mark.integration

CPU = {"X-Runner-Key": "cpu-key"}
keyed = pytest.mark.parametrize("api_overrides", [{"runner_keys": {"cpu-key": ["cpu"]}}])


def _error(resp: Any) -> dict[str, Any]:
    error: dict[str, Any] = resp.json()["error"]
    assert error["message"], error
    return error


async def _objects(api: Api, bucket: str) -> set[str]:
    store = await api.log.js.object_store(bucket)
    try:
        return {info.name for info in await store.list()}
    except Exception:  # nats-py answers NotFoundError for an empty bucket
        return set()


async def _register(api: Api, **fields: Any) -> Any:
    body = {"runner_id": "r1", "arches": ["cpu"], **fields}
    return await api.client.post("/api/runner/register", json=body, headers=CPU)


@keyed
@pytest.mark.parametrize(
    ("why", "fields"),
    [
        ("too many labels", {"labels": {f"k{i}": "v" for i in range(MAX_LABELS + 1)}}),
        ("a label value too long", {"labels": {"k": "v" * 1025}}),
        ("a label key too long", {"labels": {"k" * 129: "v"}}),
        ("an empty label key", {"labels": {"": "v"}}),
        ("a device too long", {"device": "d" * 501}),
        ("a runner id too long", {"runner_id": "r" * 129}),
    ],
)
async def test_register_fields_over_their_limits_are_refused(
    api: Api, why: str, fields: dict[str, Any]
) -> None:
    """A registration with a field over its limit is 400 invalid_input naming the field, and
    appends nothing."""
    resp = await _register(api, **fields)
    assert resp.status_code == 400, (why, resp.text)
    assert _error(resp)["code"] == "invalid_input", why
    assert await stream_events(api.log) == []


@keyed
async def test_json_body_over_a_mebibyte_is_413(api: Api) -> None:
    """A JSON body past the 1 MiB limit of JSON routes is 413 body_too_large, nothing stored."""
    resp = await _register(api, labels={"k": "v" * (2 * 1024 * 1024)})
    assert resp.status_code == 413 and _error(resp)["code"] == "body_too_large", resp.text
    assert await stream_events(api.log) == []


async def _claimed(api: Api) -> dict[str, Any]:
    assert (await _register(api)).status_code == 200
    assert (await api.submit(tarball())).status_code == 202
    resp = await api.client.post(
        "/api/runner/claim", json={"runner_id": "r1", "wait_s": 2}, headers=CPU
    )
    assert resp.status_code == 200, resp.text
    offer: dict[str, Any] = resp.json()
    return offer


@keyed
@pytest.mark.parametrize(
    ("why", "extra", "status", "code"),
    [
        (
            "a result document over its limit",
            {"result": {**RESULT_DOC, "pad": "x" * MAX_RESULT_DOCUMENT_BYTES}},
            413,
            "field_too_large",
        ),
        ("a log over its limit", {"log": "l" * (MAX_LOG_CHARS + 1)}, 400, "invalid_input"),
        (
            "too many environment entries",
            {"environment": {f"e{i}": "v" for i in range(65)}},
            400,
            "invalid_input",
        ),
        ("a duration past any limit", {"duration_s": 1e300}, 400, "invalid_input"),
        ("a negative timing", {"timings": {"build": -1.0}}, 400, "invalid_input"),
    ],
)
async def test_result_fields_over_their_limits_store_nothing(
    api: Api, why: str, extra: dict[str, Any], status: int, code: str
) -> None:
    """A result whose document, log, environment or numbers pass their limits is refused with
    a 4xx before anything is stored: no `result` event and no log object."""
    offer = await _claimed(api)
    sid = offer["submission_id"]
    before = len(await stream_events(api.log))
    body = {
        "lease_token": offer["lease_token"],
        "outcome": "accepted",
        "result": RESULT_DOC,
        "log": "ran\n",
        **extra,
    }
    resp = await api.client.post(f"/api/submissions/{sid}/result", json=body, headers=CPU)
    assert resp.status_code == status, (why, resp.text[:300])
    assert _error(resp)["code"] == code, why
    assert len(await stream_events(api.log)) == before
    assert not await api.log.has_object(LOGS_BUCKET, f"{sid}-1")


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("message", "m" * 10_001),
        ("base_commit", "c" * 129),
        ("kernel_id", "k" * 401),
        ("unexpected", "u" * 1001),
    ],
)
async def test_submission_form_fields_over_their_limits(api: Api, field: str, value: str) -> None:
    """A form field over its limit is 400 invalid_input naming the field; no event, no object."""
    fields = {field: value} if field != "kernel_id" else {}
    resp = await api.client.post(
        "/api/submissions",
        files={"package": ("p.tar.gz", tarball(), "application/gzip")},
        data={"kernel_id": value if field == "kernel_id" else KERNEL, **fields},
        headers={"X-Submitter-Id": "alice"},
    )
    assert resp.status_code == 400, resp.text
    error = _error(resp)
    assert error["code"] == "invalid_input" and error["details"]["field"] == field
    assert await stream_events(api.log) == []
    assert await _objects(api, PACKAGES_BUCKET) == set()


async def test_idempotency_key_over_its_limit_is_400(api: Api) -> None:
    """An Idempotency-Key over 200 characters is 400, nothing stored."""
    resp = await api.submit(tarball(), headers={"Idempotency-Key": "k" * 201})
    assert resp.status_code == 400 and _error(resp)["code"] == "invalid_input"
    assert await stream_events(api.log) == []


async def test_idempotency_locks_do_not_outlive_their_requests(api: Api) -> None:
    """After submissions with Idempotency-Keys end, no lock is kept for their keys; a retry
    still answers the first submission."""
    first = await api.submit(tarball(), headers={"Idempotency-Key": "key-1"})
    again = await api.submit(tarball(), headers={"Idempotency-Key": "key-1"})
    other = await api.submit(tarball(src="y = 2\n"), headers={"Idempotency-Key": "key-2"})
    assert first.status_code == again.status_code == other.status_code == 202
    assert first.json()["submission_id"] == again.json()["submission_id"]
    assert len(api.ctx.idempotency_locks) == 0


def _tarball_with(extra: dict[str, bytes]) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz", format=tarfile.PAX_FORMAT) as tar:
        for name, data in {**package(), **extra}.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


@pytest.mark.parametrize(
    ("name", "says"),
    [
        ("src/" + "n" * 5000 + ".py", "at most 255 bytes"),
        ("src/" + "é" * 128, "at most 255 bytes"),  # 256 bytes in UTF-8
        ("/".join(["src", *["d" * 200] * 21, "f.py"]), "at most 4096 bytes"),
        ("src/.git/config", "git refuses"),
        ("src/.GIT/hooks", "git refuses"),
        ("src/.git. /x", "git refuses"),
        ("src/git~1/x", "git refuses"),
        ("src/bad\nname.py", "control characters"),
    ],
)
async def test_package_paths_git_cannot_check_out_are_refused(
    api: Api, name: str, says: str
) -> None:
    """A package holding a path git could not check out (a name over 255 bytes, a path over
    4096, a `.git` part in any spelling git protects, a control character) is refused at upload
    with invalid_package naming the path, before anything is stored."""
    resp = await api.submit(_tarball_with({name: b"x = 1\n"}))
    assert resp.status_code == 400, resp.text
    error = _error(resp)
    assert error["code"] == "invalid_package", error
    problem = error["details"]["problems"][0]
    assert problem["path"][:40] == name[:40] and says in problem["message"], problem
    assert await stream_events(api.log) == []
    assert await _objects(api, PACKAGES_BUCKET) == set()


async def test_a_long_but_valid_name_is_accepted(api: Api) -> None:
    """A file name of exactly 255 bytes is fine."""
    resp = await api.submit(_tarball_with({"src/" + "n" * 252 + ".py": b"x = 1\n"}))
    assert resp.status_code == 202, resp.text


@pytest.mark.parametrize(
    ("path", "headers"),
    [
        ("/api/events", {"Last-Event-ID": str(10**26)}),
        ("/api/events", {"Last-Event-ID": "-1"}),
        ("/api/events", {"Last-Event-ID": "abc"}),
        ("/api/events?after=99999999999999999999999", {}),
        ("/api/index.json?at=100000000000000000000000000", {}),
        ("/api/index.json?at=-1", {}),
        ("/api/submissions?offset=100000000000000000000000", {}),
        ("/api/submissions?limit=1e999", {}),
        ("/api/kernels?offset=100000000000000000000000", {}),
        ("/api/kernels?limit=NaN", {}),
        ("/api/submissions?kernel_id=" + "k" * 401, {}),
    ],
)
async def test_cursors_and_numbers_out_of_range_are_400(
    api: Api, path: str, headers: dict[str, str]
) -> None:
    """Cursors and numeric parameters past their range are 400 invalid_input, never a 5xx."""
    resp = await api.client.get(path, headers=headers)
    assert resp.status_code == 400, (path, resp.status_code, resp.text[:200])
    assert _error(resp)["code"] == "invalid_input"


async def test_a_cursor_past_the_log_head_is_refused(api: Api) -> None:
    """Last-Event-ID (or ?after=, ?at=) beyond the log's last sequence is 400 with that
    sequence, not a stream that never delivers; the head itself is a valid cursor."""
    seq = await import_kernel(api)
    for resp in (
        await api.client.get("/api/events", headers={"Last-Event-ID": str(seq + 1)}),
        await api.client.get(f"/api/events?after={seq + 5}"),
    ):
        assert resp.status_code == 400, resp.text
        error = _error(resp)
        assert error["code"] == "invalid_cursor" and error["details"]["last_seq"] == seq
    ahead = await api.client.get(f"/api/index.json?at={seq + 1}")
    assert ahead.status_code == 400
    head = await api.client.get("/api/events", params={"limit": 1}, headers={"Last-Event-ID": "0"})
    assert head.status_code == 200 and f"id: {seq}" in head.text


async def test_event_streams_past_the_cap_are_503(api: Api) -> None:
    """When the most event streams the server serves are open, another is 503 with Retry-After."""
    hub = api.ctx.event_hub
    hub.streams = hub.max_streams
    try:
        resp = await api.client.get("/api/events", params={"limit": 1})
    finally:
        hub.streams = 0
    assert resp.status_code == 503 and _error(resp)["code"] == "too_many_streams"
    assert resp.headers["retry-after"] == "5"


async def test_time_travel_indexes_are_built_once(api: Api) -> None:
    """The same `?at=` twice folds the log once; the answers are the same bytes."""
    seq = await import_kernel(api)
    first = await api.client.get(f"/api/index.json?at={seq}")
    second = await api.client.get(f"/api/index.json?at={seq}")
    assert first.status_code == second.status_code == 200
    assert first.content == second.content
    assert api.ctx.time_travel.builds == 1


async def test_health_is_503_when_the_event_stream_is_gone(api: Api) -> None:
    """With the event stream deleted, /api/health (and a request that reads the log) answer
    503 log_unavailable, not 500."""
    await api.log.js.delete_stream(EVENTS_STREAM)
    health = await api.client.get("/api/health")
    assert health.status_code == 503 and _error(health)["code"] == "log_unavailable"
    events = await api.client.get("/api/events", params={"limit": 1})
    assert events.status_code == 503 and _error(events)["code"] == "log_unavailable"


async def test_a_stream_behind_the_ring_reads_the_log_in_order(api: Api) -> None:
    """A stream resuming from before what the live ring holds reads the log in small batches
    and delivers every event once, in order."""
    seqs = [await import_kernel(api, f"cpu/Norm/RMSNorm/fp32/k{i}") for i in range(40)]
    resp = await api.client.get("/api/events", params={"limit": 40}, headers={"Last-Event-ID": "0"})
    ids = [int(line[4:]) for line in resp.text.splitlines() if line.startswith("id: ")]
    assert ids == seqs
