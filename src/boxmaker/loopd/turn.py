"""One turn's parts (M5a section 9, M5d section 3; DESIGN 10.5): a request to the model, a tool call
through brokerd, the records they log; and what the turn ends with: its result, the errors that stop
it, the sentences the owner reads. `boxmaker.loopd.loop` runs them in order.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from boxmaker.loopd.broker import NO_DATA, Broker
from boxmaker.loopd.codes import Code
from boxmaker.loopd.model import Completion, ContextFull, ModelError, ModelUnreachable
from boxmaker.loopd.session import Session
from boxmaker.loopd.tools import route
from boxmaker.proto.errors import BoxmakerError
from boxmaker.proto.labels import Label
from boxmaker.proto.messages import ToolRequest, ToolRun
from boxmaker.proto.records import Assistant, ToolCall, ToolResult, Usage, format_time

_CALL_ID = re.compile(r"^[\x21-\x7e]{1,128}\Z")
#: A lone surrogate: refused in the owner's text, replaced in a tool's output (the model server takes
#: only valid UTF-8).
SURROGATE = re.compile("[\ud800-\udfff]")


class Model(Protocol):
    """What the loop needs of a model server (`boxmaker.loopd.model.ModelClient`)."""

    def complete(
        self,
        messages: list[dict[str, Any]],
        tools: list[dict[str, Any]] | None,
        slot: int | None,
        max_tokens: int | None = None,
    ) -> Completion:
        """One chat completion; see `ModelClient.complete`."""
        ...


class TurnFailed(BoxmakerError):
    """Raised when a turn cannot be answered; `code` and `runbook` say why (DESIGN 10.5).

    Codes: ``session_full`` (the context is full), ``memory-unavailable`` (a new session without its
    memory block), ``model-unreachable``, ``model-error``, ``session-damaged``, ``invalid-session``,
    ``invalid-text`` (a message holding a lone surrogate).
    """

    def __init__(self, code: str, message: str, runbook: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.runbook = runbook


class CompactFailed(BoxmakerError):
    """Raised when a compaction cannot finish; the session stays on its old epoch (runbook
    session-compact-failed)."""

    def __init__(self, session: str, why: str) -> None:
        super().__init__(f"session {session} could not be compacted: {why}")
        self.why = why


@dataclass(slots=True)
class TurnResult:
    """What a finished turn gives the owner."""

    session: str
    turn: int
    reply: str
    tools: list[ToolRun] = field(default_factory=list)
    untrusted: bool = False
    cut: bool = False
    epoch: int = 0
    compacted: bool = False
    warning: str = ""


def cap_sentence(cap: int) -> str:
    """The reply that ends a turn which reached its tool-call limit."""
    return (
        f"I stopped: this turn reached its limit of {cap:,} tool calls before I had an answer. "
        "Tell me to go on, or narrow the request."
    )


def not_run_sentence(cap: int) -> str:
    """The tool result of a call past the limit (the call did not run)."""
    return f"not run: this turn reached its limit of {cap:,} tool calls"


def full_sentence(session: Session, exc: ContextFull) -> str:
    """What the owner reads when a request does not fit: a full session, or a message (or a start)
    that could never fit."""
    size = f" ({exc.n_prompt:,} tokens of {exc.n_ctx:,})" if exc.n_prompt and exc.n_ctx else ""
    if session.turns == 0:
        return (
            f"the first message of session {session.id} does not fit the model's context{size}: send a "
            "shorter message, or give the model server a larger context per slot (the session's start, "
            "system.md with the memory block and the tool schemas, must fit with room to spare)"
        )
    return (
        f"session {session.id} is full: the next request does not fit the model's context{size}; "
        "start a new session, or send a shorter message if this one is long"
    )


def _room_for_reply(exc: ContextFull, max_tokens: int | None) -> int | None:
    """The reply budget that fits when the prompt alone fits but prompt + `max_tokens` does not."""
    if max_tokens is None or exc.n_prompt is None or exc.n_ctx is None:
        return None
    room = exc.n_ctx - exc.n_prompt
    return room if 0 < room < max_tokens else None


def log_reply(session: Session, completion: Completion, now: Callable[[], dt.datetime]) -> None:
    """Append the model's reply and its token counts."""
    session.append(
        Assistant(
            time=format_time(now()),
            content=completion.content,
            reasoning_content=completion.reasoning,
            tool_calls=completion.tool_calls,
        )
    )
    session.append(
        Usage(
            time=format_time(now()),
            prompt_n=completion.prompt_n,
            cache_n=completion.cache_n,
            predicted_n=completion.predicted_n,
        )
    )


def complete(
    model: Model, session: Session, messages: list[dict[str, Any]], max_tokens: int | None
) -> Completion:
    """One request of the turn, for at most `max_tokens` of reply (or what fits, when the server
    counts the reply's budget in its context).

    Raises:
        ContextFull: the request does not fit (the caller compacts or gives up).
        TurnFailed: the model server is unreachable or failed.
    """
    try:
        try:
            return model.complete(messages, session.baseline.tools, session.slot, max_tokens)
        except ContextFull as exc:
            room = _room_for_reply(exc, max_tokens)
            if room is None:
                raise
            # a server that counts the reply's budget too (OpenAI-style): ask for what fits
            return model.complete(messages, session.baseline.tools, session.slot, room)
    except ContextFull:
        raise
    except ModelUnreachable as exc:
        raise TurnFailed("model-unreachable", str(exc), "model-unreachable") from None
    except ModelError as exc:
        raise TurnFailed("model-error", str(exc), "model-error") from None


def call_tool(broker: Broker, session: Session, call: ToolCall, now: Callable[[], dt.datetime]) -> ToolRun:
    """Send one of the model's calls to brokerd (a call that does not route is refused here) and log
    its result."""
    routed = route(call.name, call.arguments)
    if routed.problem is not None:
        log_result(session, call, routed.tool, routed.problem, NO_DATA, now=now)
        return ToolRun(name=routed.tool, code=Code.INVALID_ARGUMENTS, label=NO_DATA)
    call_id = call.id if _CALL_ID.match(call.id) else f"call-{len(session.records)}"
    request = ToolRequest(session=session.id, call_id=call_id, tool=routed.tool, arguments=routed.arguments)
    response = broker.call(request)
    label = response.label or NO_DATA
    output = SURROGATE.sub("\ufffd", response.output)  # the model server takes only valid UTF-8
    log_result(session, call, routed.tool, output, label, now=now)
    return ToolRun(name=routed.tool, code=response.code, label=label)


def log_result(
    session: Session, call: ToolCall, tool: str, content: str, label: Label, *, now: Callable[[], dt.datetime]
) -> None:
    """Append a call's result as the model will read it, with its label."""
    session.append(
        ToolResult(
            time=format_time(now()),
            call=tool,
            tool_call_id=call.id,
            content=content,
            data_class=label.data_class,
            untrusted=label.untrusted,
        )
    )
