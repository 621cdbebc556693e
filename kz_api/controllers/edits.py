"""Edits: rebase an edited package (made from `base_commit`) onto main's current version."""

from __future__ import annotations

import base64
import io
import tempfile
from pathlib import Path
from typing import Any

import anyio.to_thread
from litestar import Controller, Request, post
from litestar.di import Provide

from kz_api.auth import SubmitterDep, identify_submitter
from kz_api.context import Ctx
from kz_api.errors import ApiError
from kz_api.kernelrepo import commit_files, main_head
from kz_api.models import RebaseAnswer
from kz_api.openapi import errors, multipart_operation
from kz_api.rebase import merge_packages
from kz_api.upload import receive_upload
from kz_events.ids import KernelId
from kz_package import Limits, pack_directory, unpack_tarball

__all__ = ["EditsController"]

_RebaseOperation = multipart_operation(
    ["kernel_id", "base_commit"],
    {
        "kernel_id": "the kernel the edit is for",
        "base_commit": "the kernel repo commit the edit was made from",
    },
)


def _read_tree(root: Path) -> dict[str, bytes]:
    return {
        p.relative_to(root).as_posix(): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


def _rebase(
    repo: Path, kernel_id: KernelId, base_commit: str, tarball: bytes | Path
) -> RebaseAnswer:
    head = main_head(repo)
    ours = commit_files(repo, head, kernel_id.repo_path) if head else None
    if head is None or ours is None:
        raise ApiError(404, "unknown_kernel", f"main has no kernel {kernel_id}")
    base = commit_files(repo, base_commit, kernel_id.repo_path)
    if base is None:
        raise ApiError(
            400,
            "unknown_commit",
            f"base_commit {base_commit!r} is not a commit of the kernel repo holding {kernel_id}",
        )
    with tempfile.TemporaryDirectory(prefix="kz-rebase-") as tmp:
        edited = Path(tmp) / "edited"
        source = io.BytesIO(tarball) if isinstance(tarball, bytes) else tarball
        unpack_tarball(source, edited, Limits())
        outcome = merge_packages(base, ours, _read_tree(edited))
        if outcome.conflicts:
            raise ApiError(
                409,
                "merge_conflict",
                f"the edit conflicts with main in {len(outcome.conflicts)} path(s)",
                details={"paths": outcome.conflicts, "base_commit": head},
            )
        merged = Path(tmp) / "merged"
        for rel, data in outcome.files.items():
            target = merged / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(data)
        out = io.BytesIO()
        digest = pack_directory(merged, out)
    changed = sorted(p for p in outcome.files if outcome.files[p] != ours.get(p))
    return RebaseAnswer(
        kernel_id=str(kernel_id),
        base_commit=head,
        package_sha256=digest,
        package_base64=base64.b64encode(out.getvalue()).decode(),
        changed_paths=changed,
    )


class EditsController(Controller):
    path = "/api/edits"
    tags = ["edits"]
    dependencies = {"submitter": Provide(identify_submitter)}

    @post(
        "/rebase",
        status_code=200,
        operation_class=_RebaseOperation,
        request_max_body_size=None,  # receive_upload bounds it by KZ_MAX_UPLOAD_BYTES
        responses=errors(401, 404, 409, 413, 415),
        summary="Three-way merge of an edited package onto main",
    )
    async def rebase(
        self, request: Request[Any, Any, Any], ctx: Ctx, submitter: SubmitterDep
    ) -> RebaseAnswer:
        async with receive_upload(
            request, max_bytes=ctx.settings.max_upload_bytes, memory=ctx.upload_memory
        ) as upload:
            kernel_id = KernelId.parse(upload.fields.get("kernel_id", ""))
            base_commit = upload.fields.get("base_commit", "")
            if not base_commit or upload.package is None:
                raise ApiError(400, "invalid_input", "the form needs base_commit and a package")
            return await anyio.to_thread.run_sync(
                _rebase, ctx.settings.kernel_repo_path, kernel_id, base_commit, upload.package
            )
