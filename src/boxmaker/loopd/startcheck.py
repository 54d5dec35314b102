"""loopd's start-up check: the session logs it owns under ``sessions/``, checked at every start, the
damage named in one sentence with its runbook entry (``session-damaged``) (DESIGN 7;
`proto.startcheck`).

| check | finds |
|---|---|
| `logs` | a session log (``sessions/<id>/N.jsonl``) changed since the checkpoint with a complete line |
| | that is not a record, or whose first record is not `session_start` |

A torn last line is not damage: it is what a crash in the middle of a write leaves, and it is set
aside (``N.jsonl.torn``) when the session opens; a half record is never read. The checkpoint
(``sessions/.checkpoint.json``) records when it was taken: only the logs written since are read. It is
taken after a clean check and at a clean stop, never while damage stands.

Where later checks go: the checks of ownership, modes and symbolic links (the security issue) are more
functions of the same shape in `CHECKS`, placed first, each returning `Finding`s with their runbook
entry.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from boxmaker.proto.ids import is_session_id
from boxmaker.proto.records import RecordError, SessionStart, read_log
from boxmaker.proto.startcheck import Checkpoint, Finding, changed_since

CHECKPOINT = ".checkpoint.json"
RUNBOOK = "session-damaged"
_REPAIR = "that session refuses turns; start a new one, or restore the file from a backup"


@dataclass(frozen=True, slots=True)
class State:
    """What the checks read: sessions/ and the last checkpoint (None: every log is read)."""

    folder: Path
    checkpoint: Checkpoint | None

    def since(self, path: Path) -> bool:
        """True when `path` changed since the checkpoint (or there is none)."""
        return changed_since(self.checkpoint, path)


def logs(state: State) -> list[Finding]:
    """Session logs changed since the checkpoint: every complete line a record, the first
    `session_start`."""
    found = []
    for session in sorted(os.listdir(state.folder)) if state.folder.is_dir() else []:
        folder = state.folder / session
        if not is_session_id(session) or not folder.is_dir():
            continue
        for path in sorted(folder.glob("*.jsonl")):
            if not path.stem.isdigit() or not state.since(path):
                continue
            why = _damage(path)
            if why:
                found.append(Finding(f"sessions/{session}/{path.name} {why}", RUNBOOK, _REPAIR, str(path)))
    return found


def _damage(path: Path) -> str:
    """How a session log is damaged ("" when it is not)."""
    try:
        records, _ = read_log(path)
    except RecordError as exc:
        return f"has a line that is not a record (line {exc.line}: {exc.why})"
    except OSError as exc:
        return f"cannot be read ({exc.strerror or exc})"
    if records and not isinstance(records[0], SessionStart):
        return "does not start with session_start"
    return ""


Check = Callable[[State], list[Finding]]

#: Every check, in the order they run (see the module docstring for where new ones go).
CHECKS: tuple[Check, ...] = (logs,)


def check(folder: Path) -> list[Finding]:
    """What is damaged in sessions/ now ([] when nothing is); never changes a file."""
    state = State(folder, Checkpoint.load(folder / CHECKPOINT))
    found: list[Finding] = []
    for run in CHECKS:
        found += run(state)
    return found


def take(folder: Path) -> None:
    """Write sessions/'s checkpoint (the moment; no file marks).

    Raises:
        OSError: when it cannot be written.
    """
    Checkpoint.of(folder, [], {"pid": os.getpid()}).save(folder / CHECKPOINT)
