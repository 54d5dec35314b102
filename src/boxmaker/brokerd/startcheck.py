"""brokerd's start-up check: what it owns under ``broker/``, checked at every start, the damage named in
one sentence with its runbook entry (``broker-damaged``) (DESIGN 7; `proto.startcheck`).

| check | finds |
|---|---|
| `labels` | a label file (``sessions/<id>.json``) changed since the checkpoint that is not a label |
| `audit` | an audit line (``audit/YYYY-MM.jsonl``) since the checkpoint that is not a record; a month |
| | file changed before its mark |

A label file that is not a label makes its session count as secret and untrusted (brokerd fails
closed); the check names it at start instead of at the session's next call.

The checkpoint (``broker/.checkpoint.json``, `proto.startcheck.Checkpoint`) marks each audit month
file and records when it was taken; a label file is read again only when it changed since. It is
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

from boxmaker.proto.startcheck import Checkpoint, Finding, changed_since, json_object, lines_since

CHECKPOINT = ".checkpoint.json"
RUNBOOK = "broker-damaged"


@dataclass(frozen=True, slots=True)
class State:
    """What the checks read: broker/ and the last checkpoint (None: everything is read)."""

    folder: Path
    checkpoint: Checkpoint | None

    def since(self, path: Path) -> bool:
        """True when `path` changed since the checkpoint (or there is none)."""
        return changed_since(self.checkpoint, path)


def labels(state: State) -> list[Finding]:
    """Label files changed since the checkpoint that are not a label."""
    found = []
    folder = state.folder / "sessions"
    for path in sorted(folder.glob("*.json")) if folder.is_dir() else []:
        if not state.since(path):
            continue
        try:
            data = json_object(path.read_bytes())
        except OSError as exc:
            data, why = None, f"cannot be read ({exc.strerror})"
        else:
            why = "is not a session label"
        if (
            data is None
            or data.get("class") not in ("public", "private", "secret")
            or not isinstance(data.get("untrusted"), bool)
        ):
            what = f"broker/sessions/{path.name} {why}: session {path.stem} counts as secret and untrusted"
            found.append(Finding(what, RUNBOOK, "start a new session for new work", f"sessions/{path.name}"))
    return found


def audit(state: State) -> list[Finding]:
    """Audit month files changed before their mark, and lines since the checkpoint that are not records."""
    found = []
    marks = state.checkpoint.files if state.checkpoint is not None else {}
    for name, how in state.checkpoint.changes(state.folder) if state.checkpoint is not None else []:
        found.append(Finding(f"broker/{name} {how}", RUNBOOK, _KEEP, name))
    folder = state.folder / "audit"
    for path in sorted(folder.glob("*.jsonl")) if folder.is_dir() else []:
        name = f"audit/{path.name}"
        offset = int(marks.get(name, {}).get("size", 0))
        for at, raw in lines_since(path, offset):
            if json_object(raw) is None:
                what = f"the line at byte {at:,} of broker/{name} is not a record"
                found.append(Finding(what, RUNBOOK, _KEEP, name))
                break
    return found


_KEEP = "keep the audit log as it is (evidence; an unreadable line is skipped when it is read)"

Check = Callable[[State], list[Finding]]

#: Every check, in the order they run (see the module docstring for where new ones go).
CHECKS: tuple[Check, ...] = (labels, audit)


def check(folder: Path) -> list[Finding]:
    """What is damaged in broker/ now ([] when nothing is); never changes a file."""
    state = State(folder, Checkpoint.load(folder / CHECKPOINT))
    found: list[Finding] = []
    for run in CHECKS:
        found += run(state)
    return found


def take(folder: Path) -> None:
    """Write broker/'s checkpoint as the files are now (a failure is left to the caller to log).

    Raises:
        OSError: when it cannot be written.
    """
    logs = folder / "audit"
    audits = sorted(f"audit/{p.name}" for p in logs.glob("*.jsonl")) if logs.is_dir() else []
    Checkpoint.of(folder, audits, {"pid": os.getpid()}).save(folder / CHECKPOINT)
