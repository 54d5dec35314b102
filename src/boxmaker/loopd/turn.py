"""One turn's parts (M5a section 9, M5d section 3; DESIGN 10.5): a request to the model, a tool call
through brokerd, the records they log; and what the turn ends with: its result, the errors that stop
it, the sentences the owner reads. `boxmaker.loopd.loop` runs them in order.
"""

from __future__ import annotations

import datetime as dt
import logging
import re
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from boxmaker.loopd.broker import NO_DATA, Broker
from boxmaker.loopd.codes import Code
from boxmaker.loopd.model import Completion, ContextFull, ModelError, ModelUnreachable, RequestCancelled
from boxmaker.loopd.session import Session, SessionError
from boxmaker.loopd.tools import route
from boxmaker.proto.errors import BoxmakerError
from boxmaker.proto.labels import Label
from boxmaker.proto.messages import ToolRequest, ToolRun
from boxmaker.proto.records import Assistant, ToolCall, ToolResult, TurnEnd, Usage, format_time

log = logging.getLogger("boxmaker.loopd")

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
        *,
        on_text: Callable[[str], None] | None = None,
        cancel: threading.Event | None = None,
    ) -> Completion:
        """One chat completion; see `ModelClient.complete` (`on_text` streams, `cancel` abandons)."""
        ...


class TurnFailed(BoxmakerError):
    """Raised when a turn cannot be answered; `code` and `runbook` say why (DESIGN 10.5).

    Codes: ``session_full`` (the context is full), ``memory-unavailable`` (a new session without its
    memory block), ``model-unreachable``, ``model-error``, ``session-damaged``, ``invalid-session``,
    ``invalid-text`` (a message holding a lone surrogate), ``cancelled`` (`TurnCancelled`).
    `tools` are the calls the turn ran before it stopped (they are kept).
    """

    def __init__(self, code: str, message: str, runbook: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.runbook = runbook
        self.tools: list[ToolRun] = []


class TurnCancelled(TurnFailed):
    """Raised when the owner cancelled the turn (bxctl closed its connection, or ``loop_admin cancel``);
    code ``cancelled``. What the turn did before is kept."""

    def __init__(self, session: str) -> None:
        super().__init__("cancelled", CANCELLED.format(session=session), "")


#: What the owner reads when a turn was cancelled.
CANCELLED = "the turn in session {session} was cancelled; what it had already done is kept"


@dataclass(slots=True)
class Control:
    """How the owner follows and stops a turn.

    Attributes:
        on_text: receives each piece of a reply's text as the model streams it (None: not streamed).
        cancel: set to cancel the turn: the model request is abandoned, no further tool call starts,
            and the turn is closed (`close_turn`).
        doing: what the turn waits for now, in words ("the model", "the tool memory"), for the owner.
        started: `time.monotonic()` when the turn began.
    """

    on_text: Callable[[str], None] | None = None
    cancel: threading.Event = field(default_factory=threading.Event)
    doing: str = "its start"
    started: float = 0.0

    def check(self, session: str) -> None:
        """Raise TurnCancelled when the turn was cancelled."""
        if self.cancel.is_set():
            raise TurnCancelled(session)


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
    logged: bool = False  # the owner's message is in the log (a failure from here on closes the turn)


def cap_sentence(cap: int) -> str:
    """The reply that ends a turn which reached its tool-call limit."""
    return (
        f"I stopped: this turn reached its limit of {cap:,} tool calls before I had an answer. "
        "Tell me to go on, or narrow the request."
    )


def not_run_sentence(cap: int) -> str:
    """The tool result of a call past the limit (the call did not run)."""
    return f"not run: this turn reached its limit of {cap:,} tool calls"


def unanswered_sentence(cancelled: bool) -> str:
    """The tool result of a call that was still unanswered when its turn was cancelled or failed."""
    return f"not run: this turn {'was cancelled' if cancelled else 'failed'} before the call ran"


def closing_sentence(code: str) -> str:
    """loopd's assistant reply that closes a turn which was cancelled (`code` ``cancelled``) or failed."""
    if code == "cancelled":
        return "I stopped: the owner cancelled this turn. What I had already done is kept."
    return f"I stopped: this turn failed ({code}) before I had an answer. What I had already done is kept."


def close_turn(session: Session, code: str, now: Callable[[], dt.datetime]) -> bool:
    """Close a turn that was cancelled or failed after its owner's message was logged, so the session's
    next request is valid and strictly extends the last one (docs/session-log.md, "A turn that did not
    finish"): a `tool_result` with `unanswered_sentence` for each call of the last assistant record
    left without one (labelled like a result loopd wrote itself), an `assistant` record with
    `closing_sentence`, and `turn_end`.

    Returns:
        True when the turn is closed; False when its log cannot be written (logged, and left as is: the
        turn then still ends in its tool calls, and memoryd is not told of it).
    """
    cancelled = code == "cancelled"
    answered = {r.tool_call_id for r in session.records if isinstance(r, ToolResult)}
    calls = next((r.tool_calls for r in reversed(session.records) if isinstance(r, Assistant)), [])
    open_calls = [call for call in calls if call.id not in answered]
    try:
        for call in open_calls:
            log_result(session, call, call.name, unanswered_sentence(cancelled), NO_DATA, now=now)
        session.append(Assistant(time=format_time(now()), content=closing_sentence(code)))
        ended = TurnEnd(
            time=format_time(now()), reason="cancelled" if cancelled else "failed", code=code[:64]
        )
        session.append(ended)
    except (OSError, SessionError) as exc:
        log.error("session %s: could not close its unfinished turn (%s)", session.id, exc)
        return False
    return True


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
    model: Model,
    session: Session,
    messages: list[dict[str, Any]],
    max_tokens: int | None,
    control: Control | None = None,
) -> Completion:
    """One request of the turn, for at most `max_tokens` of reply (or what fits, when the server
    counts the reply's budget in its context), streamed and cancellable through `control`.

    Raises:
        ContextFull: the request does not fit (the caller compacts or gives up).
        TurnCancelled: `control.cancel` was set.
        TurnFailed: the model server is unreachable or failed.
    """
    extra: dict[str, Any] = {}
    if control is not None:
        control.check(session.id)
        control.doing = "the model"
        extra = {"on_text": control.on_text, "cancel": control.cancel}
    tools = session.baseline.tools
    try:
        try:
            return model.complete(messages, tools, session.slot, max_tokens, **extra)
        except ContextFull as exc:
            room = _room_for_reply(exc, max_tokens)
            if room is None:
                raise
            # a server that counts the reply's budget too (OpenAI-style): ask for what fits
            return model.complete(messages, tools, session.slot, room, **extra)
    except ContextFull:
        raise
    except RequestCancelled:
        raise TurnCancelled(session.id) from None
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
