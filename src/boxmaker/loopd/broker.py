"""loopd's side of brokerd: every tool call goes there as a `tool_request` (DESIGN 1 and 10.3).

`Broker` is the interface the loop uses; `BrokerdClient` speaks to brokerd's loop socket. When brokerd
cannot be reached, the call does not run and the model reads a sentence saying so (runbook
brokerd-unreachable); the turn goes on.
"""

from __future__ import annotations

from pathlib import Path
from typing import Protocol

from boxmaker.loopd.codes import Code
from boxmaker.proto import wire
from boxmaker.proto.errors import PeerError
from boxmaker.proto.labels import DataClass, Label
from boxmaker.proto.messages import ToolRequest, ToolResponse

#: The label of an answer no tool produced (a refusal written by loopd itself).
NO_DATA = Label(DataClass.PUBLIC, False)


class Broker(Protocol):
    """Decides and runs tool calls."""

    def call(self, request: ToolRequest) -> ToolResponse:
        """The tool's answer, or a refusal as a `tool_response`; never raises."""
        ...


class BrokerdClient:
    """brokerd over its loop socket.

    Args:
        socket: brokerd's loop socket (``run/loop-broker/broker.sock`` by default).
        timeout: seconds one call may take; an `ask` grant waits for the owner, so this is long.
    """

    def __init__(self, socket: Path, timeout: float = 900.0) -> None:
        self.socket = socket
        self.timeout = timeout

    def call(self, request: ToolRequest) -> ToolResponse:
        """Send the call; an unreachable or failing brokerd becomes a `refused:` answer."""
        try:
            reply = wire.call(self.socket, request, timeout=self.timeout)
        except PeerError as exc:
            code = Code.BROKERD_UNREACHABLE if exc.code == "unreachable" else f"refused:{exc.code}"
            runbook = exc.runbook or "brokerd-unreachable"
            return ToolResponse(
                call_id=request.call_id,
                output=f"the tool did not run: brokerd failed ({exc.message}) (runbook: {runbook})",
                code=code[:64],
                label=NO_DATA,
            )
        if not isinstance(reply, ToolResponse):
            return ToolResponse(
                call_id=request.call_id,
                output=f"the tool did not run: brokerd answered {type(reply).__name__}",
                code=Code.BAD_REPLY,
                label=NO_DATA,
            )
        return reply
