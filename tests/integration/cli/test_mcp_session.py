"""The MCP server driven by the SDK's own client, over stdio (`kz mcp`) and over streamable HTTP
(the API's `/mcp`, and `kz mcp --http`), against a real stack: `kz up` with its embedded NATS,
API, projectors and a sandbox runner, the example kernels imported. Assertions are on structure
and verdict words, never on figures (the judge's timings move)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx
import httpx2
import pytest
from mcp import ClientSession, StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client

from kz_events.server import free_port
from kz_testing import KzProcess, kz_argv

pytestmark = [pytest.mark.integration, pytest.mark.slow]

REPO = Path(__file__).resolve().parents[3]
BOARD = "cpu/Norm/RMSNorm/fp32"
FAST = (REPO / "examples/variants/rmsnorm_fast/src/rmsnorm.py").read_text()
WRONG = "import numpy as np\n\n\ndef rmsnorm(x, w):\n    return np.zeros_like(x)\n"


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    """`kz up --no-demo` (sandbox runner) on a free port with the examples imported."""
    tmp = tmp_path_factory.mktemp("mcp-stack")
    port = free_port()
    data = tmp / "kz"
    argv = kz_argv("up", "--no-demo", "--port", str(port), "--data-dir", str(data))
    up = KzProcess("kz up", argv, dict(os.environ), tmp / "up.log", cwd=tmp).start()
    url = f"http://127.0.0.1:{port}"
    try:
        up.wait_healthy(url, timeout_s=90)
        env = {**os.environ, "KZ_DATA_DIR": str(data)}
        done = subprocess.run(
            kz_argv("import", str(REPO / "examples/kernels"), "--json"),
            env=env, capture_output=True, text=True, timeout=120, check=False,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        yield url, data
    finally:
        up.signal(signal.SIGINT)
        up.wait_or_kill(30)


async def call(session: ClientSession, tool: str, arguments: dict[str, Any]) -> tuple[bool, Any]:
    result = await session.call_tool(tool, arguments)
    assert result.structured_content is not None
    text = result.content[0].text  # type: ignore[union-attr]
    assert json.loads(text) == result.structured_content  # the same document as text
    return bool(result.is_error), result.structured_content


def with_src(files: list[dict[str, Any]], source: str) -> list[dict[str, Any]]:
    return [{**f, "content": source} if f["path"] == "src/rmsnorm.py" else f for f in files]


@asynccontextmanager
async def over_stdio(url: str, submitter: str) -> AsyncIterator[ClientSession]:
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "kz_cli.main", "mcp", "--server", url, "--submitter", submitter],
        env=dict(os.environ),
    )
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        yield session


@asynccontextmanager
async def over_http(url: str, submitter: str) -> AsyncIterator[ClientSession]:
    headers = {"X-Submitter-Id": submitter}
    async with (
        httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(600)) as http,
        streamable_http_client(url, http_client=http) as (read, write, *_),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        yield session


async def test_stdio_from_the_boards_to_a_committed_kernel(stack: tuple[str, Path]) -> None:
    """list boards → start a kernel → bench it → submit it and wait → read the ranking; then a
    wrong kernel's structured rejection and its log, and a bad argument's structured error."""
    url, _ = stack
    async with over_stdio(url, "agent-stdio") as session:
        tools = {t.name: t for t in (await session.list_tools()).tools}
        assert {"list_boards", "start_kernel", "bench_files", "submit_files"} <= set(tools)
        assert all(t.output_schema and t.input_schema["type"] == "object" for t in tools.values())

        failed, boards = await call(session, "list_boards", {})
        assert not failed and BOARD in [b["board"] for b in boards["boards"]]
        failed, start = await call(session, "start_kernel", {"kernel_id": f"{BOARD}/mcp_fast"})
        assert not failed and start["judge_kernel"] == f"{BOARD}/numpy_ref"
        files = with_src(start["files"], FAST)

        failed, bench = await call(session, "bench_files", {"files": files})
        assert not failed and bench["outcome"] == "accepted", bench
        assert bench["result"]["correctness"]["passed"] is True

        made = {"agent": "test-agent", "model": "model-a", "tokens": 1500, "cost_usd": 0.25}
        failed, done = await call(session, "submit_files", {"files": files, **made})
        assert not failed and done["status"] == "committed", done
        assert len(done["commits"]["source"]) == 40 and done["provenance"]["model"] == "model-a"

        failed, board = await call(session, "board_ranking", {"board": BOARD, "model": "model-a"})
        assert not failed
        assert [r["kernel_id"] for r in board["ranking"]] == [f"{BOARD}/mcp_fast"]
        assert board["ranking"][0]["provenance"]["agent"] == "test-agent"

        failed, start = await call(session, "start_kernel", {"kernel_id": f"{BOARD}/mcp_wrong"})
        failed, wrong = await call(
            session, "submit_files", {"files": with_src(start["files"], WRONG)}
        )
        assert not failed and wrong["status"] == "rejected"
        # the code says why (the referee's), the fix what to do about any rejection
        assert (
            wrong["error"]["code"] == "wrong_output" and "submission_log" in wrong["error"]["fix"]
        )
        assert "all zeros" in wrong["error"]["message"]
        failed, log = await call(
            session, "submission_log", {"submission_id": wrong["submission_id"]}
        )
        assert not failed and "benchmark.py" in log["log"] and "rejected" in log["log"]

        failed, bad = await call(session, "submit_files", {"files": files, "tokens": -3})
        assert failed and bad["error"]["code"] == "invalid_argument"
        assert bad["error"]["details"]["at"] == "$.tokens" and bad["error"]["fix"]
        failed, bad = await call(session, "start_kernel", {"kernel_id": "not/a/kernel"})
        assert failed and bad["error"]["code"] == "invalid_argument"
        failed, bad = await call(session, "start_kernel", {"kernel_id": f"{BOARD}/mcp_fast"})
        assert failed and bad["error"]["code"] == "kernel_exists"

        judging = await session.read_resource("kz://docs/judging")
        assert "judge" in judging.contents[0].text  # type: ignore[union-attr]
        judge = await session.read_resource(f"kz://boards/{BOARD}/judge")
        assert ".kernel_package/benchmark.py" in judge.contents[0].text  # type: ignore[union-attr]


async def test_http_mounted_by_the_api_acts_as_the_callers_id(stack: tuple[str, Path]) -> None:
    """The API's /mcp: a submission made through it is the X-Submitter-Id's; its status shows
    the verdict; a lease taken through it is that submitter's."""
    url, _ = stack
    async with over_http(f"{url}/mcp", "agent-http") as session:
        failed, start = await call(session, "start_kernel", {"kernel_id": f"{BOARD}/mcp_http"})
        assert not failed
        files = with_src(start["files"], FAST)
        failed, valid = await call(session, "validate_files", {"files": files})
        assert not failed and valid["valid"] is True and "board's" in valid["judge"]
        failed, queued = await call(
            session, "submit_files", {"files": files, "wait": False, "model": "model-b"}
        )
        assert not failed and queued["status"] in ("queued", "running", "accepted", "committed")
        sid = queued["submission_id"]
        status: dict[str, Any] = queued
        for _ in range(20):
            if status["status"] in ("committed", "rejected", "failed"):
                break
            failed, status = await call(
                session, "submission_status",
                {"submission_id": sid, "wait_s": 30, "since": status["version"]},
            )  # fmt: skip
        assert status["status"] == "committed" and status["submitter_id"] == "agent-http"
        failed, lease = await call(session, "claim_kernel", {"kernel_id": f"{BOARD}/mcp_http"})
        assert not failed and lease["holder"] == "agent-http"
        failed, lease = await call(session, "release_kernel", {"kernel_id": f"{BOARD}/mcp_http"})
        assert not failed and lease["holder"] is None


async def test_kz_mcp_http_standalone_serves_the_same_tools(
    stack: tuple[str, Path], tmp_path: Path
) -> None:
    """`kz mcp --http` on its own port: ready as one JSON document, then the same tools."""
    url, _ = stack
    port = free_port()
    argv = kz_argv("mcp", "--http", "--port", str(port), "--server", url, "--json")
    proc = KzProcess("kz mcp", argv, dict(os.environ), tmp_path / "mcp.log", cwd=tmp_path).start()
    try:
        mcp_url = f"http://127.0.0.1:{port}/mcp"
        async with httpx.AsyncClient(timeout=1) as probe:
            for _ in range(100):
                try:
                    await probe.get(mcp_url)
                    break
                except httpx.TransportError:
                    await anyio.sleep(0.1)
        async with over_http(mcp_url, "agent-standalone") as session:
            failed, boards = await call(session, "list_boards", {})
            assert not failed and boards["total"] >= 3
            failed, bad = await call(session, "board_ranking", {"board": "no/such/board/x"})
            assert failed and bad["error"]["code"] == "unknown_board"
    finally:
        proc.signal(signal.SIGINT)
        proc.wait_or_kill(20)
