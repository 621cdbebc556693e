"""Submissions over HTTP: accepted uploads, every refusal (with nothing stored), idempotency,
list, detail, logs, cancel and disqualify."""

from __future__ import annotations

import hashlib
import io
import tarfile
import uuid
from typing import Any

import msgspec
import pytest
from api_helpers import (
    KERNEL,
    RESULT_DOC,
    Api,
    accept,
    import_kernel,
    meta,
    put_judge,
    seed,
    stream_events,
    tarball,
)

from kz_events.events import (
    PackageSummary,
    SubmissionCancelled,
    SubmissionClaimed,
    SubmissionConfirmed,
    SubmissionDisqualified,
    SubmissionFailed,
    SubmissionResult,
    SubmissionSubmitted,
)
from kz_events.subjects import PACKAGES_BUCKET

pytestmark = pytest.mark.integration


async def _nothing_stored(api: Api, data: bytes) -> None:
    assert await stream_events(api.log) == []
    assert not await api.log.has_object(PACKAGES_BUCKET, hashlib.sha256(data).hexdigest())


def _code(resp: Any) -> str:
    return str(resp.json()["error"]["code"])


async def test_submit_stores_package_and_appends_submitted(api: Api) -> None:
    """A valid package is stored under its sha256 and one `submitted` event is appended."""
    data = tarball()
    resp = await api.submit(data, message="first try")
    assert resp.status_code == 202, resp.text
    body = resp.json()
    assert body["status"] == "queued" and body["queue_position"] == 1 and body["new_kernel"]
    assert body["status_url"] == f"/api/submissions/{body['submission_id']}/status"
    events = await stream_events(api.log)
    assert [type(e) for e in events] == [SubmissionSubmitted]
    assert events[0].package_digest == hashlib.sha256(data).hexdigest()
    assert events[0].message == "first try" and events[0].submitter_id == "alice"
    assert events[0].summary == PackageSummary(
        title="RMSNorm reference",
        language="python",
        metric={"name": "latency", "unit": "us", "better": "lower"},
    )
    assert await api.log.has_object(PACKAGES_BUCKET, events[0].package_digest)


async def test_idempotency_key_returns_first_answer(api: Api) -> None:
    """A retry with the same Idempotency-Key answers as the first time and appends nothing."""
    data = tarball()
    first = await api.submit(data, headers={"Idempotency-Key": "k-1"})
    again = await api.submit(data, headers={"Idempotency-Key": "k-1"})
    assert first.status_code == again.status_code == 202
    assert first.json()["submission_id"] == again.json()["submission_id"]
    events = await stream_events(api.log)
    assert len(events) == 1 and events[0].idempotency_key == "k-1"


async def test_unauthenticated_submission_is_refused(api: Api) -> None:
    """Without X-Submitter-Id the answer is 401 unauthenticated and nothing is stored."""
    data = tarball()
    resp = await api.client.post(
        "/api/submissions",
        files={"package": ("p.tar.gz", data, "application/gzip")},
        data={"kernel_id": KERNEL},
    )
    assert resp.status_code == 401 and _code(resp) == "unauthenticated"
    await _nothing_stored(api, data)


async def test_submitter_field_must_match_header(api: Api) -> None:
    """A submitter_id field naming someone else is 403 forbidden."""
    data = tarball()
    resp = await api.submit(data, submitter_id="mallory")
    assert resp.status_code == 403 and _code(resp) == "forbidden"
    await _nothing_stored(api, data)


@pytest.mark.parametrize(
    ("make", "code", "status"),
    [
        (lambda tmp: tarball(better="sideways"), "invalid_package", 400),
        (
            lambda tmp: tarball(kernel_id="cpu/Norm/RMSNorm/fp32/other"),
            "invalid_kernel_id",
            400,
        ),
        (lambda tmp: b"not a gzip at all", "invalid_package", 400),
    ],
)
async def test_invalid_packages_are_refused_without_trace(
    api: Api, make: Any, code: str, status: int
) -> None:
    """Packages failing their checks get the package error code; no event, no object."""
    data = make(api.tmp)
    resp = await api.submit(data)
    assert resp.status_code == status, resp.text
    assert _code(resp) == code
    await _nothing_stored(api, data)


async def test_link_in_archive_is_unsafe(api: Api) -> None:
    """A tarball holding a symbolic link is refused as unsafe_archive with its problems."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        info = tarfile.TarInfo(".kernel_package/desc.yaml")
        info.type = tarfile.SYMTYPE
        info.linkname = "/etc/passwd"
        tar.addfile(info)
    resp = await api.submit(buf.getvalue())
    assert resp.status_code == 400 and _code(resp) == "unsafe_archive"
    assert resp.json()["error"]["details"]["problems"]
    await _nothing_stored(api, buf.getvalue())


@pytest.mark.parametrize("api_overrides", [{"max_upload_bytes": 2048}])
async def test_too_large_upload_is_413(api: Api) -> None:
    """A package over the upload limit is refused with 413 package_too_large."""
    data = tarball(src="".join(f"x{i} = {i * 7919}\n" for i in range(3000)))
    assert len(data) > 2048
    resp = await api.submit(data)
    assert resp.status_code == 413 and _code(resp) == "package_too_large"
    await _nothing_stored(api, data)


async def test_not_multipart_is_415(api: Api) -> None:
    """A JSON body where the form is expected is 415 with the envelope."""
    resp = await api.client.post(
        "/api/submissions", json={"kernel_id": KERNEL}, headers={"X-Submitter-Id": "alice"}
    )
    assert resp.status_code == 415 and _code(resp) == "unsupported_media_type"


async def test_quota_of_open_submissions(api: Api) -> None:
    """The fourth open submission of one submitter (quota 3) is 429 quota_exceeded."""
    for i in range(3):
        assert (await api.submit(tarball(src=f"v = {i}\n"))).status_code == 202
    data = tarball(src="v = 4\n")
    resp = await api.submit(data)
    assert resp.status_code == 429 and _code(resp) == "quota_exceeded"
    assert not await api.log.has_object(PACKAGES_BUCKET, hashlib.sha256(data).hexdigest())
    assert len(await stream_events(api.log)) == 3


async def test_identical_open_package_is_409(api: Api) -> None:
    """The same package for the same kernel while the first is queued is 409."""
    data = tarball()
    assert (await api.submit(data)).status_code == 202
    resp = await api.submit(data, who="bob")
    assert resp.status_code == 409 and _code(resp) == "duplicate_package"
    assert len(await stream_events(api.log)) == 1


async def test_lease_held_by_another_refuses_submission(api: Api) -> None:
    """While bob holds the optimisation lease, alice's submission is 409 claim_held."""
    await import_kernel(api)
    claim = await api.client.post(
        f"/api/kernels/{KERNEL}/claim", json={"ttl_s": 600}, headers={"X-Submitter-Id": "bob"}
    )
    assert claim.status_code == 200, claim.text
    before = len(await stream_events(api.log))
    resp = await api.submit(tarball())
    assert resp.status_code == 409 and _code(resp) == "claim_held"
    assert resp.json()["error"]["details"]["holder"] == "bob"
    assert len(await stream_events(api.log)) == before
    assert (await api.submit(tarball(), who="bob")).status_code == 202


async def test_judge_change_needs_a_maintainer(api: Api) -> None:
    """Changing benchmark.py of an existing kernel is 403 unless a maintainer submits it."""
    await import_kernel(api)
    await put_judge(api)
    changed = tarball(benchmark="print('always accept')\n")
    resp = await api.submit(changed)
    assert resp.status_code == 403 and _code(resp) == "harness_change_forbidden"
    assert resp.json()["error"]["details"]["changed"] == ["benchmark.py"]
    ok = await api.submit(tarball(src="y = 2\n"))
    assert ok.status_code == 202 and not ok.json()["new_kernel"]
    assert (await api.submit(changed, who="maintainer")).status_code == 202


async def test_list_detail_and_logs(api: Api) -> None:
    """List filters, detail shows the events, logs answer 404 until a log exists."""
    sid = (await api.submit(tarball())).json()["submission_id"]
    await api.submit(tarball(src="z = 1\n"), who="bob")
    listed = (await api.client.get("/api/submissions", params={"submitter_id": "bob"})).json()
    assert listed["total"] == 1 and listed["items"][0]["submitter_id"] == "bob"
    detail = (await api.client.get(f"/api/submissions/{sid}")).json()
    assert [e["type"] for e in detail["events"]] == ["submitted"]
    assert detail["log_url"] is None
    logs = await api.client.get(f"/api/submissions/{sid}/logs")
    assert logs.status_code == 404 and _code(logs) == "log_not_found"
    unknown = await api.client.get("/api/submissions/00000000-0000-4000-8000-000000000000")
    assert unknown.status_code == 404 and _code(unknown) == "unknown_submission"
    bad = await api.client.get(
        "/api/submissions/not-a-uuid/status", headers={"X-Submitter-Id": "a"}
    )
    assert bad.status_code == 404 and _code(bad) == "unknown_submission"


async def test_cancel_rules(api: Api) -> None:
    """Only the submitter or a maintainer cancels, and only open submissions."""
    sid = (await api.submit(tarball())).json()["submission_id"]
    url = f"/api/submissions/{sid}/cancel"
    other = await api.client.post(url, headers={"X-Submitter-Id": "bob"})
    assert other.status_code == 403 and _code(other) == "forbidden"
    assert (await api.client.post(url)).status_code == 401
    ok = await api.client.post(url, json={"reason": "oops"}, headers={"X-Submitter-Id": "alice"})
    assert ok.status_code == 200 and ok.json()["status"] == "cancelled"
    again = await api.client.post(url, headers={"X-Submitter-Id": "maintainer"})
    assert again.status_code == 409 and _code(again) == "not_open"
    events = await stream_events(api.log)
    assert isinstance(events[-1], SubmissionCancelled) and events[-1].reason == "oops"


async def test_disqualify_rules(api: Api) -> None:
    """Maintainers disqualify accepted submissions; others get 403, open ones 409."""
    sid = (await api.submit(tarball())).json()["submission_id"]
    url = f"/api/submissions/{sid}/disqualify"
    body = {"reason": "timing exploit"}
    refused = await api.client.post(url, json=body, headers={"X-Submitter-Id": "alice"})
    assert refused.status_code == 403 and _code(refused) == "forbidden"
    early = await api.client.post(url, json=body, headers={"X-Submitter-Id": "maintainer"})
    assert early.status_code == 409 and _code(early) == "not_accepted"
    await accept(api, sid)
    ok = await api.client.post(url, json=body, headers={"X-Submitter-Id": "maintainer"})
    assert ok.status_code == 200 and ok.json()["disqualified"] == "timing exploit"
    assert isinstance((await stream_events(api.log))[-1], SubmissionDisqualified)
    empty = await api.client.post(url, json={}, headers={"X-Submitter-Id": "maintainer"})
    assert empty.status_code == 400 and _code(empty) == "invalid_input"


async def _confirmation_run(api: Api, sid: str) -> str:
    """Open a confirmation run of accepted `sid` as the referee does: the same package."""
    run = str(uuid.uuid4())
    submitted = msgspec.structs.replace(
        api.ctx.models.submissions[sid].submitted,
        **meta("projector"),
        submission_id=run,
        idempotency_key=None,
        confirms=sid,
        avoid_runner="r1",
    )
    await seed(api, submitted)
    return run


async def _status(api: Api, sid: str) -> dict[str, Any]:
    detail = (await api.client.get(f"/api/submissions/{sid}")).json()
    return dict(detail["submission"])


async def test_a_confirmation_run_and_the_result_it_confirms_name_each_other(api: Api) -> None:
    """A confirmation run's status names the result it confirms (`confirms`); the result's names
    its run, the mark the run gives it (unconfirmed while open or once failed, then confirmed or
    disputed) and the run's verdict."""
    sid = (await api.submit(tarball())).json()["submission_id"]
    await accept(api, sid)
    assert (await _status(api, sid))["confirmation"] is None
    run = await _confirmation_run(api, sid)
    opened = await _status(api, run)
    assert opened["confirms"] == sid and opened["confirmation"] is None
    assert (await _status(api, sid))["confirmation"] == {
        "submission_id": run, "status": "queued", "mark": "unconfirmed", "reason": None,
    }  # fmt: skip
    ids = {"submission_id": run, "kernel_id": KERNEL}
    reason = "agrees: 1.5x the reference (1.45-1.55x) on this run, 1.5x on the confirmed one"
    for event in (
        SubmissionClaimed(**meta("r2"), **ids, runner_id="r2", attempt=1, lease_id="L2"),
        SubmissionResult(**meta("r2"), **ids, runner_id="r2", attempt=1, lease_id="L2",
                         outcome="accepted", result=RESULT_DOC),
        SubmissionConfirmed(**meta("referee"), **ids, confirms=sid, reason=reason,
                            result={**RESULT_DOC, "reason": reason}),
    ):  # fmt: skip
        await seed(api, event)
    assert (await _status(api, sid))["confirmation"] == {
        "submission_id": run, "status": "confirmed", "mark": "confirmed", "reason": reason,
    }  # fmt: skip
    ended = await _status(api, run)
    assert ended["status"] == "confirmed" and ended["confirms"] == sid
    assert ended["result"]["reason"] == reason
    listed = (await api.client.get("/api/submissions", params={"kernel_id": KERNEL})).json()
    by_id = {item["submission_id"]: item for item in listed["items"]}
    assert by_id[run]["confirms"] == sid and by_id[sid]["confirmation"]["mark"] == "confirmed"

    # A run that fails leaves the result unconfirmed, and says why.
    other = (await api.submit(tarball(src="y = 2\n"))).json()["submission_id"]
    await accept(api, other, value=11.0)
    failed = await _confirmation_run(api, other)
    await seed(
        api,
        SubmissionFailed(**meta("referee"), submission_id=failed, kernel_id=KERNEL,
                         code="timed_out", reason="the task ran past its time limit"),
    )  # fmt: skip
    assert (await _status(api, other))["confirmation"] == {
        "submission_id": failed, "status": "failed", "mark": "unconfirmed",
        "reason": "the task ran past its time limit",
    }  # fmt: skip
