"""`kz claim` (an optimisation lease on a kernel) and `kz kernels` (the kernel list, filtered
by board, text, model or agent)."""

from __future__ import annotations

import argparse
from typing import Any

from kz_cli.contract import emit
from kz_cli.http import ApiClient, add_server_options
from kz_events.ids import KernelId

__all__ = ["claim_line", "kernel_table", "register"]


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    claim = subparsers.add_parser("claim", help="take, renew or release a kernel's lease")
    claim.add_argument("kernel_id", metavar="ID", help="the kernel to hold")
    claim.add_argument("--ttl", type=float, default=3600.0, metavar="S", help="lease seconds")
    claim.add_argument("--release", action="store_true", help="give the lease back")
    add_server_options(claim)
    claim.set_defaults(handler=_handle_claim)

    kernels = subparsers.add_parser("kernels", help="list kernels")
    kernels.add_argument("--arch", help="only this architecture, e.g. sm90 or cpu")
    kernels.add_argument("--board", metavar="BOARD", help="only this board, arch/op/sub/quant")
    kernels.add_argument("--q", metavar="TEXT", help="only kernels whose id or title holds this")
    kernels.add_argument("--model", help="only kernels whose current result this model made")
    kernels.add_argument("--agent", help="only kernels whose current result this agent made")
    kernels.add_argument("--limit", type=int, default=50, help="at most this many (50)")
    add_server_options(kernels)
    kernels.set_defaults(handler=_handle_kernels)


def _handle_claim(args: argparse.Namespace) -> int:
    client = ApiClient(args)
    kernel = KernelId.parse(args.kernel_id)
    path = f"/api/kernels/{kernel}/claim"
    if args.release:
        body = client.json("DELETE", path)
    else:
        body = client.json("POST", path, json={"ttl_s": args.ttl})
    if args.json:
        emit(args, body)
    else:
        print(claim_line(body))
    return 0


def claim_line(lease: dict[str, Any]) -> str:
    """`kz claim`'s answer for people: who holds the kernel and until when, or that it is free."""
    if not lease.get("holder"):
        return f"released {lease.get('kernel_id')}: nobody holds it"
    return (
        f"{lease['holder']} holds {lease.get('kernel_id')} until {lease.get('expires_at')} "
        f"(lease {lease.get('lease_id')}; renew with kz claim, give back with --release)"
    )


def _query(args: argparse.Namespace) -> dict[str, Any]:
    parts = dict(zip(("arch", "op_class", "sub_class", "quant"), (args.board or "").split("/"),
                     strict=False)) if args.board else {}  # fmt: skip
    wanted = {"arch": args.arch, "q": args.q, "model": args.model, "agent": args.agent}
    return {k: v for k, v in {**wanted, **parts, "limit": args.limit}.items() if v}


def _handle_kernels(args: argparse.Namespace) -> int:
    client = ApiClient(args)
    body = client.json("GET", "/api/kernels", params=_query(args))
    if args.json:
        emit(args, body)
        return 0
    print("\n".join(kernel_table(body.get("items", []))))
    return 0


def kernel_table(kernels: list[dict[str, Any]]) -> list[str]:
    """`kz kernels`: one aligned line per kernel with its best value (4 significant digits,
    its unit), who holds it and how many results were accepted."""
    if not kernels:
        return ["no kernels"]
    rows = [("KERNEL", "BEST", "BY", "ACCEPTED")]
    for kernel in kernels:
        best = kernel.get("best") or {}
        value = best.get("value")
        unit = (kernel.get("metric") or {}).get("unit", "")
        shown = f"{value:.4g} {unit}".strip() if isinstance(value, int | float) else "-"
        rows.append(
            (
                str(kernel.get("id", kernel.get("kernel_id"))),
                shown,
                str(best.get("submitter") or "-"),
                str(kernel.get("accepted_count", 0)),
            )
        )
    widths = [max(len(row[i]) for row in rows) for i in range(3)]  # the last column ragged
    return ["  ".join([*(row[i].ljust(widths[i]) for i in range(3)), row[3]]) for row in rows]
