"""The MCP tools: what each does, its argument and answer Structs (their JSON Schemas are the
tools' input and output schemas), and its handler. The same operations as the `kz` commands,
answering the same documents (`kz_cli.documents`).
"""

from __future__ import annotations

import argparse
import io
import tempfile
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread
import msgspec

from kz_cli.cmd_boards import board_rows, ranking
from kz_cli.cmd_logs import MAX_JSON_LOG_CHARS
from kz_cli.cmd_submit import TERMINAL, verdict_doc
from kz_cli.cmd_validate import judge_check
from kz_cli.contract import CliError, Exit, exit_for_status, from_response
from kz_cli.documents import (
    BenchDoc,
    BoardsDoc,
    KernelDoc,
    LeaseDoc,
    LogDoc,
    RankingDoc,
    StarterDoc,
    StatusDoc,
    ValidateDoc,
)
from kz_cli.starter import starter_package
from kz_events.errors import InvalidInput
from kz_events.ids import KernelId
from kz_events.provenance import parse_provenance
from kz_mcp.api import Api, Identity, failure
from kz_mcp.arguments import (
    BenchArgs,
    BoardArgs,
    ClaimArgs,
    FilesArgs,
    KernelArgs,
    LogArgs,
    NoArgs,
    StatusArgs,
    SubmitArgs,
    as_file_docs,
    file_map,
)
from kz_package import pack_files, read_package, validate_package_files

__all__ = ["TOOLS", "Tool", "ToolContext"]


@dataclass
class ToolContext:
    """What a tool call acts with: the API, the caller, and the machine's one bench at a time."""

    api: Api
    who: Identity
    bench_enabled: bool = True
    bench_lock: anyio.Lock = field(default_factory=anyio.Lock)


Handler = Callable[[ToolContext, Any], Awaitable[dict[str, Any]]]


@dataclass(frozen=True)
class Tool:
    name: str
    title: str
    description: str
    arguments: type[msgspec.Struct]
    answer: type[msgspec.Struct]
    handler: Handler
    read_only: bool = True


def _board_of(kernel_id: KernelId) -> str:
    return "/".join(kernel_id.parts[:4])


async def list_boards(ctx: ToolContext, _: NoArgs) -> dict[str, Any]:
    items = (await ctx.api.json("GET", "/api/boards", ctx.who)).get("items", [])
    rows = board_rows(items)
    return {"boards": rows, "total": len(rows)}


async def board_ranking(ctx: ToolContext, args: BoardArgs) -> dict[str, Any]:
    index = await ctx.api.json("GET", "/api/index.json", ctx.who)
    if args.board not in (index.get("boards") or {}):
        raise failure("unknown_board", f"no board {args.board}", board=args.board)
    rows = ranking(index, args.board, model=args.model, agent=args.agent)
    return {"board": args.board, "log_seq": index.get("log_seq"), "ranking": rows}


async def kernel_detail(ctx: ToolContext, args: KernelArgs) -> dict[str, Any]:
    kernel_id = KernelId.parse(args.kernel_id)
    kernel = await ctx.api.json("GET", f"/api/kernels/{kernel_id}", ctx.who)
    history = await ctx.api.json("GET", f"/api/kernels/{kernel_id}/bench-history", ctx.who)
    return {"kernel": kernel, "history": history}


async def start_kernel(ctx: ToolContext, args: KernelArgs) -> dict[str, Any]:
    kernel_id = KernelId.parse(args.kernel_id)
    answer = await ctx.api.call("GET", f"/api/kernels/{kernel_id}/judge", ctx.who)
    if answer.status_code == 404:
        raise CliError(
            "unknown_board",
            f"board {_board_of(kernel_id)} has no kernel yet, so no judge to start from",
            fix="pick a board from list_boards",
        )
    if answer.status_code >= 400:
        raise from_response(answer)
    if answer.headers.get("Kz-Judge-Scope") != "board":
        raise failure("kernel_exists", f"{kernel_id} is on main already")
    judge_kernel = answer.headers.get("Kz-Judge-Kernel", "")
    starter = await _starter(ctx, kernel_id, answer.content, judge_kernel)
    return {
        "kernel_id": str(kernel_id),
        "judge_kernel": judge_kernel,
        "reference": starter.reference or None,
        "files": as_file_docs(starter.files),
        "next": ["edit the src/ files", "bench_files", "submit_files"],
    }


async def _starter(ctx: ToolContext, kernel_id: KernelId, bundle: bytes, judge_kernel: str) -> Any:
    author = ctx.who.submitter or "agent"

    def make(src: dict[str, tuple[int, bytes]]) -> Any:
        return starter_package(
            kernel_id, bundle, author=author, judge_kernel=judge_kernel, reference_src=src
        )

    try:
        try:
            return await anyio.to_thread.run_sync(make, {})
        except InvalidInput as exc:
            if exc.code != "no_reference":
                raise
        # a bundle from before references were pinned: the reference kernel's src/ on main
        return await anyio.to_thread.run_sync(make, await _reference_src(ctx, kernel_id))
    except InvalidInput as exc:
        raise CliError(exc.code, exc.message, details=exc.details or None) from exc


async def _reference_src(ctx: ToolContext, kernel_id: KernelId) -> dict[str, tuple[int, bytes]]:
    board = await ctx.api.json("GET", f"/api/boards/{_board_of(kernel_id)}", ctx.who)
    reference = (board.get("reference") or {}).get("kernel_id")
    if reference is None:
        return {}
    detail = await ctx.api.json("GET", f"/api/kernels/{reference}", ctx.who)
    paths = [str(f["path"]) for f in detail.get("files", []) if str(f["path"]).startswith("src/")]
    return {
        p: (
            0o644,
            (await ctx.api.ok("GET", f"/api/kernels/{reference}/files/{p}", ctx.who)).content,
        )
        for p in paths
    }


def _tarball(files: dict[str, tuple[int, bytes]]) -> tuple[bytes, str]:
    out = io.BytesIO()
    digest = pack_files(files, out)
    return out.getvalue(), digest


def _checked(files: dict[str, tuple[int, bytes]], kernel_id: str | None) -> tuple[bytes, str, str]:
    """Pack and check the package as the server would: its tarball, sha256 and kernel id."""
    tarball, digest = _tarball(files)
    expected = KernelId.parse(kernel_id) if kernel_id else None
    package = validate_package_files(read_package(tarball), expected_kernel_id=expected)
    return tarball, digest, str(package.kernel_id)


async def _valid(
    files: dict[str, tuple[int, bytes]], kernel_id: str | None
) -> tuple[bytes, str, str]:
    try:
        return await anyio.to_thread.run_sync(_checked, files, kernel_id)
    except InvalidInput as exc:
        raise CliError(exc.code, exc.message, details=exc.details or None) from exc


async def validate_files(ctx: ToolContext, args: FilesArgs) -> dict[str, Any]:
    tarball, digest, kernel_id = await _valid(file_map(args.files), args.kernel_id)
    answer = await ctx.api.call("GET", f"/api/kernels/{kernel_id}/judge", ctx.who)
    check = judge_check(ctx.api.base_url, KernelId.parse(kernel_id), tarball, answer)
    if check.refusal is not None:
        raise CliError(
            check.refusal["code"], check.refusal["message"], details=check.refusal["details"]
        )
    return {"valid": True, "kernel_id": kernel_id, "sha256": digest, "judge": check.note}


async def bench_files(ctx: ToolContext, args: BenchArgs) -> dict[str, Any]:
    if not ctx.bench_enabled:
        raise CliError(
            "bench_unavailable",
            "this server does not judge packages itself (KZ_MCP_BENCH is off)",
            fix="run kz mcp on your own machine to bench there, or submit_files",
        )
    files = file_map(args.files)
    await _valid(files, None)
    options = argparse.Namespace(
        baseline=None, judge=None, backend="sandbox", timeout=args.timeout_s
    )

    def run() -> dict[str, Any]:
        # The runner (a sandbox, the supervisor and the judge's channel) loads on the first
        # bench, not with the API that mounts these tools.
        from kz_cli.cmd_bench import bench, bench_doc

        with tempfile.TemporaryDirectory(prefix="kz-mcp-bench-") as tmp:
            root = Path(tmp) / "package"
            for path, (mode, data) in files.items():
                (root / path).parent.mkdir(parents=True, exist_ok=True)
                (root / path).write_bytes(data)
                (root / path).chmod(mode)
            return bench_doc(bench(root, options))

    async with ctx.bench_lock:  # one judgement at a time: they share this machine's CPU
        return await anyio.to_thread.run_sync(run)


async def submit_files(ctx: ToolContext, args: SubmitArgs) -> dict[str, Any]:
    files = file_map(args.files)
    made = parse_provenance(
        {k: getattr(args, k) for k in ("agent", "model", "tokens", "cost_usd", "transcript_url")}
    )
    tarball, _, kernel_id = await _valid(files, args.kernel_id)
    form = {"kernel_id": kernel_id, "message": args.message}
    if ctx.who.submitter:
        form["submitter_id"] = ctx.who.submitter
    form |= {k: str(v) for k, v in (made.fields() if made else {}).items()}
    accepted = await ctx.api.json(
        "POST",
        "/api/submissions",
        ctx.who,
        data=form,
        files={"package": ("package.tar.gz", tarball, "application/gzip")},
    )
    sid = str(accepted["submission_id"])
    if not args.wait:
        return await _status(ctx, sid, 0, 0)
    return await _follow(ctx, sid, args.timeout_s)


async def _status(ctx: ToolContext, sid: str, since: int, wait_s: float) -> dict[str, Any]:
    params = {"since": since, "timeout": wait_s} if wait_s else {}
    doc = await ctx.api.json("GET", f"/api/submissions/{sid}/status", ctx.who, params=params)
    return verdict_doc(doc, ctx.api.base_url)


async def _follow(ctx: ToolContext, sid: str, timeout_s: float) -> dict[str, Any]:
    doc: dict[str, Any] = {}
    since = 0
    with anyio.move_on_after(timeout_s):
        while not doc or doc.get("status") not in TERMINAL:
            doc = await _status(ctx, sid, since, 30)
            since = int(doc.get("version") or since)
    if doc.get("status") not in TERMINAL:
        doc = await _status(ctx, sid, 0, 0)
        doc["error"] = {
            "code": "wait_timeout",
            "message": f"still {doc.get('status')} after {timeout_s:g} s",
            "fix": "call submission_status with wait_s until it ends",
        }
    return doc


async def submission_status(ctx: ToolContext, args: StatusArgs) -> dict[str, Any]:
    return await _status(ctx, args.submission_id, args.since, args.wait_s)


async def submission_log(ctx: ToolContext, args: LogArgs) -> dict[str, Any]:
    sid = args.submission_id
    text = (await ctx.api.ok("GET", f"/api/submissions/{sid}/logs", ctx.who)).text
    tail = min(args.tail_chars, MAX_JSON_LOG_CHARS)
    url = f"{ctx.api.base_url}/api/submissions/{sid}/logs"
    return {
        "submission_id": sid,
        "log_url": url,
        "log": text[-tail:],
        "truncated": len(text) > tail,
    }


async def claim_kernel(ctx: ToolContext, args: ClaimArgs) -> dict[str, Any]:
    path = f"/api/kernels/{KernelId.parse(args.kernel_id)}/claim"
    return await ctx.api.json("POST", path, ctx.who, json={"ttl_s": args.ttl_s})


async def release_kernel(ctx: ToolContext, args: KernelArgs) -> dict[str, Any]:
    path = f"/api/kernels/{KernelId.parse(args.kernel_id)}/claim"
    return await ctx.api.json("DELETE", path, ctx.who)


def ended_badly(doc: dict[str, Any]) -> bool:
    """A submission document whose state is not a success (a tool error for the client)."""
    status = str(doc.get("status", ""))
    return status in TERMINAL and exit_for_status(status) != Exit.DONE


TOOLS: tuple[Tool, ...] = (
    Tool("list_boards", "Which boards exist",
         "The boards (arch/op_class/sub_class/quant): whether a maintainer reviewed each judge, "
         "its judge kernel, its pinned reference and how many kernels it has. Start here.",
         NoArgs, BoardsDoc, list_boards),
    Tool("board_ranking", "A board's ranking",
         "The board's kernels ranked by their speed-up over the board's pinned reference "
         "(settled results only), with each current result's provenance; model/agent filter.",
         BoardArgs, RankingDoc, board_ranking),
    Tool("kernel_detail", "A kernel's detail and history",
         "A kernel's desc, scoreboard, files, commits and its accepted history.",
         KernelArgs, KernelDoc, kernel_detail),
    Tool("start_kernel", "Start a new kernel on a board",
         "A ready package for a new kernel id on an existing board, returned as files: the "
         "board's judge (.kernel_package/benchmark.py, build_test_env.py: keep them as they are), "
         "desc.yaml, an empty scoreboard, and src/ started from the board's pinned reference. "
         "Edit src/, then bench_files and submit_files with all the files.",
         KernelArgs, StarterDoc, start_kernel),
    Tool("validate_files", "Check a package like the server",
         "Checks the package (all its files) with the server's own rules, and its judge against "
         "the board's; problems come back as an error with details.problems.",
         FilesArgs, ValidateDoc, validate_files),
    Tool("bench_files", "Judge a package locally",
         "Judges the package on the server's machine exactly as a runner would (sandbox, the "
         "kernel in its own worker, the board's judge timing and checking every call): the "
         "outcome, the result document, and the log when it is not accepted. One at a time.",
         BenchArgs, BenchDoc, bench_files),
    Tool("submit_files", "Submit a package",
         "Submits the package (all its files) with optional provenance (agent, model, tokens, "
         "cost_usd, transcript_url), then waits for the verdict up to timeout_s (wait=false: "
         "returns once queued, with its queue position). Committed: its two commits.",
         SubmitArgs, StatusDoc, submit_files, read_only=False),
    Tool("submission_status", "A submission's status",
         "Its state (queued with its queue position, running, accepted, committed, rejected, "
         "failed, cancelled), verdict and commits; wait_s > 0 waits for a change after `since` "
         "(the version it last saw).",
         StatusArgs, StatusDoc, submission_status),
    Tool("submission_log", "A submission's runner log",
         "The runner's log of its latest attempt (the build step, the judge, each worker): its "
         "last tail_chars characters.",
         LogArgs, LogDoc, submission_log),
    Tool("claim_kernel", "Take an optimisation lease",
         "Holds the kernel for ttl_s seconds so other submitters' submissions of it are refused "
         "(claim_held) meanwhile; claim again to renew.",
         ClaimArgs, LeaseDoc, claim_kernel, read_only=False),
    Tool("release_kernel", "Release an optimisation lease",
         "Gives the kernel's lease back.", KernelArgs, LeaseDoc, release_kernel, read_only=False),
)  # fmt: skip
