"""The resubmission rate: a few submissions of one kernel by one submitter an hour; the next is
429 `rate_limited` with Retry-After, and leaves no event and no object behind."""

from __future__ import annotations

import hashlib
import uuid
from datetime import UTC, datetime

import pytest
from api_helpers import KERNEL, Api, stream_events, tarball

from kz_events.events import SubmissionSubmitted
from kz_events.subjects import PACKAGES_BUCKET

pytestmark = [
    pytest.mark.integration,
    pytest.mark.parametrize("api_overrides", [{"resubmit_limit": 3, "max_open_submissions": 20}]),
]

OTHER = "cpu/Norm/RMSNorm/fp32/other"


async def test_the_next_resubmission_is_429_with_when_to_retry_and_no_trace(api: Api) -> None:
    """The fourth submission of one kernel by one submitter in an hour (limit 3) is refused:
    the envelope says when to retry, as does Retry-After; nothing is appended or stored."""
    for i in range(3):
        assert (await api.submit(tarball(src=f"v = {i}\n"))).status_code == 202
    data = tarball(src="v = 3\n")
    resp = await api.submit(data)
    assert resp.status_code == 429, resp.text
    error = resp.json()["error"]
    assert error["code"] == "rate_limited"
    assert error["message"].startswith(f"at most 3 submissions of {KERNEL} per hour")
    retry_after = error["details"]["retry_after_s"]
    assert 3500 < retry_after <= 3600 and resp.headers["Retry-After"] == str(retry_after)
    assert len(await stream_events(api.log)) == 3
    assert not await api.log.has_object(PACKAGES_BUCKET, hashlib.sha256(data).hexdigest())


async def test_the_rate_is_per_submitter_and_kernel_and_counts_no_confirmation_run(
    api: Api,
) -> None:
    """Another submitter, or another kernel, has its own count; the referee's confirmation
    runs of a submitter's results are not their submissions."""
    for n in range(2):
        run = SubmissionSubmitted(
            event_id=str(uuid.uuid4()),
            occurred_at=datetime.now(UTC),
            actor="referee",
            submission_id=str(uuid.uuid4()),
            kernel_id=KERNEL,
            submitter_id="alice",
            package_digest=f"{n}" * 64,
            package_size=1,
            confirms=str(uuid.uuid4()),
        )
        await api.log.append(run)
    for i in range(3):
        assert (await api.submit(tarball(src=f"v = {i}\n"))).status_code == 202
    assert (await api.submit(tarball(src="v = 9\n"), who="bob")).status_code == 202
    other = tarball(kernel_id=OTHER, src="v = 9\n")
    assert (await api.submit(other, kernel_id=OTHER)).status_code == 202
    refused = await api.submit(tarball(src="v = 4\n"))
    assert refused.status_code == 429 and refused.json()["error"]["code"] == "rate_limited"
