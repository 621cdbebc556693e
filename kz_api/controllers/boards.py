"""Boards: list, detail, and the maintainer's review that accepts a board's judge."""

from __future__ import annotations

import asyncio
from typing import Annotated

import anyio.to_thread
import msgspec
from litestar import Controller, get, post
from litestar.di import Provide
from litestar.params import FromPath, JSONBody, QueryParameter

from kz_api.auth import Submitter, SubmitterDep, identify_submitter
from kz_api.context import Ctx
from kz_api.errors import ApiError
from kz_api.models import BoardDoc, BoardList, PinReferenceBody, ReviewBoardBody
from kz_api.openapi import errors
from kz_api.service import append_seen
from kz_events.errors import ObjectNotFound
from kz_events.events import BoardReviewed, EventMeta, ReferencePinned
from kz_events.ids import KernelId
from kz_events.subjects import JUDGES_BUCKET, aggregate_filter, judge_key
from kz_package import Limits, read_package
from kz_package.judge import board_judge_changes
from kz_projector.index import BoardInfo
from kz_projector.repo_read import KernelRepo

__all__ = ["BoardsController"]

BOARD = "/{arch:str}/{op_class:str}/{sub_class:str}/{quant:str}"
MAX_COMPARED = 100  # kernels whose judges the board detail compares with the board's


def board_doc(board: BoardInfo) -> BoardDoc:
    return msgspec.convert(board.doc(), BoardDoc)


async def _bundle(ctx: Ctx, kernel_id: str) -> bytes | None:
    try:
        return await ctx.log.get_object_bytes(JUDGES_BUCKET, judge_key(kernel_id))
    except ObjectNotFound:
        return None


def _differing(judge: bytes, others: dict[str, bytes]) -> list[str]:
    board = read_package(judge, Limits())
    return [k for k, b in others.items() if board_judge_changes(board, read_package(b, Limits()))]


async def other_judges(ctx: Ctx, board: BoardInfo) -> list[str] | None:
    """The board's kernels whose judge scripts differ from the board's judge (kernels without
    a stored judge bundle are left out); None when the board is too large to compare."""
    judge = board.judge
    if judge is None or len(board.kernels) > MAX_COMPARED:
        return None
    bundles = await asyncio.gather(*(_bundle(ctx, k) for k in board.kernels))
    found = {k: b for k, b in zip(board.kernels, bundles, strict=True) if b is not None}
    if judge not in found:
        return None
    others = {k: b for k, b in found.items() if k != judge}
    return await anyio.to_thread.run_sync(_differing, found[judge], others)


def _board(ctx: Ctx, arch: str, op_class: str, sub_class: str, quant: str) -> BoardInfo:
    key = "/".join((arch, op_class, sub_class, quant))
    board = ctx.models.index.boards.get(key)
    if board is None:
        raise ApiError(404, "unknown_board", f"no board {key}: no kernel of it is on main")
    return board


class BoardsController(Controller):
    path = "/api/boards"
    tags = ["boards"]
    dependencies = {"submitter": Provide(identify_submitter)}

    @get("/", responses=errors(), summary="List boards and whether each is reviewed")
    async def list_boards(
        self,
        ctx: Ctx,
        reviewed: Annotated[
            bool | None, QueryParameter(description="only reviewed (true) or unreviewed (false)")
        ] = None,
    ) -> BoardList:
        boards = ctx.models.index.boards
        items = [
            board_doc(boards[key])
            for key in sorted(boards)
            if reviewed is None or boards[key].reviewed is reviewed
        ]
        return BoardList(items=items, total=len(items))

    @get(BOARD, responses=errors(404), summary="Board detail")
    async def detail(
        self,
        ctx: Ctx,
        arch: FromPath[str],
        op_class: FromPath[str],
        sub_class: FromPath[str],
        quant: FromPath[str],
    ) -> BoardDoc:
        board = _board(ctx, arch, op_class, sub_class, quant)
        return BoardDoc(**board.doc(), other_judges=await other_judges(ctx, board))

    @post(
        BOARD + "/review",
        status_code=200,
        responses=errors(400, 401, 403, 404, 409),
        summary="Accept the board's judge (maintainers only)",
    )
    async def review(
        self,
        ctx: Ctx,
        submitter: SubmitterDep,
        arch: FromPath[str],
        op_class: FromPath[str],
        sub_class: FromPath[str],
        quant: FromPath[str],
        data: JSONBody[ReviewBoardBody | None] = None,
    ) -> BoardDoc:
        """The judge of `judge_kernel` (default: the board's judge now, that of its first
        kernel unless a review named another) becomes the board's reviewed judge."""
        _maintainers_only(submitter, "review a board")
        board = _board(ctx, arch, op_class, sub_class, quant)
        kernel_id = _kernel_of(board, (data.judge_kernel if data else None) or board.judge)
        event = BoardReviewed(
            **EventMeta.now(submitter.id).fields(),
            kernel_id=kernel_id,
            message=data.message if data else "",
        )
        return await _appended_on_kernel(ctx, board, event)

    @post(
        BOARD + "/reference",
        status_code=200,
        responses=errors(400, 401, 403, 404, 409),
        summary="Pin the board's reference (maintainers only)",
    )
    async def pin_reference(
        self,
        ctx: Ctx,
        submitter: SubmitterDep,
        arch: FromPath[str],
        op_class: FromPath[str],
        sub_class: FromPath[str],
        quant: FromPath[str],
        data: JSONBody[PinReferenceBody],
    ) -> BoardDoc:
        """The `src/` of `kernel_id` as `commit` (one of its commits on main; default: its
        newest) holds it becomes the board's reference: every judgement measures it beside the
        challenger from now on, and scores measured against the previous one are shown as
        estimates until their kernels are measured again."""
        _maintainers_only(submitter, "pin a board's reference")
        board = _board(ctx, arch, op_class, sub_class, quant)
        kernel_id = _kernel_of(board, data.kernel_id)
        repo = KernelRepo(ctx.settings.kernel_repo_path)
        commits = [c.commit for c in await anyio.to_thread.run_sync(repo.history, kernel_id)]
        commit = data.commit or (commits[0] if commits else None)
        if commit is None or commit not in commits:
            raise ApiError(
                409,
                "unknown_commit",
                f"commit must be one of the commits of {data.kernel_id} on main, got {commit}",
                details={"commits": commits},
            )
        event = ReferencePinned(
            **EventMeta.now(submitter.id).fields(),
            kernel_id=kernel_id,
            commit=commit,
            message=data.message,
        )
        return await _appended_on_kernel(ctx, board, event)


def _maintainers_only(submitter: Submitter, action: str) -> None:
    if not submitter.maintainer:
        raise ApiError(403, "forbidden", f"only maintainers may {action}")


def _kernel_of(board: BoardInfo, kernel_id: str | None) -> str:
    """`kernel_id` when it is a kernel of `board`; else 409 naming the board's kernels."""
    if kernel_id is None or kernel_id not in board.kernels:
        raise ApiError(
            409,
            "unknown_kernel",
            f"{kernel_id} is not a kernel of board {board.key}; pick one of its kernels",
            details={"kernels": list(board.kernels)},
        )
    return kernel_id


async def _appended_on_kernel(
    ctx: Ctx, board: BoardInfo, event: BoardReviewed | ReferencePinned
) -> BoardDoc:
    """A maintainer's board decision appended on its kernel's aggregate (checked against the
    aggregate's last event), and the board as the read model then has it."""
    kernel_id = KernelId.parse(event.kernel_id)
    subject = aggregate_filter("kernel", kernel_id.arch, str(kernel_id))
    stored = await ctx.log.load(subject)
    await append_seen(ctx, [event], expect=stored[-1][0] if stored else 0, expect_on=subject)
    return board_doc(ctx.models.index.boards[board.key])
