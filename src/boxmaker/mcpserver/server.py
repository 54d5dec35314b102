"""boxmaker-mcp's MCP server on the official SDK's low-level `Server` (issue 17).

Served over stdio; the SDK answers both protocol eras on one connection (the ``initialize`` handshake
of 2025-11-25 and earlier, and the per-request envelope of 2026-07-28 with ``server/discover``). The
handlers:

- ``tools/list``: `tools.tools`, the same two tools in the same order for the whole process (whether
  `memory` is destructive depends on the owner's trust in the client, asked once at start).
- ``tools/call``: the client's declarations taken out (`session.Session.declared`), one ``mcp_call`` to
  memoryd (on a worker thread), its answer as the result (`results`). An unknown tool is a protocol
  error (-32602); everything memoryd refuses, and memoryd not answering, is an ``isError`` result.
- ``resources/list`` and ``resources/read``: ``boxmaker://memory/block``, the memory block a new
  session would get now (read from memoryd on each read).
- the server's ``instructions``: `sentences.GUIDANCE` and the memory block as memoryd served it at
  start (a write reaches the block of the next session, as in native sessions).
"""

from __future__ import annotations

import logging
from importlib.metadata import version
from typing import Any

import anyio
import mcp_types as types
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server
from mcp.shared.exceptions import MCPError

from boxmaker.mcpserver import results, sentences, tools
from boxmaker.mcpserver.memoryd import MemorySocket, Unreachable
from boxmaker.mcpserver.session import Session
from boxmaker.proto.messages import McpCall, ToolRequest

log = logging.getLogger("boxmaker.mcp")

BLOCK_URI = "boxmaker://memory/block"


class Shim:
    """One boxmaker-mcp process: its session, memoryd's socket, and what it learnt at start.

    Args:
        session: the session (client, id, taint bit).
        memoryd: memoryd's MCP socket.
    """

    def __init__(self, session: Session, memoryd: MemorySocket) -> None:
        self.session = session
        self.memoryd = memoryd
        self.clean = False
        self.instructions = sentences.GUIDANCE

    def start(self) -> None:
        """Ask memoryd once for the owner's trust in the client and the memory block; when it does not
        answer, the process still serves (its calls answer ``memoryd-unreachable`` until it does)."""
        hello = self.memoryd.hello(self.session.client)
        if isinstance(hello, Unreachable):
            log.warning("memoryd does not answer at %s (%s)", self.memoryd.socket, hello.why)
            problem = sentences.unreachable(str(self.memoryd.socket), hello.why)
            self.instructions = f"{sentences.GUIDANCE}\n\n{sentences.block_unavailable(problem)}"
            return
        self.clean = hello.trust == "clean"
        block = hello.block or sentences.block_unavailable(hello.problem)
        self.instructions = f"{sentences.GUIDANCE}\n\n{block}"

    def server(self) -> Server[Any]:
        """The SDK server with this shim's handlers."""
        return Server(
            "boxmaker",
            version=version("boxmaker"),
            title="boxmaker memory",
            instructions=self.instructions,
            on_list_tools=self.list_tools,
            on_call_tool=self.call_tool,
            on_list_resources=self.list_resources,
            on_read_resource=self.read_resource,
        )

    async def list_tools(
        self, _ctx: ServerRequestContext[Any], _params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        """The two tools (`tools.tools`)."""
        listed = [types.Tool.model_validate(tool) for tool in tools.tools(self.clean)]
        return types.ListToolsResult(tools=listed)

    async def call_tool(
        self, ctx: ServerRequestContext[Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        """One call (module docstring)."""
        if params.name not in tools.TOOL_NAMES:
            raise MCPError(
                types.INVALID_PARAMS, f"boxmaker has no tool {params.name[:64]!r}; it has recall and memory"
            )
        session = self.session
        arguments = session.declared(dict(params.arguments or {}), ctx.meta or params.meta)
        message = McpCall(
            client=session.client,
            session=session.id,
            untrusted=session.untrusted,
            request=ToolRequest(session.id, session.next_call_id(), params.name, arguments),
        )
        reply = await anyio.to_thread.run_sync(self.memoryd.call, message)
        if isinstance(reply, Unreachable):
            path = str(self.memoryd.socket)
            if reply.code != "unreachable":
                text = sentences.refused_by_memoryd(reply.code, reply.why)
                return results.unreachable(session, text, reply.code)
            text = sentences.lost(path, reply.why) if reply.sent else sentences.unreachable(path, reply.why)
            log.warning("%s", text)
            return results.unreachable(session, text)
        if reply.session_label is not None:
            session.raise_taint(reply.session_label.untrusted)
        return results.from_response(session, reply)

    async def list_resources(
        self, _ctx: ServerRequestContext[Any], _params: types.PaginatedRequestParams | None
    ) -> types.ListResourcesResult:
        """The memory block resource."""
        block = types.Resource(
            uri=BLOCK_URI,
            name="memory-block",
            title="boxmaker memory block",
            description="soul.md, memory.md and user.md as a new session gets them",
            mime_type="text/markdown",
            annotations=types.Annotations(audience=["assistant"], priority=1.0),
        )
        return types.ListResourcesResult(resources=[block])

    async def read_resource(
        self, _ctx: ServerRequestContext[Any], params: types.ReadResourceRequestParams
    ) -> types.ReadResourceResult:
        """The memory block, read from memoryd now."""
        if str(params.uri) != BLOCK_URI:
            raise MCPError(
                types.INVALID_PARAMS, f"no resource {str(params.uri)[:200]!r}; boxmaker has {BLOCK_URI}"
            )
        text = await anyio.to_thread.run_sync(self.memoryd.block)
        if isinstance(text, Unreachable):
            raise MCPError(types.INTERNAL_ERROR, sentences.unreachable(str(self.memoryd.socket), text.why))
        contents = types.TextResourceContents(uri=BLOCK_URI, mime_type="text/markdown", text=text)
        return types.ReadResourceResult(contents=[contents])


async def serve(shim: Shim) -> None:
    """Serve MCP on stdin and stdout until the client closes stdin."""
    server = shim.server()
    async with stdio_server() as (read_stream, write_stream):
        await server.run(read_stream, write_stream, server.create_initialization_options())
