"""Edits rebase: a clean three-way merge onto main answers the rebased tarball; overlapping
changes answer 409 with the conflicting paths."""

from __future__ import annotations

import base64
import hashlib
import io
import tarfile
from typing import Any

import pytest
from api_helpers import KERNEL, Api, commit_kernel, package_files, tarball

pytestmark = pytest.mark.integration

LINES = "".join(f"line{i} = {i}\n" for i in range(10))


async def _rebase(api: Api, base: str, data: bytes) -> Any:
    return await api.client.post(
        "/api/edits/rebase",
        files={"package": ("edit.tar.gz", data, "application/gzip")},
        data={"kernel_id": KERNEL, "base_commit": base},
        headers={"X-Submitter-Id": "alice"},
    )


async def test_clean_rebase_merges_both_changes(api: Api) -> None:
    """Main changed line 1, the edit changed line 8: the answer carries both on main's head."""
    repo = api.settings.kernel_repo_path
    base = commit_kernel(repo, package_files(src=LINES))
    head = commit_kernel(repo, package_files(src=LINES.replace("line1 = 1", "line1 = 100")))
    edit = tarball(src=LINES.replace("line8 = 8", "line8 = 800"))
    resp = await _rebase(api, base, edit)
    assert resp.status_code == 200, resp.text
    body = resp.json()
    assert body["base_commit"] == head and body["changed_paths"] == ["src/kernel.py"]
    data = base64.b64decode(body["package_base64"])
    assert hashlib.sha256(data).hexdigest() == body["package_sha256"]
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as tar:
        member = tar.extractfile("src/kernel.py")
        assert member is not None
        merged = member.read().decode()
    assert "line1 = 100" in merged and "line8 = 800" in merged


async def test_conflicting_rebase_is_409(api: Api) -> None:
    """Both sides changing the same line is 409 merge_conflict naming the path."""
    repo = api.settings.kernel_repo_path
    base = commit_kernel(repo, package_files(src=LINES))
    commit_kernel(repo, package_files(src=LINES.replace("line4 = 4", "line4 = 40")))
    resp = await _rebase(api, base, tarball(src=LINES.replace("line4 = 4", "line4 = 41")))
    assert resp.status_code == 409
    assert resp.json()["error"]["code"] == "merge_conflict"
    assert resp.json()["error"]["details"]["paths"] == ["src/kernel.py"]


async def test_rebase_refusals(api: Api) -> None:
    """An unknown base commit is 400, a kernel not on main 404, no submitter 401."""
    repo = api.settings.kernel_repo_path
    commit_kernel(repo, package_files())
    edit = tarball()
    bad = await _rebase(api, "0" * 40, edit)
    assert bad.status_code == 400 and bad.json()["error"]["code"] == "unknown_commit"
    resp = await api.client.post(
        "/api/edits/rebase",
        files={"package": ("e.tar.gz", edit, "application/gzip")},
        data={"kernel_id": "cpu/Norm/RMSNorm/fp32/absent", "base_commit": "0" * 40},
        headers={"X-Submitter-Id": "alice"},
    )
    assert resp.status_code == 404 and resp.json()["error"]["code"] == "unknown_kernel"
    anon = await api.client.post("/api/edits/rebase", files={"package": ("e", edit)})
    assert anon.status_code == 401
