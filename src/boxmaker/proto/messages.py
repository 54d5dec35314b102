"""Message bodies between roles, validated on decode (DESIGN 3 and 10.3; M5a section 7).

A message is ``{"kind": "<kind>", "body": {...}}``. `KINDS` maps each kind to its body type; `decode`
turns a frame's payload into ``(kind, body)`` and `encode` does the reverse. Every body is checked
against its schema: an unknown kind, a missing field, an unknown field or a wrong type raises a
`ProtocolError` whose sentence names the field, never a crash and never a silent default.

JSON is read with the standard library (so a lone surrogate escape such as ``"\\ud800"`` arrives as a
``str`` the memory check can refuse by name, DESIGN 10.6 rule 1) and written with ``ensure_ascii``.
"""

from __future__ import annotations

import json
from typing import Annotated, Any, Literal, TypeAlias

import msgspec

from boxmaker.proto.errors import InvalidBody, MalformedMessage, UnknownKind
from boxmaker.proto.ids import MCP_CLIENT_PATTERN, SESSION_ID_PATTERN
from boxmaker.proto.labels import DataClass, Label

SessionIdStr: TypeAlias = Annotated[str, msgspec.Meta(pattern=SESSION_ID_PATTERN)]
CallId: TypeAlias = Annotated[str, msgspec.Meta(min_length=1, max_length=128, pattern=r"^[\x21-\x7e]+\Z")]
ToolName: TypeAlias = Annotated[str, msgspec.Meta(pattern=r"^[a-z_][a-z0-9_]{0,63}\Z")]
Count: TypeAlias = Annotated[int, msgspec.Meta(ge=0)]
McpClient: TypeAlias = Annotated[str, msgspec.Meta(pattern=MCP_CLIENT_PATTERN)]


class _Body(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """Common base: bodies are immutable and refuse unknown fields."""


#: The `memory` tool's actions in every live session's schema (M5a section 5, M5d 4.4; issue 6: the
#: protocol's forget, index, topic; issue 7: propose, seed 003 sections 17 and 23.5, and feedback, 23.2):
#: loopd's core tool and boxmaker-mcp's `memory` tool offer the same list. Maintenance actions are not
#: here: only a maintenance job's session gets them (loopd, issue 7).
MEMORY_ACTIONS = (
    "add",
    "replace",
    "remove",
    "note",
    "consolidate",
    "tiers",
    "forget",
    "index",
    "topic",
    "propose",
    "feedback",
)


class ToolRequest(_Body, frozen=True):
    """`tool_request` (loopd -> brokerd), and the `request` inside `memory_call`."""

    session: SessionIdStr
    call_id: CallId
    tool: ToolName
    arguments: dict[str, Any]


class ToolResponse(_Body, frozen=True, omit_defaults=True):
    """`tool_response`: `output` is what the model reads; `code` is `ok`, `noted`, `staged` or
    `refused:<reason>`; `label` is the result's label, or null."""

    call_id: CallId
    output: str
    code: Annotated[str, msgspec.Meta(min_length=1, max_length=64)]
    label: Label | None
    #: Added (issue 17): the answer to an `mcp_call` carries the MCP session's label after the call (it
    #: only gets stricter), so the MCP server keeps it and shows it to the host; absent elsewhere.
    session_label: Label | None = None


class MemoryCall(_Body, frozen=True):
    """`memory_call` (brokerd -> memoryd): a decided call with the session's state (M5a section 7)."""

    request: ToolRequest
    taint: DataClass
    untrusted: bool


class McpCall(_Body, frozen=True):
    """`mcp_call` (boxmaker-mcp -> memoryd's MCP socket; added by issue 17): one `recall` or `memory`
    call of an MCP client's session. `client` names the client (``[a-z0-9-]{1,24}``); `session` is its
    ``mcp-<client>-<base32>`` id and must equal ``request.session``; `untrusted` is the taint the client
    declared (it can only make the session's label stricter: memoryd decides the label from the owner's
    ``[mcp.clients.<name>] trust``, the session's recorded label and this bit)."""

    client: McpClient
    session: SessionIdStr
    untrusted: bool
    request: ToolRequest


class McpHello(_Body, frozen=True):
    """`mcp_hello` (boxmaker-mcp -> memoryd's MCP socket; added by issue 17): what a new MCP server
    process asks once, for its tool list's annotations and its instructions."""

    client: McpClient


class McpHelloReply(_Body, frozen=True):
    """`mcp_hello_reply`: the owner's trust in the client (``untrusted``, ``declared`` or ``clean``), the
    memory block a new session gets now, or "" and the sentence saying why it cannot be served."""

    trust: Annotated[str, msgspec.Meta(pattern=r"^(untrusted|declared|clean)\Z")]
    block: str = ""
    problem: str = ""


class MemoryBlock(_Body, frozen=True):
    """`memory_block` (loopd -> memoryd): asks for the rendered block (M5a section 4)."""


class MemoryBlockReply(_Body, frozen=True):
    """`memory_block_reply`: the block's text."""

    text: str


class SessionUpdated(_Body, frozen=True):
    """`session_updated` (loopd -> memoryd): the session has new records (M5a section 6)."""

    session: SessionIdStr
    turn: Count | None = None


class Ok(_Body, frozen=True):
    """`ok`: an empty acknowledgement."""


class Reindex(_Body, frozen=True):
    """`reindex` (bxctl -> memoryd): rebuild the index into a new file (M5a section 10)."""


class Reindexed(_Body, frozen=True):
    """`reindexed`: what the rebuilt index holds."""

    logs: Count
    records: Count
    notes: Count


class MemoryAdmin(_Body, frozen=True):
    """`memory_admin` (bxctl -> memoryd): an owner command with its argument(s) (DESIGN 10.3)."""

    command: Annotated[str, msgspec.Meta(pattern=r"^[a-z][a-z-]{0,31}\Z")]
    arg: str = ""
    args: dict[str, Any] = msgspec.field(default_factory=dict)


class MemoryAdminReply(_Body, frozen=True):
    """`memory_admin_reply`: `text` is what bxctl prints, `data` what `--json` prints."""

    text: str
    data: Any = None


class ImportedConversation(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """One conversation of a `memory_import`: the source's own id for it, its title (shown to the owner,
    never stored), and its records in the session-log schema (`proto.records`; memoryd checks each)."""

    conversation: Annotated[str, msgspec.Meta(min_length=1, max_length=512)]
    records: list[dict[str, Any]]
    title: str = ""


class ImportedEntry(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """One memory-like entry of a `memory_import`: the identity file it was meant for, its text, and
    where it was found (``memories/MEMORY.md entry 3``), for the answer."""

    file: Literal["memory", "user"]
    text: str
    place: str = ""


class MemoryImport(_Body, frozen=True):
    """`memory_import` (bxctl -> memoryd, added by issue 17): what `bxctl import` read from another
    product's export, already parsed. memoryd writes the conversations' archives under
    ``imports/<source>/`` and turns each entry into an untrusted note and a pending identity change;
    `accept` then applies the clean ones as the owner's edits; `dry_run` changes nothing. `origin` is the
    path the owner named (journalled). Answered by `memory_admin_reply`."""

    source: Literal["hermes", "chatgpt", "claude", "claude-code", "gemini"]
    origin: Annotated[str, msgspec.Meta(max_length=4096)]
    conversations: list[ImportedConversation] = msgspec.field(default_factory=list)
    entries: list[ImportedEntry] = msgspec.field(default_factory=list)
    dry_run: bool = False
    accept: bool = False


class ToolRun(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """One tool call a turn made, as `chat_reply` reports it to the owner."""

    name: str
    code: str
    label: Label | None


class Chat(_Body, frozen=True):
    """`chat` (bxctl -> loopd's owner socket): one owner message; `session` null starts a new session,
    an unknown id starts that session, a known one goes on with it (DESIGN 10.5)."""

    text: Annotated[str, msgspec.Meta(min_length=1, max_length=100_000)]
    session: SessionIdStr | None = None
    stream: bool = False  # added (issue 18): send `chat_delta` frames before the reply


class ChatDelta(_Body, frozen=True):
    """`chat_delta` (loopd -> bxctl, added by issue 18): a piece of the reply's text as the model writes
    it, sent before the `chat_reply` on the connection of a `chat` that asked for ``"stream": true``."""

    text: str


class ChatReply(_Body, frozen=True):
    """`chat_reply`: the assistant's reply to the owner, the session and turn it belongs to, the tools
    the turn ran, and whether the session has read untrusted content."""

    session: SessionIdStr
    turn: Count
    reply: str
    tools: list[ToolRun]
    untrusted: bool
    cut: bool = False  # added: the reply stopped at its length limit (finish_reason "length")
    epoch: Count = 0  # added: the session's epoch after the turn (M5d)
    compacted: bool = False  # added: the session moved to a new epoch since the previous reply
    warning: str = ""  # added: something the owner should know, e.g. a compaction that failed


class Status(_Body, frozen=True):
    """`status` (bxctl -> a role's owner socket): is the role up, and how is it."""


class StatusReply(_Body, frozen=True):
    """`status_reply`: the role's name, its pid, a one-line summary and details for ``--json``."""

    role: str
    pid: Count
    detail: str
    data: Any = None


class BrokerAdmin(_Body, frozen=True):
    """`broker_admin` (bxctl -> brokerd's owner socket): ``approvals``, ``approve``, ``deny``, ``grants``,
    ``sessions``; the same shape as `memory_admin` (DESIGN 10.3)."""

    command: Annotated[str, msgspec.Meta(pattern=r"^[a-z][a-z-]{0,31}\Z")]
    arg: str = ""
    args: dict[str, Any] = msgspec.field(default_factory=dict)


class BrokerAdminReply(_Body, frozen=True):
    """`broker_admin_reply`: `text` is what bxctl prints, `data` what `--json` prints."""

    text: str
    data: Any = None


class LoopAdmin(_Body, frozen=True):
    """`loop_admin` (bxctl -> loopd's owner socket): ``jobs``; the same shape as `memory_admin`."""

    command: Annotated[str, msgspec.Meta(pattern=r"^[a-z][a-z-]{0,31}\Z")]
    arg: str = ""
    args: dict[str, Any] = msgspec.field(default_factory=dict)


class LoopAdminReply(_Body, frozen=True):
    """`loop_admin_reply`: `text` is what bxctl prints, `data` what `--json` prints."""

    text: str
    data: Any = None


class Error(_Body, frozen=True):
    """`error`: a transport or validation failure (DESIGN 3)."""

    code: str
    message: str
    runbook: str = ""


Body: TypeAlias = (
    ToolRequest
    | ToolResponse
    | MemoryCall
    | McpCall
    | McpHello
    | McpHelloReply
    | MemoryBlock
    | MemoryBlockReply
    | SessionUpdated
    | Ok
    | Reindex
    | Reindexed
    | MemoryAdmin
    | MemoryAdminReply
    | MemoryImport
    | Chat
    | ChatDelta
    | ChatReply
    | Status
    | StatusReply
    | BrokerAdmin
    | BrokerAdminReply
    | LoopAdmin
    | LoopAdminReply
    | Error
)

KINDS: dict[str, type[Body]] = {
    "tool_request": ToolRequest,
    "tool_response": ToolResponse,
    "memory_call": MemoryCall,
    "mcp_call": McpCall,
    "mcp_hello": McpHello,
    "mcp_hello_reply": McpHelloReply,
    "memory_block": MemoryBlock,
    "memory_block_reply": MemoryBlockReply,
    "session_updated": SessionUpdated,
    "ok": Ok,
    "reindex": Reindex,
    "reindexed": Reindexed,
    "memory_admin": MemoryAdmin,
    "memory_admin_reply": MemoryAdminReply,
    "memory_import": MemoryImport,
    "chat": Chat,
    "chat_delta": ChatDelta,
    "chat_reply": ChatReply,
    "status": Status,
    "status_reply": StatusReply,
    "broker_admin": BrokerAdmin,
    "broker_admin_reply": BrokerAdminReply,
    "loop_admin": LoopAdmin,
    "loop_admin_reply": LoopAdminReply,
    "error": Error,
}

_KIND_OF: dict[type[Body], str] = {body: kind for kind, body in KINDS.items()}

#: Kinds a role may send before its reply on the same connection (`wire.call`'s `on_interim`).
INTERIM_KINDS = frozenset({"chat_delta"})


def kind_of(body: Body) -> str:
    """The message kind of a body instance."""
    return _KIND_OF[type(body)]


def _no_constants(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def parse_json(payload: bytes) -> Any:
    """Parse UTF-8 JSON strictly (no NaN or Infinity), keeping lone surrogate escapes as they are.

    Raises:
        MalformedMessage: when `payload` is not UTF-8 or not JSON.
    """
    try:
        text = payload.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise MalformedMessage(f"not UTF-8 at byte {exc.start}") from None
    try:
        return json.loads(text, parse_constant=_no_constants)
    except (ValueError, RecursionError) as exc:
        raise MalformedMessage(f"not JSON ({exc})") from None


def decode(payload: bytes, accept: frozenset[str] | None = None) -> tuple[str, Body]:
    """Decode a frame's payload into ``(kind, body)``.

    Args:
        payload: the frame's bytes (UTF-8 JSON).
        accept: the kinds this receiver takes; None means every kind in `KINDS`.

    Raises:
        MalformedMessage: not JSON, or not an object with exactly "kind" (string) and "body" (object).
        UnknownKind: a kind outside `accept` (or `KINDS`).
        InvalidBody: the body does not fit the kind's schema; the sentence names the field.
    """
    value = parse_json(payload)
    if not isinstance(value, dict):
        raise MalformedMessage("expected a JSON object with 'kind' and 'body'")
    extra = sorted(set(value) - {"kind", "body"})
    if extra:
        raise MalformedMessage(f"unexpected field {extra[0]!r} beside 'kind' and 'body'")
    kind = value.get("kind")
    if not isinstance(kind, str):
        raise MalformedMessage("'kind' must be a string")
    if kind not in KINDS or (accept is not None and kind not in accept):
        raise UnknownKind(kind)
    body = value.get("body")
    if not isinstance(body, dict):
        raise InvalidBody(kind, "'body' must be a JSON object")
    return kind, convert_body(kind, body)


def convert_body(kind: str, body: dict[str, Any]) -> Body:
    """Validate a decoded JSON object as the body of `kind`.

    Raises:
        UnknownKind: when `kind` is not in `KINDS`.
        InvalidBody: when the object does not fit; the sentence names the field (``$.session``).
    """
    body_type = KINDS.get(kind)
    if body_type is None:
        raise UnknownKind(kind)
    try:
        return msgspec.convert(body, body_type, strict=True)
    except msgspec.ValidationError as exc:
        raise InvalidBody(kind, str(exc)) from None


def encode(body: Body) -> bytes:
    """The JSON payload ``{"kind", "body"}`` for `body`, ASCII-only (lone surrogates escaped)."""
    message = {"kind": kind_of(body), "body": msgspec.to_builtins(body)}
    return json.dumps(message, ensure_ascii=True, separators=(",", ":")).encode("ascii")
