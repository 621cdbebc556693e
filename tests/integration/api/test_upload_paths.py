"""Where an upload lives while it is checked: a small package stays in memory and never touches
disk, a large one spills to a temporary directory; either way a refused upload leaves no event,
no object and no temporary file, and an accepted one is stored byte for byte."""

from __future__ import annotations

import base64
import hashlib
import io
import random
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from api_helpers import KERNEL, Api, import_kernel, put_judge, stream_events, tarball

from kz_api.upload import MEMORY_UPLOAD_BYTES, UploadMemory
from kz_events.events import SubmissionSubmitted
from kz_events.subjects import PACKAGES_BUCKET

pytestmark = pytest.mark.integration


@pytest.fixture
def scratch(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Path, list[str]]]:
    """The directory `tempfile` uses during the test, and every directory made in it."""
    root = tmp_path / "scratch"
    root.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(root))
    made: list[str] = []
    mkdtemp = tempfile.mkdtemp

    def counted(*args: Any, **kwargs: Any) -> str:
        made.append(mkdtemp(*args, **kwargs))
        return made[-1]

    monkeypatch.setattr(tempfile, "mkdtemp", counted)
    yield root, made


def _large(**kw: Any) -> bytes:
    """A valid package whose tarball is past the in-memory limit (its source does not compress)."""
    noise = random.Random(7).randbytes(MEMORY_UPLOAD_BYTES)
    data = tarball(src=base64.b64encode(noise).decode() + "\n", **kw)
    assert len(data) > MEMORY_UPLOAD_BYTES
    return data


async def _nothing_stored(api: Api, data: bytes) -> None:
    assert await stream_events(api.log) == []
    assert not await api.log.has_object(PACKAGES_BUCKET, hashlib.sha256(data).hexdigest())


async def _stored(api: Api, data: bytes) -> None:
    events = await stream_events(api.log)
    assert [type(e) for e in events] == [SubmissionSubmitted]
    digest = hashlib.sha256(data).hexdigest()
    assert events[0].package_digest == digest and events[0].package_size == len(data)
    sink = io.BytesIO()
    await api.log.get_object(PACKAGES_BUCKET, digest, sink)
    assert sink.getvalue() == data


async def test_small_upload_is_checked_and_stored_without_touching_disk(
    api: Api, scratch: tuple[Path, list[str]]
) -> None:
    """A small valid package is accepted and stored as sent, and no temporary directory is made."""
    data = tarball()
    resp = await api.submit(data)
    assert resp.status_code == 202, resp.text
    await _stored(api, data)
    assert scratch[1] == []


@pytest.mark.parametrize(
    ("make", "code"),
    [
        (lambda: tarball(kernel_id="cpu/Norm/RMSNorm/fp32/other"), "invalid_kernel_id"),
        (lambda: b"not a gzip at all", "invalid_package"),
    ],
)
async def test_small_refused_upload_leaves_no_trace(
    api: Api, scratch: tuple[Path, list[str]], make: Any, code: str
) -> None:
    """A small refused package leaves no event, no object, and made no temporary directory."""
    data = make()
    resp = await api.submit(data)
    assert resp.status_code == 400 and resp.json()["error"]["code"] == code
    await _nothing_stored(api, data)
    assert scratch[1] == []


async def test_large_upload_spills_to_disk_and_is_stored(
    api: Api, scratch: tuple[Path, list[str]]
) -> None:
    """A package past the in-memory limit goes through a temporary file, is stored byte for
    byte, and the temporary files are gone when the answer comes."""
    data = _large()
    resp = await api.submit(data)
    assert resp.status_code == 202, resp.text
    await _stored(api, data)
    assert scratch[1] and not any(scratch[0].iterdir())


async def test_large_refused_upload_leaves_no_trace(
    api: Api, scratch: tuple[Path, list[str]]
) -> None:
    """A large refused package leaves no event, no object and no temporary file."""
    data = _large(kernel_id="cpu/Norm/RMSNorm/fp32/other")
    resp = await api.submit(data)
    assert resp.status_code == 400 and resp.json()["error"]["code"] == "invalid_kernel_id"
    await _nothing_stored(api, data)
    assert scratch[1] and not any(scratch[0].iterdir())


async def test_large_upload_is_judged_like_a_small_one(api: Api) -> None:
    """The judge check gives the same answer for a package checked on disk."""
    await import_kernel(api)
    await put_judge(api)
    changed = _large(benchmark="print('always accept')\n")
    resp = await api.submit(changed)
    assert resp.status_code == 403 and resp.json()["error"]["code"] == "harness_change_forbidden"
    assert resp.json()["error"]["details"]["changed"] == ["benchmark.py"]


async def test_a_second_package_part_is_refused(api: Api) -> None:
    """A form with two package file parts is 400 invalid_input and stores nothing."""
    first, second = tarball(), tarball(src="y = 2\n")
    resp = await api.client.post(
        "/api/submissions",
        files=[
            ("package", ("a.tar.gz", first, "application/gzip")),
            ("package", ("b.tar.gz", second, "application/gzip")),
        ],
        data={"kernel_id": KERNEL},
        headers={"X-Submitter-Id": "alice"},
    )
    assert resp.status_code == 400 and resp.json()["error"]["code"] == "invalid_input"
    assert "one package file part" in resp.json()["error"]["message"]
    await _nothing_stored(api, first)
    await _nothing_stored(api, second)


async def test_a_changed_judge_is_seen_at_once(api: Api) -> None:
    """The judge a submission is compared with is main's current one, not one kept from before."""
    await import_kernel(api)
    await put_judge(api)
    faster = tarball(better="higher", src="y = 2\n")
    assert (await api.submit(faster)).status_code == 403
    await put_judge(api, better="higher")
    assert (await api.submit(faster)).status_code == 202
    refused = await api.submit(tarball(src="z = 3\n"))
    assert refused.json()["error"]["details"]["changed"] == ["desc.yaml:metric"]


async def test_the_same_package_again_is_accepted_once_the_first_is_closed(api: Api) -> None:
    """A package whose bytes the log already names is accepted again after the first one ended,
    and the stored object is still the same bytes."""
    data = tarball()
    first = (await api.submit(data)).json()["submission_id"]
    cancel = await api.client.post(
        f"/api/submissions/{first}/cancel", json={}, headers={"X-Submitter-Id": "alice"}
    )
    assert cancel.status_code == 200, cancel.text
    again = await api.submit(data)
    assert again.status_code == 202, again.text
    sink = io.BytesIO()
    await api.log.get_object(PACKAGES_BUCKET, hashlib.sha256(data).hexdigest(), sink)
    assert sink.getvalue() == data


async def test_uploads_in_flight_share_a_memory_bound(
    api: Api, scratch: tuple[Path, list[str]]
) -> None:
    """When the uploads in flight already hold the shared bound, a small package goes to disk
    instead, is accepted all the same, and what was held is given back after every answer."""
    api.ctx.upload_memory = UploadMemory(total=0)
    data = tarball()
    assert (await api.submit(data)).status_code == 202
    await _stored(api, data)
    assert scratch[1] and not any(scratch[0].iterdir())
    api.ctx.upload_memory = memory = UploadMemory()
    assert (await api.submit(tarball(src="y = 2\n"))).status_code == 202
    assert (await api.submit(b"not a gzip at all")).status_code == 400
    assert memory.held == 0
