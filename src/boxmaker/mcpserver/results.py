"""memoryd's answers as MCP results (issue 17).

A `tool_response` becomes a ``CallToolResult``: its ``output`` is the text the model reads (memoryd's
sentence or the recall hits, whose source tags say ``identity``, ``memory`` or ``memory-tainted`` and,
for a note an MCP client wrote, ``via mcp:<client>``); ``isError`` is true for every ``refused:<reason>``
code and for memoryd not answering (``memoryd-unreachable``), never a protocol error, so the model reads
the sentence. ``_meta`` carries what the host application can read:

- ``io.modelcontextprotocol/trust-annotations``: ``{"sensitive", "untrusted"}`` of a result that shows
  memory (the experimental extension's shape);
- ``boxmaker/label``: the result's label ``{"class", "untrusted"}``, or null for a write;
- ``boxmaker/session``: ``{"id", "client", "class", "untrusted"}``, the session's label after the call;
- ``boxmaker/result``: ``{"code"}``: ``ok``, ``noted``, ``staged``, ``refused:<reason>`` or
  ``memoryd-unreachable``.
"""

from __future__ import annotations

from typing import Any

import mcp_types as types

from boxmaker.mcpserver import sentences
from boxmaker.mcpserver.session import Session
from boxmaker.proto.labels import DataClass, Label
from boxmaker.proto.messages import ToolResponse

TRUST_ANNOTATIONS = "io.modelcontextprotocol/trust-annotations"
LABEL_KEY = "boxmaker/label"
SESSION_KEY = "boxmaker/session"
RESULT_KEY = "boxmaker/result"


def label_data(label: Label | None) -> dict[str, Any] | None:
    """A label as JSON data (None stays None)."""
    return None if label is None else {"class": label.data_class.value, "untrusted": label.untrusted}


def session_data(session: Session, label: Label | None) -> dict[str, Any]:
    """The session's label as ``_meta`` shows it (this process's bit when memoryd did not say)."""
    known = label or Label(DataClass.PRIVATE, session.untrusted)
    return {"id": session.id, "client": session.client, **(label_data(known) or {})}


def from_response(session: Session, reply: ToolResponse) -> types.CallToolResult:
    """memoryd's `tool_response` as the MCP result (module docstring)."""
    meta: dict[str, Any] = {
        LABEL_KEY: label_data(reply.label),
        SESSION_KEY: session_data(session, reply.session_label),
        RESULT_KEY: {"code": reply.code},
    }
    if reply.label is not None:
        meta[TRUST_ANNOTATIONS] = {
            "sensitive": reply.label.data_class != DataClass.PUBLIC,
            "untrusted": reply.label.untrusted,
        }
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=reply.output)],
        is_error=reply.code.startswith("refused:"),
        _meta=meta,
    )


def unreachable(session: Session, text: str, code: str = sentences.UNREACHABLE) -> types.CallToolResult:
    """memoryd did not answer (or answered with an `error`, `code`): an ``isError`` result."""
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=text)],
        is_error=True,
        _meta={
            LABEL_KEY: None,
            SESSION_KEY: session_data(session, None),
            RESULT_KEY: {"code": code},
        },
    )
