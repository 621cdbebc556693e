"""An agent's session with kernel zoo over MCP, printed as it goes: the SDK's own client runs
`kz mcp` over stdio and goes from "which boards exist" to "my kernel is committed".

With a stack running (`make up`, or `kz up`), from the repository's root:

    .venv/bin/python examples/agents/mcp_session.py [--server URL] [--board cpu/Norm/RMSNorm/fp32]

It lists the boards, reads one board's ranking, starts a kernel from the board, puts
`examples/variants/rmsnorm_fast`'s source in its `src/`, benches it, submits it with its
provenance and waits for the verdict, reads the ranking again, and makes one call with a bad
argument to show the structured error. Each line is `→ tool {arguments}` then `← isError=…
{answer}`, the answers cut to their main fields. docs/agents.md shows a run of it.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import uuid
from pathlib import Path
from typing import Any

import anyio
from mcp import ClientSession, StdioServerParameters, stdio_client

REPO = Path(__file__).resolve().parents[2]
FAST = REPO / "examples/variants/rmsnorm_fast/src/rmsnorm.py"
WIDTH = 900
PROVENANCE = {"agent": "example-agent", "model": "example-model", "tokens": 48210, "cost_usd": 0.61}


def shown(value: Any) -> str:
    text = json.dumps(value)
    return text if len(text) <= WIDTH else text[:WIDTH] + " …"


async def call(
    session: ClientSession, tool: str, arguments: dict[str, Any], *, as_shown: Any = None
) -> Any:
    print(f"→ {tool} {shown(as_shown if as_shown is not None else arguments)}")
    result = await session.call_tool(tool, arguments)
    answer = result.structured_content
    print(f"← isError={str(bool(result.is_error)).lower()} {shown(_main_fields(tool, answer))}\n")
    return answer


def _main_fields(tool: str, answer: Any) -> Any:
    """What a reader needs of each answer (the whole document is the tool's output schema)."""
    if not isinstance(answer, dict) or answer.get("error"):
        return answer
    if tool == "start_kernel":
        return {k: answer[k] for k in ("kernel_id", "judge_kernel", "reference", "next")} | {
            "files": [f["path"] for f in answer["files"]]
        }
    if tool == "bench_files":
        result = answer.get("result") or {}
        return {"outcome": answer["outcome"], "message": answer.get("message"),
                "score": result.get("score"), "validity": result.get("validity")}  # fmt: skip
    if tool == "submit_files":
        keep = ("submission_id", "status", "result", "validity", "confirmation", "commits",
                "provenance")  # fmt: skip
        return {k: answer[k] for k in keep if k in answer}
    return answer


async def session_run(server: str | None, board: str) -> int:
    submitter = f"agent-{uuid.uuid4().hex[:6]}"
    params = StdioServerParameters(
        command=sys.executable,
        args=[
            "-m",
            "kz_cli.main",
            "mcp",
            *(["--server", server] if server else []),
            "--submitter",
            submitter,
        ],
        env=dict(os.environ),
    )
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        tools = (await session.list_tools()).tools
        print(f"# {len(tools)} tools: {', '.join(t.name for t in tools)}\n")
        await call(session, "list_boards", {})
        await call(session, "board_ranking", {"board": board})
        kernel = f"{board}/{submitter.replace('-', '_')}_vec"
        start = await call(session, "start_kernel", {"kernel_id": kernel})
        files = [
            {**f, "content": FAST.read_text()} if f["path"].startswith("src/") else f
            for f in start["files"]
        ]
        edited = f"[{len(files)} files: as start_kernel gave them, src/ edited]"
        await call(session, "bench_files", {"files": files}, as_shown={"files": edited})
        done = await call(
            session, "submit_files", {"files": files, **PROVENANCE},
            as_shown={"files": edited, **PROVENANCE},
        )  # fmt: skip
        await call(session, "board_ranking", {"board": board, "model": PROVENANCE["model"]})
        await call(
            session, "submit_files", {"files": files, "cost_usd": "cheap"},
            as_shown={"files": edited, "cost_usd": "cheap"},
        )  # fmt: skip
    return 0 if done.get("status") == "committed" else 1


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--server", help="the API (default: the one `kz up` started here)")
    parser.add_argument("--board", default="cpu/Norm/RMSNorm/fp32")
    args = parser.parse_args()
    return anyio.run(session_run, args.server, args.board)


if __name__ == "__main__":
    raise SystemExit(main())
