"""The agent loop: sessions, turns, tool calls (M5a section 9; DESIGN 1 and 4).

A turn takes the owner's text, replays the session as chat messages (the saved baseline, then every
record), asks the model, logs its reply, and while the reply asks for tools, sends each call to brokerd
and asks again. Every request of a session strictly extends the previous one (prompt + reply), so the
model server's slot cache is reused. A turn that reaches `tool_calls_per_turn` ends with a reply to the
owner saying so, never a silent hang (hermes #42405).

The owner's message is logged only once the model has answered it, so a turn that fails at its first
request (model down, the context full) leaves the log as it was. A turn that fails or is cancelled later
is closed (`turn.close_turn`: a result for each unanswered call, loopd's closing sentence, `turn_end`),
so a failure never poisons its session: the next turn's request is valid and strictly extends the
last. After a turn memoryd hears `session_updated`, best effort.

`Loop` runs a turn's steps in order and compacts between them; the steps themselves (the model request,
a tool call, the records they log) and what a turn ends with are in `boxmaker.loopd.turn`, the sessions
it holds in memory in `boxmaker.loopd.open_sessions`.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from boxmaker.loopd.broker import NO_DATA, Broker
from boxmaker.loopd.compact import Summariser, describe
from boxmaker.loopd.flush import Flusher, flushed
from boxmaker.loopd.memory import MemorySource, MemoryUnavailable
from boxmaker.loopd.model import ContextFull
from boxmaker.loopd.open_sessions import Erased, OpenSessions
from boxmaker.loopd.session import Baseline, Session, SessionError, check_session_id
from boxmaker.loopd.slots import Priority, priority
from boxmaker.loopd.summaries import Summaries
from boxmaker.loopd.tools import core_tools
from boxmaker.loopd.trigger import compaction_due, flush_due
from boxmaker.loopd.turn import (
    SURROGATE,
    CompactFailed,
    Control,
    Model,
    TurnFailed,
    TurnResult,
    call_tool,
    cap_sentence,
    close_turn,
    complete,
    full_sentence,
    log_reply,
    log_result,
    not_run_sentence,
)
from boxmaker.proto.ids import new_chat_session_id
from boxmaker.proto.records import Assistant, User, format_time
from boxmaker.proto.settings import packaged_starter

log = logging.getLogger("boxmaker.loopd")

#: Seconds before a compaction that failed is tried again when it is merely due (not needed to fit).
COMPACT_RETRY_S = 300.0


def utc_now() -> dt.datetime:
    """The current time, in UTC."""
    return dt.datetime.now(dt.UTC)


@dataclass(frozen=True, slots=True)
class LoopSettings:
    """The loop's slots, limits and compaction (M5d section 5).

    `n_ctx` is the context per slot in tokens (None: unknown, so only a context-full error compacts);
    a session whose last request left the slot at `threshold` x `n_ctx` or more is compacted before
    its next turn (right after its turn when `compact_after_turn`, in the background). With `flush`,
    one turn saves memory first, once per epoch, from (`threshold` - `flush_margin`) x `n_ctx` on, within
    `flush_timeout_s` seconds (issue 19; `boxmaker.loopd.flush`).
    """

    main_slot: int | None = 0
    tool_calls_per_turn: int = 16
    max_tokens: int | None = 2048
    background_slot: int | None = 1
    n_ctx: int | None = None
    threshold: float = 0.85
    summary_chars: int = 4000
    compact_after_turn: bool = False
    flush: bool = True
    flush_margin: float = 0.05
    flush_timeout_s: float = 60.0


class Loop:
    """Runs turns of sessions under one home.

    Args:
        sessions: the ``sessions/`` folder.
        model: the model server's client.
        broker: where tool calls go.
        memory: where a new session's memory block comes from (no default: a loop without memory
            must say so with `NoMemory`).
        system_prompt: returns ``system.md``'s text, read for each new session (and new epoch).
        settings: slots, limits and compaction.
        rescrub: scrubs a session's files again of the erasures it was live for (`erase.rescrub`),
            called before memoryd hears of its new records.
        compact_prompt: returns ``compact.md``'s text (default: the packaged starter).
        flush_prompt: returns ``flush.md``'s text (default: the packaged starter).
        summaries: runs tool-output summaries after turns (M5d 4.3); None: none are made.
        now: the clock.
        new_id: makes a new chat session's id.
    """

    def __init__(
        self,
        sessions: Path,
        model: Model,
        broker: Broker,
        memory: MemorySource,
        system_prompt: Callable[[], str],
        *,
        settings: LoopSettings,
        rescrub: Callable[[Session, list[Erased]], None],
        compact_prompt: Callable[[], str] | None = None,
        flush_prompt: Callable[[], str] | None = None,
        summaries: Summaries | None = None,
        now: Callable[[], dt.datetime] = utc_now,
        new_id: Callable[[], str] = new_chat_session_id,
    ) -> None:
        self.summaries = summaries
        self.compact_prompt = compact_prompt or (
            lambda: packaged_starter("compact.md").read_text(encoding="utf-8")
        )
        self.flush_prompt = flush_prompt or (lambda: packaged_starter("flush.md").read_text(encoding="utf-8"))
        self.sessions = sessions
        self.model = model
        self.broker = broker
        self.memory = memory
        self.system_prompt = system_prompt
        self.settings = settings
        self.now = now
        self.new_id = new_id
        self.rescrub = rescrub
        #: The sessions held in memory, their turn locks, the compactions under way, and the erasures
        #: each open session was live for (seed 003 section 12.3; `erase.keep_live`).
        self.open_sessions = OpenSessions()
        #: Whether a session is a run of a maintenance job (autodream): the scheduler sets it.
        self.maintenance: Callable[[str], bool] = lambda _: False

    # Sessions ------------------------------------------------------------------------------------

    def baseline(self, session_id: str = "") -> Baseline:
        """A new session's baseline: system.md, a blank line, the memory block; the core tools, with
        the maintenance actions when `maintenance` says `session_id` is a maintenance job's run.

        Raises:
            MemoryUnavailable: from the memory source.
            OSError: system.md cannot be read.
        """
        block = self.memory.block()
        system = self.system_prompt().rstrip("\n")
        return Baseline(f"{system}\n\n{block}", core_tools(bool(session_id) and self.maintenance(session_id)))

    def _session(self, session_id: str, background: bool = False) -> Session:
        """The open session `session_id`, opening or creating it (the caller holds its lock)."""
        known = self.open_sessions.reuse(session_id)
        if known is not None:
            return known
        if Session.started(self.sessions, session_id):
            session = Session.open(self.sessions, session_id)
        else:
            try:
                baseline = self.baseline(session_id)
            except MemoryUnavailable as exc:
                raise TurnFailed(exc.code, str(exc), exc.runbook) from None
            except (OSError, UnicodeDecodeError) as exc:
                raise TurnFailed(
                    "loopd-config", f"cannot read the system prompt ({exc})", "loopd-start-failed"
                ) from None
            slot = self.settings.background_slot if background else self.settings.main_slot
            session = Session.create(self.sessions, session_id, baseline, slot, self.now)
        self.open_sessions.add(session)
        return session

    # Turns -------------------------------------------------------------------------------------------

    def turn(
        self,
        session_id: str | None,
        text: str,
        background: bool = False,
        *,
        speaker: str | None = None,
        control: Control | None = None,
    ) -> TurnResult:
        """Run one turn: the owner's `text` in `session_id` (None: a new chat session; an unknown id
        starts that session). A session started with `background` runs on the background slot (the
        scheduler's sessions); a session keeps the slot it started with. `speaker` is recorded on the
        `user` record when the text is not the owner's (``scheduler``, ``job:<name>``); `control`
        streams the reply and can cancel the turn.

        Raises:
            TurnFailed: with a code and runbook entry (see the class); `TurnCancelled` when cancelled.
                Other turns of the same session wait for this one.
        """
        if session_id is None:
            session_id = self.new_id()
        try:
            check_session_id(session_id)
        except SessionError as exc:
            raise TurnFailed("invalid-session", str(exc), "") from None
        if SURROGATE.search(text):
            raise TurnFailed(
                "invalid-text", "the message is not valid Unicode (it holds a lone surrogate)", ""
            )
        if control is not None:
            control.doing = "the session's previous turn"
        with self.open_sessions.lock(session_id):
            if control is not None:
                control.doing = "its start (a compaction, when one is due)"
            fresh = not Session.started(self.sessions, session_id)
            try:
                session = self._session(session_id, background)
            except SessionError as exc:
                raise TurnFailed(exc.code, str(exc), exc.runbook) from None
            self._flush_if_due(session)
            self._compact_if_due(session)
            try:
                return self._run(session, User(time="", content=text, speaker=speaker), control)
            except TurnFailed:
                self.scrub_erased(session)  # what the failed turn logged, too
                if fresh and len(session.records) == 1:
                    self._discard(session)  # nothing but session_start: no session to keep
                raise
            except (OSError, SessionError) as exc:  # the log could not be written: say so, keep serving
                self.scrub_erased(session)
                self.open_sessions.drop(session_id)  # read it again from disk next time
                raise TurnFailed(
                    "session-damaged",
                    f"session {session_id}: cannot write its log ({exc})",
                    "session-damaged",
                ) from None

    def _discard(self, session: Session) -> None:
        """Remove a session this turn created and never used (only its own two files)."""
        self.open_sessions.forget(session.id)
        for name in ("0.jsonl", "0.baseline.json"):
            (session.folder / name).unlink(missing_ok=True)
        with contextlib.suppress(OSError):
            session.folder.rmdir()

    # Compaction (M5d section 3) ------------------------------------------------------------------

    def _due(self, session: Session) -> bool:
        """True when the session must be compacted before its next turn: a compaction a crash cut
        short, or a last request that left the slot at or above the threshold."""
        if session.pending is not None:
            return True
        return compaction_due(session.depth(), self.settings.n_ctx, self.settings.threshold)

    def _compact_if_due(self, session: Session, why: str = "a compaction was due before this turn") -> None:
        """Compact before a turn when due; a failure leaves the old epoch and is logged (the turn then
        runs there, and a context-full error tries once more).

        Raises:
            TurnFailed: ``session-compact-failed`` when an interrupted compaction cannot be finished.
        """
        if not self._due(session):
            return
        if session.pending is None and time.monotonic() - session.compact_failed_at < COMPACT_RETRY_S:
            return  # it failed a moment ago: do not spend another summary on it yet
        try:
            self.compact(session, why)
        except CompactFailed as exc:
            log.error("%s (runbook: session-compact-failed)", exc)
            session.compact_failed_at = time.monotonic()
            session.warning = f"{exc}; it goes on in its epoch for now (runbook: session-compact-failed)"
            if session.pending is not None:  # its epoch has ended: nothing can be added to it
                raise TurnFailed("session-compact-failed", str(exc), "session-compact-failed") from None

    def _flush_due(self, session: Session) -> bool:
        """True when the session's memory flush is due before compaction (issue 19): on, not yet run in
        this epoch, and the last request left the slot at (threshold - flush_margin) x n_ctx or more."""
        settings = self.settings
        return (
            settings.flush
            and session.pending is None
            and not flushed(session)
            and flush_due(session.depth(), settings.n_ctx, settings.threshold, settings.flush_margin)
            and self._worth_compacting(session)
        )

    def _flush_if_due(self, session: Session) -> None:
        """Run the session's memory flush when it is due, holding it busy as a compaction does (the
        caller holds its lock); a flush that fails is said once and compaction goes on without it."""
        if not self._flush_due(session) or self.settings.n_ctx is None:
            return
        with self.open_sessions.compaction(session.id), priority(Priority.COMPACTION):
            Flusher(self.model, self.broker, self.now).flush(
                session,
                self.flush_prompt,
                n_ctx=self.settings.n_ctx,
                cap=self.settings.tool_calls_per_turn,
                max_tokens=self.settings.max_tokens,
                timeout_s=self.settings.flush_timeout_s,
            )
        self.updated(session)
        if self.summaries is not None:
            self.summaries.start(session, self.summaries.wanted(session))

    def compacting(self) -> list[str]:
        """The sessions being compacted now (their next turn waits), sorted."""
        return self.open_sessions.compacting()

    def compact(self, session: Session, why: str) -> None:
        """Summarise the current epoch on the background slot and go on in the next (M5d 3.4-3.5).

        The caller holds the session's lock: compaction holds the session busy.

        Raises:
            CompactFailed: compact.md or system.md unreadable, no memory block for the new baseline,
                or the new epoch's files could not be written; the session stays on its epoch (or, if
                `epoch_end` was written, is finished at its next open).
        """
        with self.open_sessions.compaction(session.id):
            self._compact(session, why)

    def _compact(self, session: Session, why: str) -> None:
        started = time.monotonic()
        if self.summaries is not None and not self.summaries.wait(session.id):
            raise CompactFailed(session.id, "its tool-output summaries did not finish within 10 minutes")
        try:  # the memory block first: without it there is no new epoch, so no summary is spent
            baseline = self.baseline(session.id)
        except MemoryUnavailable as exc:
            raise CompactFailed(session.id, f"no memory block for the new epoch ({exc.why})") from None
        except (OSError, UnicodeDecodeError) as exc:
            raise CompactFailed(session.id, f"cannot read system.md ({exc})") from None
        summary = session.pending
        how = "carried from an interrupted compaction"
        if summary is None:
            summariser = Summariser(
                self.model, self.settings.background_slot, self.compact_prompt, self.settings.summary_chars
            )
            try:
                with priority(Priority.COMPACTION):
                    made = summariser.summarise(session)
            except (OSError, UnicodeDecodeError) as exc:
                raise CompactFailed(session.id, f"cannot read compact.md ({exc})") from None
            summary, how = made.text, describe(made)
        try:
            session.start_epoch(summary, baseline, self.now)
        except (OSError, SessionError) as exc:
            raise CompactFailed(session.id, f"cannot write the new epoch ({exc})") from None
        session.compacted = True
        log.info(
            "compacted %s into epoch %d (%s; %s) in %.1f s",
            session.id,
            session.epoch,
            why,
            how,
            time.monotonic() - started,
        )
        self.updated(session)

    def _compact_later(self, session_id: str) -> None:
        """After a turn: compact in the background if it is due (the next turn waits for it)."""
        with self.open_sessions.lock(session_id):
            session = self.open_sessions.get(session_id)
            if session is None or not session.unchanged():
                return
            self._flush_if_due(session)
            with contextlib.suppress(TurnFailed):  # logged; the next turn says it to the owner
                self._compact_if_due(session, "the last turn filled the slot")

    def _worth_compacting(self, session: Session) -> bool:
        """True when the epoch holds a turn to summarise: a new session's first message, or a message that
        did not fit the epoch a compaction just began, is not helped by another compaction."""
        return any(isinstance(r, User) for r in session.records)

    def _run(self, session: Session, said: User, control: Control | None) -> TurnResult:
        """The turn's steps; a failure after the owner's message was logged closes the turn first."""
        result = TurnResult(session.id, session.turns + 1, "")
        try:
            return self._steps(session, said, control, result)
        except TurnFailed as exc:
            exc.tools = result.tools
            if result.logged and close_turn(session, exc.code, self.now):
                self._finish(session, result)  # a closed turn is a finished one: memoryd hears of it
            raise

    def _steps(self, session: Session, said: User, control: Control | None, result: TurnResult) -> TurnResult:
        cap = self.settings.tool_calls_per_turn
        text = said.content
        user: User | None = User(time=format_time(self.now()), content=text, speaker=said.speaker)
        messages = [*session.messages(), {"role": "user", "content": text}]
        calls = 0
        retried = False
        while True:
            try:
                completion = complete(self.model, session, messages, self.settings.max_tokens, control)
            except ContextFull as exc:
                if retried or not self._worth_compacting(session):
                    raise TurnFailed("session_full", full_sentence(session, exc), "session-full") from None
                retried = True
                try:
                    self.compact(session, "the context was full")
                except CompactFailed as failed:
                    raise TurnFailed(
                        "session_full",
                        f"{full_sentence(session, exc)}; and {failed}",
                        "session-compact-failed",
                    ) from None
                # retry the owner's message once in the new epoch (logged once, there); a turn already
                # under way goes on from the summary
                messages = session.messages()
                if user is not None:
                    messages.append({"role": "user", "content": text})
                continue
            if user is not None:
                session.append(user)
                user = None
                result.logged = True
            log_reply(session, completion, self.now)
            if not completion.tool_calls:
                result.reply = completion.content or ""
                result.cut = completion.finish_reason == "length"
                break
            capped = False
            for call in completion.tool_calls:
                if calls >= cap:
                    capped = True
                    log_result(session, call, call.name, not_run_sentence(cap), NO_DATA, now=self.now)
                    continue
                calls += 1
                if control is not None:
                    control.check(session.id)
                    control.doing = f"the tool {call.name[:64]}"
                result.tools.append(call_tool(self.broker, session, call, self.now))
            if capped:
                result.reply = cap_sentence(cap)
                session.append(Assistant(time=format_time(self.now()), content=result.reply))
                break
            messages = session.messages()
        return self._finish(session, result)

    def _finish(self, session: Session, result: TurnResult) -> TurnResult:
        """After a finished turn: fill in the result, tell memoryd, start the tool summaries, and
        start a compaction in the background when one is due."""
        result.turn = session.turns
        result.untrusted = session.untrusted
        result.epoch = session.epoch
        result.compacted, session.compacted = session.compacted, False
        result.warning, session.warning = session.warning, ""
        self.updated(session)
        if self.summaries is not None:
            self.summaries.start(session, self.summaries.wanted(session))
        if self.settings.compact_after_turn and (self._due(session) or self._flush_due(session)):
            threading.Thread(target=self._compact_later, args=(session.id,), daemon=True).start()
        return result

    def forget(self, session_id: str) -> None:
        """Drop a session from memory (it is opened again from disk next time)."""
        with self.open_sessions.lock(session_id):
            self.open_sessions.forget(session_id)

    # Erasure (seed 003 section 12.3; `erase`) -------------------------------------------------------

    def updated(self, session: Session) -> None:
        """Tell memoryd the session has new records, after scrubbing them of the erasures it was live
        for (`scrub_erased`), so the index only ever reads scrubbed records."""
        self.scrub_erased(session)
        self.memory.session_updated(session.id, session.turns)

    def scrub_erased(self, session: Session) -> None:
        """Scrub the session's files again of every erasure that ran while it was live (a turn that
        was running then logs records, such as a recall result, that may quote an erased text)."""
        pending = self.open_sessions.erased(session.id)
        if pending:
            self.rescrub(session, pending)
