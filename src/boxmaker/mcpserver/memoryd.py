"""boxmaker-mcp's client of memoryd's MCP socket (issue 17): one request per call, never a file.

While the socket does not answer a connect (memoryd down or restarting) the request is asked again for
up to `wait` seconds, which is safe because nothing was sent; then the call is `Unreachable`. A request
that was sent and got no answer is `Unreachable` with ``sent`` true (it may have been carried out), and
is never sent again.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

from boxmaker.proto import wire
from boxmaker.proto.errors import PeerError, ProtocolError
from boxmaker.proto.messages import (
    Body,
    McpCall,
    McpHello,
    McpHelloReply,
    MemoryBlock,
    MemoryBlockReply,
    ToolResponse,
)

#: How long one request may take once sent, in seconds (a recall on a large home, a write's fsync).
ANSWER_TIMEOUT_S = 60.0
#: How long the start waits for memoryd, in seconds (a client's start-up budget is short: Codex's is 10 s).
HELLO_WAIT_S = 1.0
#: The pause between connects while memoryd does not answer, in seconds.
RETRY_PAUSE_S = 0.1


@dataclass(frozen=True, slots=True)
class Unreachable:
    """memoryd did not answer: `why` (the connect's or the read's error); `sent` when the request had
    left (it may have been done); `code` is memoryd's error code when it answered with one."""

    why: str
    sent: bool
    code: str = "unreachable"


class MemorySocket:
    """memoryd's MCP socket.

    Args:
        socket: the socket path (``{home}/run/mcp-memory/mcp.sock`` unless configured).
        wait: seconds to keep asking while nothing answers the connect.
    """

    def __init__(self, socket: Path, wait: float) -> None:
        self.socket = socket
        self.wait = wait

    def call(self, message: McpCall) -> ToolResponse | Unreachable:
        """One tool call; its `tool_response`, or why memoryd did not answer."""
        reply = self._ask(message)
        if isinstance(reply, (Unreachable, ToolResponse)):
            return reply
        return Unreachable(f"unexpected reply {type(reply).__name__}", True, "bad-reply")

    def hello(self, client: str) -> McpHelloReply | Unreachable:
        """The owner's trust in `client` and the memory block (asked once at start, waiting at most
        `HELLO_WAIT_S` for memoryd)."""
        reply = self._ask(McpHello(client), min(self.wait, HELLO_WAIT_S))
        if isinstance(reply, (Unreachable, McpHelloReply)):
            return reply
        return Unreachable(f"unexpected reply {type(reply).__name__}", True, "bad-reply")

    def block(self) -> str | Unreachable:
        """The memory block a new session would get now."""
        reply = self._ask(MemoryBlock())
        if isinstance(reply, Unreachable):
            return reply
        if isinstance(reply, MemoryBlockReply):
            return reply.text
        return Unreachable(f"unexpected reply {type(reply).__name__}", True, "bad-reply")

    def _ask(self, body: Body, wait: float | None = None) -> Body | Unreachable:
        deadline = time.monotonic() + (self.wait if wait is None else wait)
        while True:
            try:
                return wire.call(self.socket, body, timeout=ANSWER_TIMEOUT_S)
            except ProtocolError as exc:  # a request over the frame limit (4 MiB): never sent
                return Unreachable(exc.message, False, exc.code)
            except PeerError as exc:
                if exc.code != "unreachable":
                    return Unreachable(exc.message, True, exc.code)
                if exc.sent or time.monotonic() + RETRY_PAUSE_S > deadline:
                    return Unreachable(exc.message, exc.sent)
            time.sleep(RETRY_PAUSE_S)
