"""memoryd's start-up check: what it owns under memory/, checked at every start, the damage named in
one sentence with its runbook entry (``memory-damaged``) and what repairs it (DESIGN 7;
`proto.startcheck`).

`check` runs every function of `CHECKS` in order over one `State` (memory/, the journal, the last
checkpoint and the journal lines written since it) and returns what they found, most important first.
It runs after the journal has completed an interrupted commit (`Journal.open`), so what a crash can
leave is not damage; damage is what the journal says memoryd wrote and the files no longer hold.

The checks, and what each costs (the history before the checkpoint is never read again):

| check | finds |
|---|---|
| `content.erasure` | an erasure a crash interrupted (some files scrubbed, no tombstone) |
| `content.marks` | a file shorter than at the checkpoint, or changed before it (the window's hash) |
| `content.journal` | a journal line since the checkpoint that is not a journal line |
| `content.chained` | the first line since the checkpoint the hash chain rejects (`files.chain`) |
| `content.appends` | an append since the checkpoint (``appended``) its file no longer holds |
| `content.tails` | bytes after the last append in a file only memoryd writes (items.jsonl, …) |
| `content.identity` | soul.md, memory.md, user.md or conventions.md unreadable, not UTF-8, or with NUL |

Where later checks go: the checks of ownership, modes and symbolic links (the security issue) are more
functions of the same shape (`Check`), placed first in `CHECKS` (a file memoryd does not own or that is
a link is named before its content is read), each returning `Finding`s with their runbook entry.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from boxmaker.memoryd.files.chain import Checked
from boxmaker.memoryd.files.journal import Journal
from boxmaker.memoryd.startcheck import content
from boxmaker.memoryd.startcheck.content import State
from boxmaker.proto.startcheck import Finding

Check = Callable[[State], list[Finding]]

#: Every check, in the order they run (see the module docstring for where new ones go).
CHECKS: tuple[Check, ...] = (
    content.erasure,
    content.marks,
    content.journal,
    content.chained,
    content.appends,
    content.tails,
    content.identity,
)


def check(memory_dir: Path, journal: Journal) -> list[Finding]:
    """What is damaged in memory/ now ([] when nothing is), each a `Finding` naming its file.

    Reads the last checkpoint and what was written since; never changes a file.
    """
    return check_chain(memory_dir, journal)[0]


def check_chain(memory_dir: Path, journal: Journal) -> tuple[list[Finding], Checked]:
    """`check`, and what it did with the journal's hash chain (the lines since the checkpoint, the
    head, the first problem), for the log and ``bxctl status``."""
    state = State.read(memory_dir, journal)
    if state.interrupted is not None:  # files were scrubbed in place: the rest would be misread
        return content.erasure(state), state.checked
    found: list[Finding] = []
    for run in CHECKS:
        found += run(state)
    return found, state.checked
