"""One decided tool call as the handlers read it, and the replies they build (M5a sections 5 and 8;
DESIGN 10.3).

`Call.of` takes brokerd's ``memory_call`` once: the request, and the session's label as memoryd reads
it (at least ``private``: every session holds the owner's private memory). A refusal is always a
``tool_response`` carrying its fixed sentence and code, never an error: the model must read it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from boxmaker.memoryd.sentences import Refusal
from boxmaker.memoryd.write.answer import Answer, Caller, Via
from boxmaker.memoryd.write.origin import OriginKind
from boxmaker.proto.labels import DataClass, Label
from boxmaker.proto.messages import MemoryCall, ToolResponse


@dataclass(frozen=True, slots=True)
class Call:
    """A `recall` or `memory` call with the session's state (brokerd's ``memory_call``)."""

    tool: str
    session: str
    call_id: str
    arguments: dict[str, Any]
    taint: DataClass
    untrusted: bool
    #: Added (issue 17): an MCP client's call (``mcp``, with whether the owner trusts the client with
    #: identity and the client and its peer, `Via`); brokerd's calls are a ``session``'s.
    kind: OriginKind = "session"
    client_trusted: bool = False
    via: Via | None = None

    @classmethod
    def of(cls, call: MemoryCall) -> Call:
        """The call of a ``memory_call`` body."""
        request = call.request
        return cls(
            request.tool, request.session, request.call_id, request.arguments, call.taint, call.untrusted
        )

    @property
    def label(self) -> Label:
        """The session's label: its class (at least private) and whether it read untrusted content."""
        return Label(max(self.taint, DataClass.PRIVATE), self.untrusted)

    @property
    def caller(self) -> Caller:
        """Who writes: the session, the call id and the label (never the owner)."""
        return Caller(
            self.session,
            self.call_id,
            self.label,
            kind=self.kind,
            client_trusted=self.client_trusted,
            via=self.via,
        )


def answer(call: Call, done: Answer) -> ToolResponse:
    """A write's answer as the reply (no label: a write shows the model nothing it had not seen)."""
    return ToolResponse(call.call_id, done.output, done.code, None)


def refuse(call: Call, refusal: Refusal) -> ToolResponse:
    """A refusal as the reply: its sentence and code."""
    return ToolResponse(call.call_id, refusal.sentence, refusal.code, None)
