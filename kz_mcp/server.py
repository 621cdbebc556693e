"""The Model Context Protocol server: the tools of `kz_mcp.tools` and the resources of
`kz_mcp.resources` on the official SDK's low-level `Server`, over stdio (`kz mcp`) or
streamable HTTP (`kz mcp --http`, and the `/mcp` the API mounts).

It acts as the caller: on HTTP the request's `X-Submitter-Id` and `Authorization: Bearer`
headers, else the identity it was started with. Every failure is a tool result with
`isError` and `{"error": {"code", "message", "fix"}}`, never a traceback.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field
from typing import Any

import mcp_types as types
from mcp.server import Server, ServerRequestContext

from kz_cli.contract import CliError, from_kz_error
from kz_cli.documents import object_schema
from kz_events.errors import KzError
from kz_mcp.api import Api, Identity
from kz_mcp.arguments import decode_args
from kz_mcp.resources import DOCS, JUDGE_TEMPLATE, read_resource
from kz_mcp.tools import TOOLS, Tool, ToolContext

__all__ = ["INSTRUCTIONS", "McpOptions", "build_server", "tool_list"]

log = logging.getLogger("kz.mcp")

INSTRUCTIONS = (
    "kernel zoo: a leaderboard for GPU kernels. Workflow: list_boards; board_ranking to see "
    "what to beat; start_kernel for a new kernel id on a board (its files); edit only src/; "
    "bench_files to judge it here as a runner would; submit_files (with your agent, model, "
    "tokens, cost_usd) and read its status; on rejection read the error's reason and "
    "submission_log. Do not change .kernel_package/benchmark.py or build_test_env.py. "
    "Resources: kz://docs/package-format, kz://docs/judging, kz://docs/agents and each board's "
    "judge at kz://boards/{board}/judge."
)


@dataclass(frozen=True)
class McpOptions:
    """How the server acts: its default identity (stdio, or HTTP without headers) and whether
    it judges packages on its own machine (`bench_files`)."""

    identity: Identity = field(default_factory=Identity)
    bench_enabled: bool = True
    trust_headers: bool = True


def tool_list() -> list[types.Tool]:
    """The tools as MCP lists them, with their input and output schemas."""
    return [
        types.Tool(
            name=tool.name,
            title=tool.title,
            description=tool.description,
            input_schema=object_schema(tool.arguments),
            output_schema=object_schema(tool.answer),
            annotations=types.ToolAnnotations(
                title=tool.title,
                read_only_hint=tool.read_only,
                destructive_hint=False,
                idempotent_hint=tool.read_only,
                open_world_hint=False,
            ),
        )
        for tool in TOOLS
    ]


def _result(doc: dict[str, Any], *, error: bool = False) -> types.CallToolResult:
    text = json.dumps(doc, default=str)
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=text)],
        structured_content=json.loads(text),
        is_error=error,
    )


def _error_result(error: CliError) -> types.CallToolResult:
    body: dict[str, Any] = {"code": error.code, "message": error.message, "fix": error.fix}
    if error.details:
        body["details"] = error.details
    return _result({"error": body}, error=True)


def _identity(ctx: ServerRequestContext[Any, Any], options: McpOptions) -> Identity:
    """The caller: the HTTP request's headers when it carries them, else the default."""
    request = ctx.request
    headers = getattr(request, "headers", None)
    if headers is None or not options.trust_headers:
        return options.identity
    submitter = headers.get("x-submitter-id")
    authorization = headers.get("authorization", "")
    token = authorization[7:].strip() if authorization.lower().startswith("bearer ") else None
    if submitter or token:
        return Identity(submitter, token)
    return options.identity


async def _call(tool: Tool, context: ToolContext, arguments: dict[str, Any] | None) -> Any:
    try:
        args = decode_args(tool.arguments, arguments)
        return _result(await tool.handler(context, args))
    except CliError as exc:
        return _error_result(exc)
    except KzError as exc:
        return _error_result(from_kz_error(exc))
    except Exception:  # a bug: its trace in the server's log, a structured error to the agent
        log.exception("mcp: tool %s failed", tool.name)
        return _error_result(
            CliError("internal_error", f"{tool.name} failed unexpectedly; the server log has it")
        )


def build_server(api: Api, options: McpOptions) -> Server[Any]:
    """The MCP server over `api` (the HTTP API, reached over the network or in process)."""
    tools = {tool.name: tool for tool in TOOLS}
    listed = tool_list()
    bench_lock_holder = ToolContext(api, options.identity)

    async def list_tools(
        ctx: ServerRequestContext[Any, Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        return types.ListToolsResult(tools=listed)

    async def call_tool(
        ctx: ServerRequestContext[Any, Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        tool = tools.get(params.name)
        if tool is None:
            error = CliError(
                "unknown_tool", f"no tool {params.name!r}", fix=f"use one of {', '.join(tools)}"
            )
            return _error_result(error)
        context = ToolContext(
            api,
            _identity(ctx, options),
            bench_enabled=options.bench_enabled,
            bench_lock=bench_lock_holder.bench_lock,
        )
        result: types.CallToolResult = await _call(tool, context, params.arguments)
        return result

    async def list_resources(
        ctx: ServerRequestContext[Any, Any], params: types.PaginatedRequestParams | None
    ) -> types.ListResourcesResult:
        return types.ListResourcesResult(
            resources=[
                types.Resource(
                    uri=d.uri,
                    name=d.name,
                    title=d.title,
                    description=d.description,
                    mime_type="text/markdown",
                )
                for d in DOCS
            ]
        )

    async def list_templates(
        ctx: ServerRequestContext[Any, Any], params: types.PaginatedRequestParams | None
    ) -> types.ListResourceTemplatesResult:
        template = types.ResourceTemplate(
            uri_template=JUDGE_TEMPLATE,
            name="board-judge",
            title="A board's judge",
            description="The board's benchmark.py and build_test_env.py: what every kernel of "
            "the board is judged by (workloads, inputs, reference, tolerances).",
            mime_type="text/x-python",
        )
        return types.ListResourceTemplatesResult(resource_templates=[template])

    async def read(
        ctx: ServerRequestContext[Any, Any], params: types.ReadResourceRequestParams
    ) -> types.ReadResourceResult:
        uri = str(params.uri)
        try:
            text, mime = await read_resource(api, _identity(ctx, options), uri)
        except KzError as exc:
            error = from_kz_error(exc)
            text, mime = json.dumps({"error": {"code": error.code, "message": error.message,
                                               "fix": error.fix}}), "application/json"  # fmt: skip
        contents = types.TextResourceContents(uri=uri, mime_type=mime, text=text)
        return types.ReadResourceResult(contents=[contents])

    return Server(
        "kernel-zoo",
        version="1",
        title="kernel zoo",
        instructions=INSTRUCTIONS,
        on_list_tools=list_tools,
        on_call_tool=call_tool,
        on_list_resources=list_resources,
        on_list_resource_templates=list_templates,
        on_read_resource=read,
    )
