"""`kz boards [BOARD]`: which boards exist (arch/op_class/sub_class/quant, whether a
maintainer reviewed its judge, its reference and kernels), or one board's ranking, optionally
only the kernels a model or an agent made (from `index.json`)."""

from __future__ import annotations

import argparse
from typing import Any

from kz_cli.contract import CliError, emit
from kz_cli.http import ApiClient, add_server_options

__all__ = ["board_rows", "ranking", "ranking_lines", "register"]


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "boards", help="list the boards, or rank one board's kernels", description=__doc__
    )
    parser.add_argument("board", nargs="?", metavar="BOARD", help="arch/op_class/sub_class/quant")
    parser.add_argument("--model", help="only kernels whose current result this model made")
    parser.add_argument("--agent", help="only kernels whose current result this agent made")
    add_server_options(parser)
    parser.set_defaults(handler=_handle_boards)


def board_rows(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The boards as the list shows them: key, review, judge, reference and kernel count."""
    return [
        {
            "board": item.get("board"),
            "reviewed": item.get("reviewed"),
            "judge_kernel": item.get("judge_kernel"),
            "reference": (item.get("reference") or {}).get("kernel_id"),
            "kernels": len(item.get("kernels") or []),
        }
        for item in items
    ]


def ranking(
    index: dict[str, Any], board: str, *, model: str | None = None, agent: str | None = None
) -> list[dict[str, Any]]:
    """A board's ranked kernels from `index.json` (reviewed or not), each with its title and
    the provenance of its current result; `model`/`agent` keep only those it names."""
    rows = (index.get("leaderboards") or {}).get(board)
    if rows is None:
        rows = (index.get("unreviewed_leaderboards") or {}).get(board, [])
    kernels = {k.get("id"): k for k in index.get("kernels", [])}
    out = []
    for row in rows:
        kernel = kernels.get(row.get("kernel_id"), {})
        made = (kernel.get("current") or {}).get("provenance") or {}
        if (model and made.get("model") != model) or (agent and made.get("agent") != agent):
            continue
        out.append({**row, "title": kernel.get("title"), "provenance": made or None})
    return out


def ranking_lines(board: str, rows: list[dict[str, Any]]) -> list[str]:
    if not rows:
        return [f"{board}: no ranked kernel"]
    lines = [f"{board}:"]
    for row in rows:
        score = row.get("score") or {}
        shown = f"{score['speedup']:.3g}x" if score.get("speedup") else "-"
        made = row.get("provenance") or {}
        by = " ".join(str(made[k]) for k in ("agent", "model") if made.get(k))
        rank = row.get("rank")
        place = "-" if rank is None else str(rank)  # unranked: disputed, suspect, held back
        why = f"(unranked: {row['unranked']})" if rank is None and row.get("unranked") else ""
        tail = "  ".join(part for part in (by, why) if part)
        lines.append(f"  {place:>3}  {shown:>8}  {row.get('kernel_id')}  {tail}".rstrip())
    return lines


def _handle_boards(args: argparse.Namespace) -> int:
    client = ApiClient(args)
    if args.board is None:
        items = client.json("GET", "/api/boards").get("items", [])
        rows = board_rows(items)
        if args.json:
            emit(args, {"boards": rows, "total": len(rows)})
        else:
            for row in rows:
                review = "reviewed" if row["reviewed"] else "unreviewed"
                print(f"{row['board']}  {row['kernels']} kernels, {review}, "
                      f"reference {row['reference']}")  # fmt: skip
        return 0
    index = client.json("GET", "/api/index.json")
    if args.board not in (index.get("boards") or {}):
        raise CliError("unknown_board", f"no board {args.board}", details={"board": args.board})
    rows = ranking(index, args.board, model=args.model, agent=args.agent)
    if args.json:
        emit(args, {"board": args.board, "log_seq": index.get("log_seq"), "ranking": rows})
    else:
        print("\n".join(ranking_lines(args.board, rows)))
    return 0
