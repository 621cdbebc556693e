"""Commits of the kernel repo: what a commit id on a page stands for."""

from __future__ import annotations

import re
from typing import Literal, cast

import anyio.to_thread
from litestar import Controller, get
from litestar.params import FromPath

from kz_api.context import Ctx
from kz_api.errors import ApiError
from kz_api.kernelrepo import CommitDetail, commit_detail
from kz_api.models import CommitChange, CommitDoc
from kz_api.openapi import errors
from kz_events.errors import InvalidKernelId
from kz_events.ids import KernelId

__all__ = ["CommitsController"]

COMMIT_ID = re.compile(r"[0-9a-f]{40}")
KERNEL_DEPTH = 5  # a kernel's folder: arch/op_class/sub_class/quant/name
_Change = Literal["added", "modified", "deleted"]


def _kernel_of(paths: list[str]) -> str | None:
    """The kernel a commit touched: the five folders above its first changed file."""
    for path in paths:
        parts = path.split("/")
        if len(parts) > KERNEL_DEPTH:
            try:
                return str(KernelId.parse("/".join(parts[:KERNEL_DEPTH])))
            except InvalidKernelId:
                continue
    return None


def commit_doc(detail: CommitDetail) -> CommitDoc:
    paths = [path for path, _ in detail.changes]
    return CommitDoc(
        id=detail.id,
        message=detail.message,
        author=detail.author,
        committer=detail.committer,
        authored_at=detail.authored_at,
        committed_at=detail.committed_at,
        parents=detail.parents,
        trailers=detail.trailers,
        submission_id=detail.trailers.get("Kz-Submission"),
        kernel_id=_kernel_of(paths),
        changes=[CommitChange(path=p, change=cast("_Change", c)) for p, c in detail.changes],
    )


class CommitsController(Controller):
    path = "/api/commits"
    tags = ["kernels"]

    @get("/{commit_id:str}", responses=errors(400, 404), summary="A commit of the kernel repo")
    async def detail(self, ctx: Ctx, commit_id: FromPath[str]) -> CommitDoc:
        wanted = commit_id.lower()
        if not COMMIT_ID.fullmatch(wanted):
            raise ApiError(
                400,
                "invalid_commit_id",
                f"commit_id: expected 40 hexadecimal digits, got {commit_id[:80]!r}",
                details={"field": "commit_id"},
            )
        found = await anyio.to_thread.run_sync(commit_detail, ctx.settings.kernel_repo_path, wanted)
        if found is None:
            raise ApiError(404, "unknown_commit", f"the kernel repo has no commit {wanted}")
        return commit_doc(found)
