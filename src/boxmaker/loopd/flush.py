"""The memory flush before compaction (issue 19): one turn in which the model saves what it should keep
before its context is summarised.

When a session's last request left its slot at ``[compact] threshold - flush_margin`` of ``n_ctx`` or
more (`trigger.flush_due`) and its epoch has had no flush yet, loopd runs one turn on the session's own
slot, with the session's own tools and id (so brokerd and memoryd apply the session's own label: a
tainted or above-private session's memory writes become notes, never identity), while it holds the
session busy as for compaction (`Loop`). Its user text is ``flush.md`` (``[compact] flush_prompt``).
It runs only `FLUSH_TOOLS` (memory, recall, clock, find_tool); another tool's call is answered as not
run (`outside_sentence`), so the flush neither waits on an approval nor reads new outside content.

The turn is logged in the epoch it runs in, like any other (a `user` record with speaker ``loopd`` once
the model has answered, then ``assistant``, ``usage`` and ``tool_result`` records), so the epoch's next
request strictly extends it and what it wrote to memory is in the next epoch's baseline. A ``flush``
record ends it: ``done``, or ``failed`` with why (the time ``[compact] flush_timeout_s`` ran out, the
model failed, no room was left). A failed flush is closed like a failed turn (`turn.close_turn`), said
once (loopd's log and that record), and the session is compacted without it, when it is due, as before.

It gets what fits in the part of the context the session has not used yet: a tool-call cap and a reply
budget at its start (`budget`), and before each further request the reply budget that is left
(`reply_room`, from the slot's depth the last reply reported and the tool results since); when too little
is left for another reply, the flush stops there (`room_sentence`).
"""

from __future__ import annotations

import datetime as dt
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from boxmaker.loopd.broker import NO_DATA, Broker
from boxmaker.loopd.model import ContextFull
from boxmaker.loopd.session import Session, SessionError
from boxmaker.loopd.tools import route
from boxmaker.loopd.turn import (
    Control,
    Model,
    TurnCancelled,
    TurnFailed,
    call_tool,
    close_turn,
    complete,
    log_reply,
    log_result,
    not_run_sentence,
)
from boxmaker.proto.records import LOOPD_SPEAKER, Assistant, Flush, User, format_time

log = logging.getLogger("boxmaker.loopd")

#: The `speaker` of the flush turn's `user` record: its text is loopd's, not the owner's (not indexed).
FLUSH_SPEAKER = LOOPD_SPEAKER
#: The tools a flush turn runs: memory and what helps to use it. A call of another tool (through
#: `call_tool`) is answered as not run: it could wait for the owner's approval past the flush's time,
#: or read new untrusted content into the session just before it is summarised.
FLUSH_TOOLS = frozenset({"memory", "recall", "clock", "find_tool"})
#: The longest reply of one flush request when `[limits] max_tokens` is not set, in tokens.
REPLY_TOKENS = 2048
#: The fewest reply tokens worth a request of the flush; with less room left, it is not run or stops.
MIN_REPLY_TOKENS = 64
#: Room kept for each tool call and its result in the flush's cap, in tokens (a memory write is short).
RESULT_TOKENS = 128
#: Characters per token assumed when the flush prompt's size is estimated (few, to be safe).
CHARS_PER_TOKEN = 3
#: Tokens a chat template adds around one message, at most (assumed).
MESSAGE_TOKENS = 16
#: The longest `why` of a ``flush`` record, in characters.
WHY_CHARS = 500


@dataclass(frozen=True, slots=True)
class Budget:
    """What one flush turn may spend: its first request's reply budget in tokens (a later request's is at
    most that, `reply_room`), and its tool calls."""

    max_tokens: int
    calls: int


def reply_room(n_ctx: int, depth: int, pending_chars: int, max_tokens: int | None) -> int:
    """The reply budget of the flush's next request, in tokens: half of what is left of the context
    (`n_ctx` - `depth`, the slot's depth after the last request, - the text sent since, `pending_chars`,
    estimated at `CHARS_PER_TOKEN` characters a token), so that tool results and a last reply still fit
    after it; at most `max_tokens` (``[limits] max_tokens``, `REPLY_TOKENS` when unset). May be 0 or less:
    no room."""
    left = n_ctx - depth - (pending_chars // CHARS_PER_TOKEN + MESSAGE_TOKENS)
    return min(max_tokens or REPLY_TOKENS, left // 2)


def budget(depth: int, n_ctx: int, prompt: str, max_tokens: int | None, cap: int) -> Budget | None:
    """The flush's budget at its start: its first request's reply budget (`reply_room` with the prompt
    as the text sent), and its tool-call cap: as many calls as fit in the rest at `RESULT_TOKENS` each
    with a reply of `MIN_REPLY_TOKENS` after them, at most `cap` (``[limits] tool_calls_per_turn``).

    Returns:
        None when there is no room for a first reply of `MIN_REPLY_TOKENS` and one call (not run).
    """
    reply = reply_room(n_ctx, depth, len(prompt), max_tokens)
    if reply < MIN_REPLY_TOKENS:
        return None
    left = n_ctx - depth - (len(prompt) // CHARS_PER_TOKEN + MESSAGE_TOKENS)
    calls = min(cap, (left - reply - MIN_REPLY_TOKENS) // RESULT_TOKENS)
    return Budget(reply, calls) if calls >= 1 else None


def flushed(session: Session) -> bool:
    """True when the session's current epoch has had its flush (a ``flush`` record, a flush turn that a
    crash cut short, or a try whose record could not be written)."""
    if session.flushed_in == session.epoch:
        return True
    return any(
        isinstance(r, Flush) or (isinstance(r, User) and r.speaker == FLUSH_SPEAKER) for r in session.records
    )


def cap_sentence(cap: int) -> str:
    """The assistant record that ends a flush turn which reached its tool-call limit."""
    return f"I stopped saving: the memory flush reached its limit of {cap:,} tool calls."


def room_sentence() -> str:
    """The assistant record that ends a flush turn when too little of the context is left for another
    reply."""
    return "I stopped saving: too little of the context is left for the memory flush to go on."


def outside_sentence(tool: str) -> str:
    """The tool result of a flush's call to a tool it does not run (`FLUSH_TOOLS`)."""
    return (
        f"not run: the memory flush before compaction runs only {', '.join(sorted(FLUSH_TOOLS))}; "
        f"{tool[:64]} was not called"
    )


def timeout_sentence(seconds: float) -> str:
    """Why a flush turn failed when its time ran out."""
    return f"it did not finish within {seconds:g} s ([compact] flush_timeout_s)"


def no_room_sentence(depth: int, n_ctx: int) -> str:
    """Why a flush was not run: too little of the context was left."""
    return (
        f"too little of the context was left for it ({depth:,} of {n_ctx:,} tokens used); a larger "
        "[compact] flush_margin runs it earlier, with more room"
    )


class FlushFailed(Exception):
    """The flush turn did not end with a reply; `why` says why in words, `code` is the turn's code
    (``flush-timeout``, ``session_full``, ``model-unreachable``, ...)."""

    def __init__(self, code: str, why: str) -> None:
        super().__init__(why)
        self.code = code
        self.why = why


@dataclass(slots=True)
class Flusher:
    """Runs the flush turn of one session.

    Args:
        model: the model client (the session's own slot is used).
        broker: where its tool calls go (under the session's id: brokerd applies its label).
        now: the clock.
    """

    model: Model
    broker: Broker
    now: Callable[[], dt.datetime]

    def flush(
        self,
        session: Session,
        prompt: Callable[[], str],
        *,
        n_ctx: int,
        cap: int,
        max_tokens: int | None,
        timeout_s: float,
    ) -> None:
        """The session's flush for its current epoch: the turn (`run`) when it has room (`budget`), then
        the ``flush`` record; a failure is logged once, here, and in that record. Never raises: the
        session is compacted, when due, with or without it.

        Args:
            prompt: returns ``flush.md``'s text.
            n_ctx: the context per slot, in tokens.
            cap: ``[limits] tool_calls_per_turn``; max_tokens: ``[limits] max_tokens``.
            timeout_s: ``[compact] flush_timeout_s``.
        """
        started = time.monotonic()
        depth = session.depth() or 0
        why: str | None = None
        calls = 0
        try:
            text = prompt().strip()
        except (OSError, UnicodeDecodeError) as exc:
            why = f"its prompt (flush.md) cannot be read ({exc})"
            text = ""
        spend = budget(depth, n_ctx, text, max_tokens, cap) if why is None else None
        if why is None and spend is None:
            why = no_room_sentence(depth, n_ctx)
        elif spend is not None:
            try:
                calls = self.run(session, text, spend, timeout_s, n_ctx)
            except FlushFailed as exc:
                why = exc.why
            except (OSError, SessionError) as exc:
                why = f"its turn could not be logged ({exc})"
        record(session, why, self.now)
        if why is None:
            log.info(
                "flushed %s's memory before compaction: %d tool call(s) in %.1f s",
                session.id,
                calls,
                time.monotonic() - started,
            )
        else:
            log.warning(
                "the memory flush of %s before compaction failed: %s; the session is compacted without it",
                session.id,
                why,
            )

    def run(self, session: Session, prompt: str, spend: Budget, timeout_s: float, n_ctx: int) -> int:
        """Run the flush turn and log it in the session's current epoch; how many tool calls it ran (at
        most `spend.calls`: the calls past it are logged as not run and the turn ends). Its first
        request may reply `spend.max_tokens` tokens, each later one what `reply_room` leaves in `n_ctx`;
        with less than `MIN_REPLY_TOKENS` left, the turn ends there (`room_sentence`).

        The turn is cancelled when `timeout_s` seconds pass (a tool call already running finishes first:
        brokerd's own timeout bounds it). A turn that fails after its `user` record was logged is closed
        (`close_turn`), so the session's next request is valid.

        Raises:
            FlushFailed: it timed out, the model failed or the request did not fit.
            OSError, SessionError: the log cannot be written.
        """
        control = Control(started=time.monotonic())
        timer = threading.Timer(timeout_s, control.cancel.set)
        timer.daemon = True
        timer.start()
        logged = False
        try:
            said: User | None = User(time=format_time(self.now()), content=prompt, speaker=FLUSH_SPEAKER)
            messages = [*session.messages(), {"role": "user", "content": prompt}]
            calls = 0
            reply = spend.max_tokens
            while True:
                completion = complete(self.model, session, messages, reply, control)
                if said is not None:
                    session.append(said)
                    said, logged = None, True
                log_reply(session, completion, self.now)
                if not completion.tool_calls:
                    return calls
                capped = False
                for call in completion.tool_calls:
                    if calls >= spend.calls:
                        capped = True
                        log_result(
                            session, call, call.name, not_run_sentence(spend.calls), NO_DATA, now=self.now
                        )
                        continue
                    control.check(session.id)
                    calls += 1
                    routed = route(call.name, call.arguments)
                    if routed.problem is None and routed.tool not in FLUSH_TOOLS:
                        log_result(
                            session, call, routed.tool, outside_sentence(routed.tool), NO_DATA, now=self.now
                        )
                        continue
                    call_tool(self.broker, session, call, self.now)
                if capped:
                    session.append(Assistant(time=format_time(self.now()), content=cap_sentence(spend.calls)))
                    return calls
                messages = session.messages()
                results = sum(
                    len(str(m.get("content") or ""))
                    for m in messages[len(messages) - len(completion.tool_calls) :]
                )
                reply = reply_room(n_ctx, session.depth() or 0, results, spend.max_tokens)
                if reply < MIN_REPLY_TOKENS:
                    session.append(Assistant(time=format_time(self.now()), content=room_sentence()))
                    return calls
        except TurnCancelled:
            failed = FlushFailed("flush-timeout", timeout_sentence(timeout_s))
        except TurnFailed as exc:
            failed = FlushFailed(exc.code, exc.message)
        except ContextFull:
            failed = FlushFailed("session_full", "its request did not fit the model's context")
        finally:
            timer.cancel()
        if logged:
            close_turn(session, failed.code, self.now)
        raise failed


def record(session: Session, why: str | None, now: Callable[[], dt.datetime]) -> None:
    """Append the ``flush`` record that ends a flush (`why` None: done) and mark the epoch as flushed,
    even when the record cannot be written (logged; the flush is not tried again in this epoch)."""
    session.flushed_in = session.epoch
    if why is None:
        ended = Flush(time=format_time(now()), outcome="done")
    else:
        ended = Flush(time=format_time(now()), outcome="failed", why=why[:WHY_CHARS])
    try:
        session.append(ended)
    except (OSError, SessionError) as exc:
        log.error("session %s: cannot log the end of its memory flush (%s)", session.id, exc)
