"""``bxctl memory repair``: restore what the start-up check found damaged from the journal (DESIGN 7;
docs/runbook.md ``memory-damaged``).

`plan` checks memory/ again (`startcheck.check`), replays the whole journal into a scratch folder
(``memory/.repair``, removed after; `items.replay`) and, for each damaged file the journal holds
(`content.REPAIRABLE`: notes.md, items.jsonl, controls.jsonl, proposals.jsonl, feedback.jsonl,
erasures.jsonl, memory.md, user.md, conventions.md), says what restoring the replayed copy would change:
the bytes, and the notes, lines or entries it puts back and drops. It changes nothing. The journal
itself, soul.md and an interrupted erasure are named with what the owner does instead.

`apply` restores each planned file as one journal commit (action ``repair``, the owner's, with
``restored``: the sizes and counts), the file replaced as an identity edit is (the intent holds its
text before and after, so a crash in the middle completes at the next start). A ``repair`` line
carries no ``notes`` or ``events`` of its own (a restored identity file's ``after`` is the text the
journal already left there), so a replay of the journal is unchanged by it; ``undo`` passes over it
(`write.writer`). Afterwards the check runs again and, when nothing is
damaged, a checkpoint is taken.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from boxmaker.memoryd.files.checkpoint import Checkpoints
from boxmaker.memoryd.files.entries import BY_NAME, CONVENTIONS, normalise_newlines, parse_entries
from boxmaker.memoryd.files.journal import Change, Journal, Rewrite
from boxmaker.memoryd.files.names import NOTES_FILE, REPAIR_DIR
from boxmaker.memoryd.files.notes import parse as parse_notes
from boxmaker.memoryd.items.replay import ExclusionFor, replay
from boxmaker.memoryd.sentences import damage
from boxmaker.memoryd.startcheck import check
from boxmaker.memoryd.startcheck.content import REPAIRABLE
from boxmaker.proto.ids import OWNER_SESSION
from boxmaker.proto.startcheck import Finding


@dataclass(frozen=True, slots=True)
class Restore:
    """One file `apply` would restore: its bytes now and the journal's copy, and what changes."""

    file: str
    current: bytes
    restored: bytes
    added: int
    dropped: int
    unit: str

    @property
    def sentence(self) -> str:
        """The plan's line for it."""
        sizes = (len(self.current), len(self.restored))
        return damage.repair_plan(self.file, sizes, self.added, self.dropped, self.unit)


@dataclass(frozen=True, slots=True)
class Plan:
    """What a repair would do: the files it restores, and the findings it leaves to the owner."""

    findings: tuple[Finding, ...]
    restores: tuple[Restore, ...]
    others: tuple[str, ...]

    @property
    def lines(self) -> list[str]:
        """The plan as bxctl prints it."""
        if not self.findings:
            return [damage.NOTHING_TO_REPAIR]
        lines = [f"found: {f.sentence}" for f in self.findings]
        return lines + [r.sentence for r in self.restores] + list(self.others)

    def data(self) -> dict[str, Any]:
        """The plan as ``--json`` prints it."""
        return {
            "damage": [{"file": f.file, "text": f.sentence} for f in self.findings],
            "restore": [
                {
                    "file": r.file,
                    "bytes": len(r.current),
                    "restored_bytes": len(r.restored),
                    "put_back": r.added,
                    "dropped": r.dropped,
                    "unit": r.unit,
                }
                for r in self.restores
            ],
            "not_restored": list(self.others),
        }


def plan(memory_dir: Path, journal: Journal, exclusion_for: ExclusionFor) -> Plan:
    """What a repair would restore now (the caller holds the write lock); changes no file of memory/.

    Raises:
        OSError: when the scratch folder cannot be written.
    """
    findings = check(memory_dir, journal)
    wanted = sorted({f.file for f in findings if f.file in REPAIRABLE})
    left = {f.file: f.repair for f in findings if f.file not in REPAIRABLE}
    others = tuple(damage.not_repairable(file, repair) for file, repair in left.items())
    if not wanted:
        return Plan(tuple(findings), (), others)
    scratch = memory_dir / REPAIR_DIR
    shutil.rmtree(scratch, ignore_errors=True)
    try:
        replay(reversed(list(journal.entries_newest_first())), scratch, exclusion_for)
        restores = tuple(_restore(name, memory_dir / name, scratch / name) for name in wanted)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return Plan(tuple(findings), restores, others)


def _restore(name: str, current_path: Path, replayed: Path) -> Restore:
    try:
        current = current_path.read_bytes()
    except OSError:
        current = b""
    restored = replayed.read_bytes() if replayed.exists() else b""
    counted, unit = _units(name)
    now, then = counted(current), counted(restored)
    return Restore(name, current, restored, len(then - now), len(now - then), unit)


def _units(name: str) -> tuple[Callable[[bytes], set[str]], str]:
    """How a file's content is counted in the plan: notes (header and text), entries, or lines."""
    if name == NOTES_FILE:
        return lambda data: {f"{n.key}\n{n.text}" for n in parse_notes(_text(data))}, "note"
    if name in BY_NAME or name == CONVENTIONS.name:
        return lambda data: set(parse_entries(_text(data))), "entry"
    return lambda data: {
        line.decode("utf-8", "replace") for line in data.split(b"\n") if line.strip()
    }, "line"


def _text(data: bytes) -> str:
    return normalise_newlines(data.decode("utf-8", errors="replace"))


def apply(chosen: Plan, journal: Journal, checkpoints: Checkpoints) -> list[Finding]:
    """Restore every file of `chosen` (the caller holds the write lock and made `chosen` under it),
    each as one journalled commit; then check again. Returns what the new check finds ([] when the
    repair left nothing damaged, and a checkpoint was taken).

    Raises:
        OSError: when a file cannot be written (the journal undoes that file's commit).
    """
    for restore in chosen.restores:
        after = restore.restored.decode("utf-8", errors="replace")
        identity = restore.file in BY_NAME or restore.file == CONVENTIONS.name
        entry = {
            "session": OWNER_SESSION,
            "call": "",
            "untrusted": False,
            "action": "repair",
            "file": restore.file,
            "where": restore.file,
            "before": [],
            "after": list(parse_entries(normalise_newlines(after))) if identity else [],
            "restored": {
                "bytes": len(restore.current),
                "restored_bytes": len(restore.restored),
                "put_back": restore.added,
                "dropped": restore.dropped,
                "unit": restore.unit,
            },
        }
        before = restore.current.decode("utf-8", errors="replace")
        journal.commit(Change(entry, rewrite=Rewrite(restore.file, before, after)))
    found = check(journal.memory_dir, journal)
    checkpoints.checked_now(found)
    return found
