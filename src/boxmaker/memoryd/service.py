"""memoryd's requests, answered without sockets (M5a sections 4-7): the composition root.

`Memoryd` builds memoryd's collaborators once (`memory.Memory`: the files, the journal, the one write
path and item store, the withdrawal controls, the index and recall, erasure's holdings, autodream's
staging), opens and closes them, and routes each message kind its three sockets take:

| kind | from | answer |
|---|---|---|
| memory_block | loopd | memory_block_reply, or `error` memory-unavailable |
| session_updated | loopd | ok, once the new records are indexed |
| memory_call | brokerd | tool_response (`tool.call`; a rule's refusal is a tool_response, never an error) |
| mcp_call | boxmaker-mcp | tool_response (`tool.mcp.call`, with the peer's uid and pid; issue 17) |
| mcp_hello | boxmaker-mcp | mcp_hello_reply: the owner's trust in the client, the block (issue 17) |
| reindex | bxctl | reindexed |
| memory_admin | bxctl | memory_admin_reply (`admin.handle`) |
| memory_import | bxctl | memory_admin_reply (`admin.imports.handle`; issue 17) |

Wiring that must stay as it is: the journal's listeners first fold what the commit appended into
the item store (`ItemStore.follow`), then write the index.md and topic pages it touched after every
commit that carried item events or controls (`pages.Pages`; `open` renders what a crash left
unwritten); the writer hands
every note it appends to the index (`Index.add_notes`); a withdrawal rebuilds the index in the
background; the archive timer (``[archive] enabled``) runs the archive once a day under the write lock.
"""

from __future__ import annotations

import datetime as dt
import gc
import logging
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

from boxmaker.memoryd import admin, startcheck, tool
from boxmaker.memoryd.admin import imports as owner_imports
from boxmaker.memoryd.config import Config
from boxmaker.memoryd.dream.staging import Staging
from boxmaker.memoryd.erase.scope import Holdings
from boxmaker.memoryd.files.checkpoint import Checkpoints
from boxmaker.memoryd.files.journal import Journal
from boxmaker.memoryd.files.mcp_sessions import McpSessions
from boxmaker.memoryd.files.names import MCP_DIR, REPAIR_DIR, VERIFY_DIR
from boxmaker.memoryd.files.serve import MemoryUnavailable
from boxmaker.memoryd.files.store import Store
from boxmaker.memoryd.index.index import Index
from boxmaker.memoryd.index.recall import Recaller
from boxmaker.memoryd.index.retrievals import Turns
from boxmaker.memoryd.items import archive
from boxmaker.memoryd.items.live import ItemStore
from boxmaker.memoryd.items.pagefiles import Requests
from boxmaker.memoryd.items.pages import Pages
from boxmaker.memoryd.items.projections import Excluded
from boxmaker.memoryd.memory import Memory, block
from boxmaker.memoryd.tool import mcp as mcp_tool
from boxmaker.memoryd.withdrawal.controls import Controls
from boxmaker.memoryd.withdrawal.receipts import Withdrawals
from boxmaker.memoryd.write.writer import Writer
from boxmaker.proto import heap
from boxmaker.proto.errors import InvalidBody, ProtocolError
from boxmaker.proto.ids import OWNER_SESSION, mcp_client_of
from boxmaker.proto.messages import (
    Body,
    McpCall,
    McpHello,
    McpHelloReply,
    MemoryAdmin,
    MemoryBlock,
    MemoryBlockReply,
    MemoryCall,
    MemoryImport,
    Ok,
    Reindex,
    Reindexed,
    SessionUpdated,
)
from boxmaker.proto.startcheck import Finding, report
from boxmaker.proto.wire import exchange

log = logging.getLogger("boxmaker.memoryd")

#: Message kinds each socket takes (M5a section 7).
LOOP_KINDS = frozenset({"memory_block", "session_updated"})
BROKER_KINDS = frozenset({"memory_call"})
ADMIN_KINDS = frozenset({"reindex", "memory_admin", "memory_import"})
#: The MCP servers' socket (issue 17): their calls, and the block for their resource and instructions.
MCP_KINDS = frozenset({"mcp_call", "mcp_hello", "memory_block"})


def _not_the_owner(kind: str, session: str) -> None:
    """The session id "owner" names the owner's own writes in journals and notes; no session of an
    agent may carry it (DESIGN 10.4).

    Raises:
        InvalidBody: when `session` is "owner".
    """
    if session == OWNER_SESSION:
        raise InvalidBody(kind, f"the session id {OWNER_SESSION!r} is reserved for the owner's own commands")


def _not_an_mcp_session(kind: str, session: str) -> None:
    """Session ids ``mcp-<client>-<20 base32>`` are the MCP clients' (issue 17): a brokerd session may
    not carry one, so no note reads ``via mcp:`` unless an MCP client wrote it.

    Raises:
        InvalidBody: when `session` has an MCP session's form.
    """
    if mcp_client_of(session) is not None:
        raise InvalidBody(kind, f"the session id {session!r} has the form reserved for MCP clients")


def utc_now() -> dt.datetime:
    """The current time, aware, in UTC."""
    return dt.datetime.now(dt.UTC)


def withdrawn_items(folder: Path) -> Excluded:
    """Which items of a memory folder are withdrawn (seed 003 section 12.2): its controls' exclusion."""
    return Controls(folder).exclusion().item


def build(config: Config, now: Callable[[], dt.datetime] = utc_now) -> Memory:
    """memoryd's collaborators for `config`, wired together (nothing is opened or read yet)."""
    layout = config.layout
    store = Store(layout.memory, config.soul_starter)
    journal = Journal(layout.memory, now)
    items = ItemStore(layout.memory)
    controls = Controls(layout.memory, items.folded_items)
    requests = Requests()  # the large pages' writer and the index's upkeep work in the gaps between them
    index = Index(
        layout.index / "memory.sqlite3",
        layout.sessions,
        store.notes_path,
        config.max_class,
        controls.exclusion,
        imports=layout.imports,
        gap=requests.wait,
    )
    writer = Writer(
        store, journal, now, config.review, index.add_notes, sessions=layout.sessions, items=items
    )
    pages = Pages(layout.memory, items, controls.exclusion, controls.path, requests)
    recaller = Recaller(
        index,
        layout.memory / "recalls",
        now,
        exclusion=controls.exclusion,
        items=items.current,
        turns=Turns(layout.sessions),
    )
    checkpoints = Checkpoints(layout.memory, journal, writer.lock)
    withdrawals = Withdrawals(
        controls,
        store=store,
        journal=journal,
        lock=writer.lock,
        now=now,
        sessions=layout.sessions,
        on_change=index.rebuild_in_background,
        imports=layout.imports,
    )
    return Memory(
        config=config,
        now=now,
        store=store,
        journal=journal,
        writer=writer,
        items=items,
        pages=pages,
        controls=controls,
        withdrawals=withdrawals,
        index=index,
        recaller=recaller,
        holdings=Holdings(layout, store, journal, writer.lock, index, set(), now, checkpoints),
        staging=Staging(writer, now, config.dream_stage),
        exclusion_for=withdrawn_items,
        checkpoints=checkpoints,
        mcp_sessions=McpSessions(layout.memory / MCP_DIR),
    )


class Memoryd:
    """The daemon's collaborators and request routing, independent of sockets.

    Args:
        config: the resolved configuration.
        now: the clock (aware UTC datetimes), a parameter so tests can set the time.
        archive_poll: the archive timer's longest sleep, in seconds.
    """

    def __init__(
        self, config: Config, now: Callable[[], dt.datetime] = utc_now, archive_poll: float = 300.0
    ) -> None:
        self.config = config
        #: The collaborators every handler reads (`memory.Memory`).
        self.memory = build(config, now)
        self.archive_timer = (
            archive.ArchiveTimer(self._archive_by_timer, now, self._last_archive_day, archive_poll)
            if config.archive
            else None
        )

    def open(self) -> list[str]:
        """Create missing files, complete an interrupted edit, render the projections, open the index
        and start bringing it up to date in the background (`Index.warm_up`).

        Returns:
            The names of the files created.

        Raises:
            OSError, FileUnreadable, IndexUnusable: the start-up failures (memoryd-start-failed).
        """
        memory = self.memory
        created = memory.store.ensure()
        memory.writer.open()
        self.check()
        memory.journal.listeners += [memory.items.follow, self._after_commit, memory.checkpoints.after_commit]
        memory.pages.open()
        heap.release_free_memory()  # the fold's start-up garbage (issue 16: peak RSS)
        memory.index.open()
        memory.index.warm_up()
        if self.archive_timer is not None:
            self.archive_timer.start()
        gc.freeze()  # the fold of a large home is never walked by a collection in the middle of a request
        return created

    def check(self) -> list[Finding]:
        """The start-up check (`startcheck`): log the first damage found in one sentence, keep what it
        found for ``status`` and ``repair``, and take a checkpoint when nothing is damaged. What it did
        with the journal's hash chain (the lines since the checkpoint, the head) is logged too and kept
        for ``status``."""
        memory = self.memory
        for scratch in (REPAIR_DIR, VERIFY_DIR):
            shutil.rmtree(memory.config.layout.memory / scratch, ignore_errors=True)
        found, chained = startcheck.check_chain(memory.config.layout.memory, memory.journal)
        report(log, "memoryd", found)
        (log.error if chained.problem else log.info)("%s", chained.sentence)
        memory.checkpoints.chain = chained
        memory.checkpoints.checked_now(found)
        return found

    def close(self) -> None:
        """Stop the archive timer (a run in progress finishes) and close the index (the server takes
        the clean stop's checkpoint first: `server.Server.stop`)."""
        if self.archive_timer is not None:
            self.archive_timer.stop()
        self.memory.pages.close()
        self.memory.index.close()

    def handle(self, kind: str, body: Body) -> Body:
        """Answer one validated request (the table in the module docstring).

        Raises:
            MemoryUnavailable: for `memory_block` when the block cannot be served.
            InvalidBody: a session id "owner" from loopd or brokerd; a malformed owner command.
        """
        with self.memory.pages.requests.serving():  # a large page's background write waits meanwhile
            return self._answer(kind, body)

    def _answer(self, kind: str, body: Body) -> Body:
        memory = self.memory
        if isinstance(body, MemoryBlock):
            return MemoryBlockReply(block(memory).text)
        if isinstance(body, SessionUpdated):
            _not_the_owner(kind, body.session)
            memory.index.catch_up(body.session)
            return Ok()
        if isinstance(body, MemoryCall):
            _not_the_owner(kind, body.request.session)
            _not_an_mcp_session(kind, body.request.session)
            return tool.call(memory, body)
        if isinstance(body, McpCall):
            connection = exchange()
            return mcp_tool.call(memory, body, connection.peer() if connection is not None else None)
        if isinstance(body, McpHello):
            try:
                text = block(memory).text
            except MemoryUnavailable as exc:
                return McpHelloReply(memory.config.trust_of(body.client), "", exc.message)
            return McpHelloReply(memory.config.trust_of(body.client), text)
        if isinstance(body, Reindex):
            memory.items.refold()  # reindex rebuilds everything derived: the fold, the pages, the index
            memory.pages.flush()
            counts = memory.index.rebuild()
            return Reindexed(logs=counts.logs, records=counts.records, notes=counts.notes)
        if isinstance(body, MemoryAdmin):
            return admin.handle(memory, body)
        if isinstance(body, MemoryImport):
            return owner_imports.handle(memory, body)
        raise ProtocolError(f"memoryd does not answer {kind}")

    def refresh_projections(self) -> None:
        """Write index.md and the topic pages the last changes touched (`pages.Pages.flush`: logged,
        never raised)."""
        self.memory.pages.flush()

    def _after_commit(self, line: dict[str, Any]) -> None:
        if line.get("events") or line.get("controls") or line.get("action") == "repair":
            self.refresh_projections()

    def _archive_by_timer(self) -> None:
        memory = self.memory
        done = archive.archive_now(
            memory.writer.lock, memory.items, memory.journal, memory.now, archive.TIMER
        )
        log.info("archive timer: %s", done.sentence())

    def _last_archive_day(self) -> dt.date | None:
        with self.memory.writer.lock:
            return archive.last_run_day(self.memory.journal)
