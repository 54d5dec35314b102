"""What every handler may use: memoryd's collaborators in one behaviour-free record (the record uvicorn's
``ServerState`` is to its protocols).

`service.Memoryd` builds one `Memory` when it starts and hands it to the two front doors, `tool` (the
`recall` and `memory` tools, brokerd's socket) and `admin` (the owner's commands). A handler reads the
fields it needs for one request and passes the narrow collaborators on to the domain functions
(``writer``, ``index``, ``controls`` …); it keeps no reference to the record past its request. Nothing
below the front doors takes a `Memory`.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from boxmaker.memoryd.config import Config
from boxmaker.memoryd.dream.staging import Staging
from boxmaker.memoryd.erase.scope import Holdings
from boxmaker.memoryd.files.block import Block
from boxmaker.memoryd.files.checkpoint import Checkpoints
from boxmaker.memoryd.files.journal import Journal
from boxmaker.memoryd.files.mcp_sessions import McpSessions
from boxmaker.memoryd.files.serve import serve
from boxmaker.memoryd.files.store import Store
from boxmaker.memoryd.index.index import Index
from boxmaker.memoryd.index.recall import Recaller
from boxmaker.memoryd.items.live import ItemStore
from boxmaker.memoryd.items.pages import Pages
from boxmaker.memoryd.items.projections import Excluded
from boxmaker.memoryd.withdrawal.controls import Controls, withdrawn_identity
from boxmaker.memoryd.withdrawal.receipts import Withdrawals
from boxmaker.memoryd.write.writer import Writer


@dataclass(frozen=True, slots=True)
class Memory:
    """memoryd's collaborators (built by `service.Memoryd`; the same objects for its whole life).

    Attributes:
        config: the resolved configuration (layout, review, dream staging, max_class, sockets).
        now: the clock (aware UTC datetimes).
        store: the memory files; journal: the edit journal; writer: the one write path (its lock
            serialises every change of memory/); items: the one item store (the writer's); pages: index.md
            and topics/ kept up to date from it.
        controls: the withdrawal controls; withdrawals: their appends and receipts.
        index: the FTS index; recaller: recall and the owner's search over it.
        holdings: what an erasure reaches (with the erasure ids reserved for this process's life).
        staging: autodream's staged passes.
        exclusion_for: which items of a memory folder are withdrawn (seed 003 section 12.2), applied
            before the projections, the read path, export and replay show anything.
        checkpoints: the last good state the start-up check verified, and what it found
            (``findings``: the damage standing now).
        mcp_sessions: each MCP session's label, kept durably (issue 17).
    """

    config: Config
    now: Callable[[], dt.datetime]
    store: Store
    journal: Journal
    writer: Writer
    items: ItemStore
    pages: Pages
    controls: Controls
    withdrawals: Withdrawals
    index: Index
    recaller: Recaller
    holdings: Holdings
    staging: Staging
    exclusion_for: Callable[[Path], Excluded]
    checkpoints: Checkpoints
    mcp_sessions: McpSessions


def excluded(memory: Memory) -> Excluded:
    """The withdrawal predicate for this home's items, as the controls stand now."""
    return memory.exclusion_for(memory.config.layout.memory)


def block(memory: Memory) -> Block:
    """The memory block a new session would get now (`files.serve.serve`), withdrawn entries left out.

    Raises:
        MemoryUnavailable: a file is unreadable or over its limit.
    """
    return serve(
        memory.store, lambda files: withdrawn_identity(memory.controls, memory.store, memory.journal, files)
    )
