"""Kernels over HTTP: list from the index fold, detail from the kernel repo or the read model,
bench history, and the optimisation lease (claim, renew, release)."""

from __future__ import annotations

from typing import Any

import pytest
from api_helpers import (
    KERNEL,
    Api,
    accept,
    commit_kernel,
    import_kernel,
    package_files,
    stream_events,
    tarball,
)

from kz_events.events import KernelClaimed, KernelReleased

pytestmark = pytest.mark.integration

OTHER = "sm90/Attention/MHA/fp16/flash_v3"


def _code(resp: Any) -> str:
    return str(resp.json()["error"]["code"])


async def test_list_filters_sorts_and_pages(api: Api) -> None:
    """The list comes from the index fold and honours filters, q, sort and paging."""
    await import_kernel(api)
    await import_kernel(api, OTHER)
    all_ = (await api.client.get("/api/kernels")).json()
    assert [k["id"] for k in all_["items"]] == [KERNEL, OTHER] and all_["total"] == 2
    assert all_["items"][0]["title"] == "RMSNorm reference"
    only = (await api.client.get("/api/kernels", params={"arch": "sm90"})).json()
    assert [k["id"] for k in only["items"]] == [OTHER]
    found = (await api.client.get("/api/kernels", params={"q": "NUMPY_ref"})).json()
    assert [k["id"] for k in found["items"]] == [KERNEL]
    desc = (await api.client.get("/api/kernels", params={"sort": "-id", "limit": 1})).json()
    assert [k["id"] for k in desc["items"]] == [OTHER] and desc["total"] == 2
    page = (await api.client.get("/api/kernels", params={"offset": 1})).json()
    assert [k["id"] for k in page["items"]] == [OTHER]
    bad = await api.client.get("/api/kernels", params={"sort": "colour"})
    assert bad.status_code == 400 and _code(bad) == "invalid_input"
    limit = await api.client.get("/api/kernels", params={"limit": 0})
    assert limit.status_code == 400 and _code(limit) == "invalid_input"


async def test_detail_from_read_model_and_unknown(api: Api) -> None:
    """Without a kernel repo, detail answers from the read model; an unknown kernel is 404."""
    await import_kernel(api)
    resp = await api.client.get(f"/api/kernels/{KERNEL}")
    assert resp.status_code == 200, resp.text
    body = resp.json()
    assert body["source"] == "read_model" and body["summary"]["id"] == KERNEL
    missing = await api.client.get(f"/api/kernels/{OTHER}")
    assert missing.status_code == 404 and _code(missing) == "unknown_kernel"
    bad = await api.client.get("/api/kernels/sm90/Attention/MHA/fp16/..")
    assert bad.status_code in (400, 404)


async def test_detail_from_kernel_repo(api: Api) -> None:
    """With the kernel on main, detail shows desc, scoreboard, files and recent commits."""
    first = commit_kernel(api.settings.kernel_repo_path, package_files(), "import")
    head = commit_kernel(api.settings.kernel_repo_path, package_files(src="y = 3\n"), "faster")
    encoded = KERNEL.replace("/", "%2F")
    resp = await api.client.get(f"/api/kernels/{encoded}")
    assert resp.status_code == 200, resp.text
    body = resp.json()
    assert body["source"] == "repo" and body["head_commit"] == head
    assert body["desc"]["title"] == "RMSNorm reference"
    assert body["scoreboard"] == {"schema_version": 1, "kernel_id": KERNEL}
    assert {"path": "src/kernel.py", "size": 6} in body["files"]
    assert [c["id"] for c in body["commits"]] == [head, first]


async def test_bench_history(api: Api) -> None:
    """Bench history lists accepted values with commits, best in the metric's direction."""
    s1 = (await api.submit(tarball(src="a = 1\n"))).json()["submission_id"]
    s2 = (await api.submit(tarball(src="b = 1\n"))).json()["submission_id"]
    await accept(api, s1, value=10.0)
    await accept(api, s2, value=20.0)
    hist = (await api.client.get(f"/api/kernels/{KERNEL}/bench-history")).json()
    assert [h["value"] for h in hist["history"]] == [10.0, 20.0]
    assert hist["best"]["value"] == 10.0 and hist["current"]["value"] == 20.0
    assert hist["metric"] == {"name": "latency", "unit": "us", "better": "lower"}
    assert hist["history"][0]["commit"] == "a" * 40
    missing = await api.client.get(f"/api/kernels/{OTHER}/bench-history")
    assert missing.status_code == 404 and _code(missing) == "unknown_kernel"


async def test_lease_claim_renew_release(api: Api) -> None:
    """Claim, renew by the holder, 409 for another, release; unknown kernel and no auth refused."""
    await import_kernel(api)
    url = f"/api/kernels/{KERNEL}/claim"
    bob, alice = {"X-Submitter-Id": "bob"}, {"X-Submitter-Id": "alice"}
    first = await api.client.post(url, json={"ttl_s": 60}, headers=bob)
    assert first.status_code == 200 and first.json()["holder"] == "bob"
    renew = await api.client.post(url, json={"ttl_s": 120}, headers=bob)
    assert renew.json()["lease_id"] == first.json()["lease_id"]
    assert renew.json()["expires_at"] > first.json()["expires_at"]
    held = await api.client.post(url, headers=alice)
    assert held.status_code == 409 and _code(held) == "claim_held"
    assert held.json()["error"]["details"]["holder"] == "bob"
    not_held = await api.client.delete(url, headers=alice)
    assert not_held.status_code == 409 and _code(not_held) == "not_held"
    released = await api.client.delete(url, headers=bob)
    assert released.status_code == 200 and released.json()["holder"] is None
    kinds = [type(e) for e in await stream_events(api.log)]
    assert kinds.count(KernelClaimed) == 2 and kinds.count(KernelReleased) == 1
    assert (await api.client.post(url)).status_code == 401
    unknown = await api.client.post(f"/api/kernels/{OTHER}/claim", headers=bob)
    assert unknown.status_code == 404 and _code(unknown) == "unknown_kernel"
    ttl = await api.client.post(url, json={"ttl_s": 0}, headers=bob)
    assert ttl.status_code == 400 and _code(ttl) == "invalid_input"


async def test_a_new_kernel_has_a_page_from_its_first_submission(api: Api) -> None:
    """A kernel with a submission but no accepted result yet answers with what its package
    declares (source `submission`) and an empty history, not unknown_kernel."""
    resp = await api.submit(tarball(kernel_id=OTHER), kernel_id=OTHER)
    assert resp.status_code == 202, resp.text
    detail = await api.client.get(f"/api/kernels/{OTHER}")
    assert detail.status_code == 200, detail.text
    body = detail.json()
    assert body["source"] == "submission" and body["head_commit"] is None
    assert body["desc"]["kernel_id"] == OTHER and body["desc"]["title"] == "RMSNorm reference"
    assert body["files"] == [] and body["commits"] == []
    history = await api.client.get(f"/api/kernels/{OTHER}/bench-history")
    assert history.status_code == 200 and history.json()["history"] == []
    never = await api.client.get("/api/kernels/sm90/Attention/MHA/fp16/never_sent")
    assert never.status_code == 404 and _code(never) == "unknown_kernel"


async def test_a_commit_names_its_submission_kernel_and_changes(api: Api) -> None:
    """GET /api/commits/{id}: message, author, parents, trailers, the submission and kernel
    it records and the paths it changed; a malformed id is 400, an absent one 404."""
    repo = api.settings.kernel_repo_path
    first = commit_kernel(repo, package_files(), "import")
    sid = "0b7c2a43-1f7e-4b8e-9a55-6f0d2e1c9a10"
    message = f"{KERNEL}: submission {sid}\n\nKz-Submission: {sid}\nKz-Event-Seq: 7\n"
    head = commit_kernel(repo, package_files(src="y = 3\n"), message)
    body = (await api.client.get(f"/api/commits/{head}")).json()
    assert body["id"] == head and body["parents"] == [first]
    assert body["author"] == "Ada <ada@example.org>"
    assert body["trailers"] == {"Kz-Submission": sid, "Kz-Event-Seq": "7"}
    assert body["submission_id"] == sid and body["kernel_id"] == KERNEL
    assert body["changes"] == [{"path": f"{KERNEL}/src/kernel.py", "change": "modified"}]
    root = (await api.client.get(f"/api/commits/{first.upper()}")).json()
    assert root["parents"] == [] and {c["change"] for c in root["changes"]} == {"added"}
    bad = await api.client.get("/api/commits/HEAD~1")
    assert bad.status_code == 400 and _code(bad) == "invalid_commit_id"
    assert bad.json()["error"]["details"] == {"field": "commit_id"}
    missing = await api.client.get(f"/api/commits/{'0' * 40}")
    assert missing.status_code == 404 and _code(missing) == "unknown_commit"
