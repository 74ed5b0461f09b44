"""A real MCP server for the service's MCP tools: the official Python SDK (``mcp``, its
``MCPServer``, formerly FastMCP) on the Streamable HTTP transport, which the project does
not implement. Run as a process of its own:

    python -m sessions_testkit.mcp_server --port 0 [--many-tools N]

It prints ``READY <port>`` once it listens; the endpoint is ``/mcp``. Tests start it
with ``running()``. Its tools add
numbers, check the ``Authorization`` header (and report the ``traceparent`` they were
called with), fail, hang, and answer more than a tool's result may be; with
``--many-tools N`` it offers N tools instead. ``POST /admin/forget-sessions`` ends every
session, as a server that restarts or expires its sessions does (their ids then answer
404); ``GET /admin/calls`` lists the calls it received, with their headers. ``POST
/webhook/add`` is ``add`` as a webhook tool, for comparing the two in one process.
"""

from __future__ import annotations

import argparse
import json
import socket
import subprocess
import sys
import urllib.request
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable, Dict, Iterator, List

import anyio
import uvicorn
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.transport_security import TransportSecuritySettings
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response

#: Every call, as the tool saw it: its name and the HTTP headers of its request.
CALLS: List[Dict[str, Any]] = []


def _seen(name: str, ctx: Context) -> None:
    headers = ctx.headers
    CALLS.append({"tool": name, "headers": dict(headers.items()) if headers else {}})


def build(many_tools: int) -> MCPServer:
    server = MCPServer("agent-sessions-tests", version="1.0.0", log_level="WARNING")
    if many_tools:

        def numbered(i: int) -> Callable[[int], str]:
            def tool(x: int = 0) -> str:
                return f"tool {i}: {x}"

            return tool

        for i in range(many_tools):
            server.add_tool(numbered(i), name=f"tool_{i:04d}", description=f"Tool number {i}")
        _admin_routes(server)
        return server

    @server.tool(description="Adds two numbers")
    def add(a: float, b: float, ctx: Context) -> str:
        _seen("add", ctx)
        total = a + b
        return str(int(total) if total.is_integer() else total)

    @server.tool(description="Says whether the request's Authorization header is `expected`")
    def check_auth(expected: str, ctx: Context) -> Dict[str, Any]:
        _seen("check_auth", ctx)
        headers = ctx.headers
        got = headers.get("authorization") if headers else None
        return {
            "authorized": got == expected,
            "traceparent": headers.get("traceparent") if headers else None,
        }

    @server.tool(description="Always fails")
    def fail(message: str = "it failed on purpose") -> str:
        raise ToolError(message)

    @server.tool(description="Never answers")
    async def hang() -> str:
        await anyio.sleep_forever()
        return "never"

    @server.tool(description="Answers `size` bytes of text", structured_output=False)
    def big(size: int = 2 * 1024 * 1024) -> str:
        return "x" * size

    _admin_routes(server)
    return server


def _admin_routes(server: MCPServer) -> None:
    # The SDK's route decorator is not typed.
    @server.custom_route("/admin/forget-sessions", methods=["POST"])  # type: ignore[untyped-decorator]
    async def forget_sessions(_: Request) -> Response:
        # The SDK has no public way to end sessions; these are its session manager's own
        # (mcp is pinned exactly).
        manager = server.session_manager
        ids = list(manager._server_instances)
        for session_id in ids:
            transport = manager._server_instances.get(session_id)
            if transport is not None:
                await manager._discard_session(session_id, transport)
        return JSONResponse({"forgotten": ids})

    @server.custom_route("/admin/calls", methods=["GET"])  # type: ignore[untyped-decorator]
    async def calls(_: Request) -> Response:
        return JSONResponse(CALLS)

    @server.custom_route("/webhook/add", methods=["POST"])  # type: ignore[untyped-decorator]
    async def webhook_add(request: Request) -> Response:
        arguments = json.loads((await request.json())["arguments"])
        total = float(arguments["a"]) + float(arguments["b"])
        return PlainTextResponse(str(int(total) if total.is_integer() else total))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--many-tools", type=int, default=0)
    args = parser.parse_args()
    server = build(args.many_tools)
    app = server.streamable_http_app(
        streamable_http_path="/mcp",
        # The service is the only client, on 127.0.0.1 with its own Host header.
        transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=False),
    )
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    # Inherited by every connection: an answer written in pieces (SSE) is not held back
    # until the client acknowledges the first (40 ms with delayed acknowledgements).
    listener.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    listener.bind(("127.0.0.1", args.port))
    listener.listen(128)
    print(f"READY {listener.getsockname()[1]}", flush=True)
    uvicorn.Server(uvicorn.Config(app, log_level="warning", timeout_graceful_shutdown=1)).run(
        sockets=[listener]
    )


class McpServer:
    """A running server: its endpoint, and its admin routes."""

    def __init__(self, port: int) -> None:
        self.host = f"127.0.0.1:{port}"
        self.url = f"http://{self.host}/mcp"

    def admin(self, path: str, method: str = "GET") -> Any:
        request = urllib.request.Request(f"http://{self.host}/admin/{path}", method=method)
        with urllib.request.urlopen(request, timeout=10) as answer:
            return json.loads(answer.read())


@contextmanager
def running(*args: str) -> Iterator[McpServer]:
    """The server in a process of its own on a free port, stopped on exit."""
    process = subprocess.Popen(
        [sys.executable, "-m", "sessions_testkit.mcp_server", "--port", "0", *args],
        cwd=Path(__file__).resolve().parents[1],
        stdout=subprocess.PIPE,
    )
    try:
        assert process.stdout is not None
        ready = process.stdout.readline().decode().split()
        assert ready[:1] == ["READY"], f"the MCP server did not start: {ready}"
        yield McpServer(int(ready[1]))
    finally:
        process.terminate()
        process.wait(timeout=10)


if __name__ == "__main__":
    main()
