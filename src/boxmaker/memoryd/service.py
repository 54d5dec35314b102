"""memoryd's requests, answered without sockets (M5a sections 4-7).

`Memoryd` owns the files (`store`, `journal`, `writer`) and the index (`index`, `recall`), and answers
every message kind its three sockets take:

| kind | from | answer |
|---|---|---|
| memory_block | loopd | memory_block_reply, or `error` memory-unavailable |
| session_updated | loopd | ok, once the new records are indexed |
| memory_call | brokerd | tool_response (a rule's refusal is a tool_response, never an error) |
| reindex | bxctl | reindexed |
| memory_admin | bxctl | memory_admin_reply (`admin` module) |
"""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Callable

from boxmaker.memoryd import admin, arguments, block, notes, recall, sentences, tiers
from boxmaker.memoryd.config import Config
from boxmaker.memoryd.entries import IDENTITY_FILES
from boxmaker.memoryd.index import Index
from boxmaker.memoryd.journal import Journal
from boxmaker.memoryd.recall import Recaller
from boxmaker.memoryd.sentences import Refusal
from boxmaker.memoryd.store import FileOverLimit, FileUnreadable, Store
from boxmaker.memoryd.writer import Answer, Caller, Writer
from boxmaker.proto.errors import InvalidBody, ProtocolError
from boxmaker.proto.ids import OWNER_SESSION
from boxmaker.proto.labels import DataClass, Label
from boxmaker.proto.messages import (
    Body,
    MemoryAdmin,
    MemoryBlock,
    MemoryBlockReply,
    MemoryCall,
    Ok,
    Reindex,
    Reindexed,
    SessionUpdated,
    ToolResponse,
)

log = logging.getLogger("boxmaker.memoryd")

#: Message kinds each socket takes (M5a section 7).
LOOP_KINDS = frozenset({"memory_block", "session_updated"})
BROKER_KINDS = frozenset({"memory_call"})
ADMIN_KINDS = frozenset({"reindex", "memory_admin"})


class MemoryUnavailable(ProtocolError):
    """Raised when the block cannot be served: a file is unreadable or over its limit (M5a section 4)."""

    code = "memory-unavailable"
    runbook = "memory-unavailable"


def _not_the_owner(kind: str, session: str) -> None:
    """The session id "owner" names the owner's own writes in journals and notes; no session of an
    agent may carry it (DESIGN 10.4).

    Raises:
        InvalidBody: when `session` is "owner".
    """
    if session == OWNER_SESSION:
        raise InvalidBody(kind, f"the session id {OWNER_SESSION!r} is reserved for the owner's own commands")


def utc_now() -> dt.datetime:
    """The current time, aware, in UTC."""
    return dt.datetime.now(dt.UTC)


class Memoryd:
    """The daemon's state and request handling, independent of sockets.

    Args:
        config: the resolved configuration.
        now: the clock (aware UTC datetimes), a parameter so tests can set the time.
    """

    def __init__(self, config: Config, now: Callable[[], dt.datetime] = utc_now) -> None:
        layout = config.layout
        self.config = config
        self.now = now
        self.store = Store(layout.memory, config.soul_starter)
        self.journal = Journal(layout.memory, now)
        self.index = Index(
            layout.index / "memory.sqlite3", layout.sessions, self.store.notes_path, config.max_class
        )
        self.writer = Writer(self.store, self.journal, now, config.review, self.index.add_notes)
        self.recaller = Recaller(self.index, layout.memory / "recalls", now)
        #: Erasure ids handed out by `erase_plan` for an erasure about to run (seed 003 section 12.3).
        self.reserved_erasures: set[str] = set()

    def open(self) -> list[str]:
        """Create missing files, complete an interrupted edit, open the index and start bringing it
        up to date in the background (`Index.warm_up`).

        Returns:
            The names of the files created.

        Raises:
            OSError, FileUnreadable, IndexUnusable: the start-up failures (memoryd-start-failed).
        """
        created = self.store.ensure()
        self.writer.open()
        self.index.open()
        self.index.warm_up()
        return created

    def close(self) -> None:
        """Close the index."""
        self.index.close()

    def handle(self, kind: str, body: Body) -> Body:
        """Answer one validated request.

        Raises:
            MemoryUnavailable: for `memory_block` when the block cannot be served.
        """
        if isinstance(body, MemoryBlock):
            return MemoryBlockReply(self.block().text)
        if isinstance(body, SessionUpdated):
            _not_the_owner(kind, body.session)
            self.index.catch_up(body.session)
            return Ok()
        if isinstance(body, MemoryCall):
            _not_the_owner(kind, body.request.session)
            return self.call(body)
        if isinstance(body, Reindex):
            counts = self.index.rebuild()
            return Reindexed(logs=counts.logs, records=counts.records, notes=counts.notes)
        if isinstance(body, MemoryAdmin):
            return admin.handle(self, body)
        raise ProtocolError(f"memoryd does not answer {kind}")

    def block(self) -> block.Block:
        """The memory block as a new session would get it.

        Raises:
            MemoryUnavailable: a file is unreadable or over its limit.
        """
        try:
            soul = self.store.read_soul()
            files = [self.store.read_identity(spec) for spec in IDENTITY_FILES.values()]
        except (FileUnreadable, FileOverLimit) as exc:
            log.error("memory-unavailable: %s", exc)
            raise MemoryUnavailable(f"the memory block is unavailable: {exc}") from None
        for file in files:
            if file.size > file.spec.limit:
                why = FileOverLimit(file.spec.name, file.size, file.spec.limit)
                log.error("memory-unavailable: %s", why)
                raise MemoryUnavailable(f"the memory block is unavailable: {why}")
        rendered = block.render(soul, files)
        for item in rendered.left_out:
            log.warning("left out of the block: an entry of %s refused by rule %s", item.file, item.rule)
        return rendered

    def call(self, call: MemoryCall) -> ToolResponse:
        """Run a decided `recall` or `memory` call with the session's state (M5a sections 5 and 8)."""
        request = call.request
        label = Label(max(call.taint, DataClass.PRIVATE), call.untrusted)
        if request.tool == "recall":
            return self._recall(call)
        if request.tool != "memory":
            refusal = sentences.arguments(f"memoryd runs recall and memory, not {request.tool}")
            return ToolResponse(request.call_id, refusal.sentence, refusal.code, None)
        if request.arguments.get("action") == "tiers":
            return self._tiers(call)
        parsed = arguments.parse_memory(request.arguments)
        if isinstance(parsed, Refusal):
            answer = Answer.refused(parsed)
        else:
            answer = self.write(
                lambda: self.writer.memory(Caller(request.session, request.call_id, label), parsed)
            )
        return ToolResponse(request.call_id, answer.output, answer.code, None)

    def write(self, apply: Callable[[], Answer]) -> Answer:
        """Run a write, turning an unreadable file into a refusal the model can read."""
        try:
            return apply()
        except FileUnreadable as exc:
            log.error("memory-unavailable: %s", exc)
            return Answer(f"{exc}; nothing was written", "refused:unavailable")

    def tiers_listing(self, untrusted: bool) -> tiers.Listing | Refusal:
        """The tiering listing (M5d 4.4): identity entries and notes with their recall counts; the
        text of untrusted notes only when `untrusted`.

        Returns ``refused:unavailable`` when a memory file or the recall log cannot be read.
        """
        try:
            files = [(s.name, self.store.read_identity(s).entries) for s in IDENTITY_FILES.values()]
            found = notes.parse(self.store.read_notes())
            tallied = tiers.tally(recall.read_log(self.recaller.recalls))
        except (FileUnreadable, OSError) as exc:
            return Refusal("refused:unavailable", f"{exc}; nothing to list")
        return tiers.listing(files, found, tallied, untrusted=untrusted)

    def _tiers(self, call: MemoryCall) -> ToolResponse:
        """The `memory` tool's `tiers` action: the listing as a tool result, labelled with the strictest
        label of what it shows (DESIGN 11), so reading untrusted notes taints the session."""
        request = call.request
        parsed = arguments.parse_tiers(request.arguments)
        if isinstance(parsed, Refusal):
            return ToolResponse(request.call_id, parsed.sentence, parsed.code, None)
        result = self.tiers_listing(parsed.untrusted)
        if isinstance(result, Refusal):
            return ToolResponse(request.call_id, result.sentence, result.code, None)
        shown = result.data["label"]
        label = Label(DataClass(shown["class"]), bool(shown["untrusted"]))
        return ToolResponse(request.call_id, result.text, "ok", label)

    def _recall(self, call: MemoryCall) -> ToolResponse:
        request = call.request
        parsed = arguments.parse_recall(request.arguments)
        if isinstance(parsed, Refusal):
            return ToolResponse(request.call_id, parsed.sentence, parsed.code, None)
        result = self.recaller.recall(parsed.query, parsed.k, session=request.session)
        if isinstance(result, Refusal):
            return ToolResponse(request.call_id, result.sentence, result.code, None)
        return ToolResponse(request.call_id, result.text, "ok", result.label)
