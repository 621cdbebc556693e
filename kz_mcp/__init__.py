"""kz_mcp: the Model Context Protocol server of kernel zoo, the `kz` commands' operations as
tools an agent calls (list boards, start a kernel, bench, submit, status, log, lease) and the
docs it needs as resources, over stdio or streamable HTTP."""

from __future__ import annotations

from kz_mcp.api import Api, Identity
from kz_mcp.server import INSTRUCTIONS, McpOptions, build_server, tool_list
from kz_mcp.tools import TOOLS
from kz_mcp.transports import MCP_PATH, McpMount, http_app, serve_stdio

__all__ = [
    "INSTRUCTIONS",
    "MCP_PATH",
    "TOOLS",
    "Api",
    "Identity",
    "McpMount",
    "McpOptions",
    "build_server",
    "http_app",
    "serve_stdio",
    "tool_list",
]
