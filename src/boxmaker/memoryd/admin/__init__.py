"""The owner's commands over the admin socket: ``memory_admin`` (M5a sections 5 and 10; DESIGN 10.3).

| command | arg / args | does |
|---|---|---|
| status | | what runs: home, index size, review |
| log | arg: N (default 20) | the newest N journal lines, oldest first, each with `revertable` |
| undo | arg: edit id ("" = the latest edit of memory.md or user.md) | reverts it, or says why not |
| revert | arg: edit id; args: {"yes": bool} | reverts any edit entry by entry (`write.revert`) |
| pending | | staged writes waiting for the owner |
| accept, reject | arg: pending id | applies (with every check) or discards one |
| files | | each file's usage against its limit (and soul.md with conventions.md); entries left out |
| show | | the memory block a new session would get now |
| search | arg: query; args: {"k": 1..50} | what is remembered, identity entries included |
| add | args: {"file": "memory"/"user", "text"} | the owner's own identity write, journalled as the owner |
| remove | args: {"file", "old"} | the owner removes the entry holding `old` (it moves to notes.md) |
| replace | args: {"file", "old", "text"} | the owner replaces that entry with `text` (every check) |
| note | arg: text | the owner's own note |
| tiers | args: {"untrusted", "offset", "limit"} | identity entries and a page of notes with recall counts |
| withdraw | args: {"items", "archives", "sessions", "reason", "supersedes"} | a withdrawal; its receipt |
| reinstate | arg: withdrawal id; args: {"reason"} | reinstates it (same scope, superseding it) |
| controls | | every withdrawal control with its state (in-force, reinstated, superseded, conflicting) |
| note | args: {"kind", "subject", "confidence", "scope"} | the optional capture fields of a note |
| items | args: {"all", "kind", "status", "subject"} | the item store (erased items only with all) |
| item | arg: item id | one item, every seed 003 section 9 field |
| supersede | args: {"old", "new"} | `itemops.supersede` as the owner |
| item-status | arg: item id; args: {"status"} | `itemops.set_status` as the owner |
| archive | | runs the archive now (seed 003 section 13) and says what it appended |
| export | arg: absolute path; args: {"omit_withdrawn": bool} | writes a bundle there (`bundle`) |
| import | arg: absolute path; args: {"trusted": bool} | validates it whole, then imports it, or refuses |
| replay | arg: absolute path of a new or empty folder | rebuilds the files there from the journal |
| erase-plan | args: {"items", "sessions", "texts", "reserve", "held"} | what an erasure would change |
| erase | args: items, sessions, texts, authority, erasure_id, decided_at, holders, held | the tombstone |
| erasures | | the erasure tombstones (memory/erasures.jsonl) |
| proposals | args: {"all": bool} | pending proposals (all with `all`), refs and eligibility (`proposals`) |
| proposal-accept, proposal-reject | arg: proposal id; args: {"untrusted_ok"} | the decision |
| reconcile | arg: subject; args: {"keep"} | `itemops.reconcile` as the owner (seed 003 15.2.1) |
| review | | the cleanup plan (`plan`); changes nothing (seed 003 section 16) |
| feedback | args: retrieval, verdict, items, role, confidence, outcome, decision, evidence | owner event |
| feedback-of | arg: item id | the item's feedback events |
| warm | arg: item id | undoes autodream's `cool` (`itemops.warm` as the owner) |
| dream-show | arg: a pass's session ("" = every staged pass) | staged autodream passes (`dream`) |
| dream-apply, dream-discard | arg: a pass's session | applies each staged action (all checks) or closes it |
| repair | args: {"yes": bool} | what the journal restores of the damage found; with yes, restores it |
| mcp-clients | | the MCP clients seen or configured, with the owner's trust and their sessions (`mcp`) |
| verify | args: {"head": chain value} | the journal's hash chain and the files against its replay |

`text` is printed by bxctl as is (every entry in it escaped, `proto.escape`); `data` is what
``--json`` prints. A refused owner command still answers `memory_admin_reply`, with ``data.code``
saying ``refused:<reason>``; a command that meets a full disk answers ``refused:disk-full`` (the
journal has undone its commit).
"""

from __future__ import annotations

import logging

from boxmaker.memoryd.admin import bundle, dream, edits, erase, items, mcp, repair, review, status, withdrawal
from boxmaker.memoryd.admin.command import Command
from boxmaker.memoryd.memory import Memory
from boxmaker.memoryd.sentences.damage import DISK_FULL
from boxmaker.proto import fsio
from boxmaker.proto.errors import InvalidBody
from boxmaker.proto.messages import MemoryAdmin, MemoryAdminReply

LOG = logging.getLogger("boxmaker.memoryd")

_FAMILIES = (status, edits, items, withdrawal, bundle, erase, review, dream, repair, mcp)

#: Every owner command by name (each declared with its arguments by its family module).
COMMANDS: dict[str, Command] = {command.name: command for family in _FAMILIES for command in family.COMMANDS}


def handle(memory: Memory, request: MemoryAdmin) -> MemoryAdminReply:
    """Run one owner command.

    Raises:
        InvalidBody: for an unknown command or a malformed argument (an `error` reply naming it).
    """
    command = COMMANDS.get(request.command)
    if command is None:
        known = ", ".join(sorted(COMMANDS))
        raise InvalidBody("memory_admin", f"unknown command {request.command!r}; known: {known}")
    unknown = sorted(set(request.args) - command.args)
    if unknown:
        raise InvalidBody("memory_admin", f"{request.command} takes no argument {unknown[0]!r}")
    if request.arg and not command.takes_arg:
        raise InvalidBody("memory_admin", f"{request.command} takes no arg, not {request.arg[:40]!r}")
    try:
        return command.run(memory, request)
    except OSError as exc:
        if not fsio.disk_full(exc):
            raise
        LOG.error("disk-full: the owner's %s was refused: %s", request.command, exc)
        return MemoryAdminReply(DISK_FULL.sentence, {"code": DISK_FULL.code})
