"""memoryd's checkpoint of its last good state (``memory/.checkpoint.json``), which makes the start-up
check incremental (`boxmaker.memoryd.startcheck`; `proto.startcheck.Checkpoint`).

A checkpoint marks every append-only file memoryd owns (`APPEND_ONLY`) and every journal month file
(size and the hash of their last bytes), and records where the journal stood (its newest file and
size, and the chain value of its newest line: the start-up check follows the chain on from it). Every
journal line since records where its appends landed (``appended``), so the next start verifies only
what was written since. `Checkpoints` takes one after a clean start-up check, after
every `EVERY` commits, after an erasure (which rewrites files and the journal in place), after a
repair, and at a clean stop; never while damage found at start stands (so the next start finds it
again), and always under the write lock (the files agree with the journal at that moment).

An erasure scrubs files in place before its tombstone is committed; ``memory/.erasing.json`` marks one
in progress, so a crash in the middle is named at the next start instead of read as damage.
"""

from __future__ import annotations

import contextlib
import json
import logging
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from boxmaker.memoryd.files.chain import Checked
from boxmaker.memoryd.files.journal import Journal
from boxmaker.memoryd.files.names import (
    CHECKPOINT,
    CONTROLS_FILE,
    EDITS_DIR,
    ERASING,
    ERASURES_FILE,
    FEEDBACK_FILE,
    ITEMS_FILE,
    NOTES_FILE,
    PROPOSALS_FILE,
)
from boxmaker.proto import fsio
from boxmaker.proto.startcheck import Checkpoint, Finding

log = logging.getLogger("boxmaker.memoryd.checkpoint")

#: The append-only files memoryd writes through the journal, whose appends the check verifies.
APPEND_ONLY = (NOTES_FILE, ITEMS_FILE, CONTROLS_FILE, PROPOSALS_FILE, FEEDBACK_FILE, ERASURES_FILE)
#: A checkpoint is taken after this many commits (and at the moments the module docstring names).
EVERY = 256


def journal_files(memory_dir: Path) -> list[str]:
    """The journal's month files, oldest first, relative to memory/ (``edits/YYYY-MM.jsonl``)."""
    folder = memory_dir / EDITS_DIR
    return [f"{EDITS_DIR}/{p.name}" for p in sorted(folder.glob("*.jsonl"))] if folder.is_dir() else []


def load(memory_dir: Path) -> Checkpoint | None:
    """The last checkpoint, or None (none taken yet, or unreadable: the check starts from the
    beginning of the journal)."""
    return Checkpoint.load(memory_dir / CHECKPOINT)


def erasing(memory_dir: Path) -> str | None:
    """The id of an erasure a crash interrupted (its marker is still there), else None."""
    try:
        data = json.loads((memory_dir / ERASING).read_bytes())
    except FileNotFoundError:
        return None
    except (OSError, ValueError):
        return "?"
    return str(data.get("erasure_id", "?")) if isinstance(data, dict) else "?"


class Checkpoints:
    """Takes memoryd's checkpoints, and holds what the start-up check found (`findings`).

    Args:
        memory_dir: memory/.
        journal: the edit journal (its listener counts commits: `after_commit`).
        lock: the write lock every change of memory/ holds.
    """

    def __init__(self, memory_dir: Path, journal: Journal, lock: threading.Lock) -> None:
        self.memory_dir = memory_dir
        self.journal = journal
        self.lock = lock
        #: What the last check found (start-up, or a repair's); no checkpoint is taken while any stand.
        self.findings: list[Finding] = []
        #: True once the start-up check has run: no checkpoint is taken before (a start that failed).
        self.checked = False
        self._commits = 0
        #: What the start-up check did with the journal's hash chain (None before it ran).
        self.chain: Checked | None = None

    def take(self) -> bool:
        """Write a checkpoint of the files as they are now (the caller holds the write lock), unless
        damage stands or before the start-up check ran. Returns True when one was written; a failure
        (a full disk) is logged."""
        if self.findings or not self.checked:
            return False
        self._commits = 0  # tried: the next try is `EVERY` commits on, whatever happens here
        files = journal_files(self.memory_dir)
        newest = files[-1] if files else ""
        size = (self.memory_dir / newest).stat().st_size if newest else 0
        positions: dict[str, Any] = {"journal": {"file": newest, "size": size, "chain": self.journal.head}}
        checkpoint = Checkpoint.of(self.memory_dir, [*APPEND_ONLY, *files], positions)
        try:
            checkpoint.save(self.memory_dir / CHECKPOINT)
        except OSError as exc:
            log.error("cannot write the checkpoint %s (the next start checks more): %s", CHECKPOINT, exc)
            return False
        return True

    def checked_now(self, findings: list[Finding]) -> None:
        """Record what a check found now; when nothing, take a checkpoint (the caller holds the write
        lock, or nothing else writes yet: the start)."""
        self.findings, self.checked = findings, True
        self.take()

    def take_locked(self, wait: float = 2.0) -> bool:
        """`take` under the write lock, waiting at most `wait` seconds for it (a clean stop)."""
        if not self.lock.acquire(timeout=wait):
            return False
        try:
            return self.take()
        finally:
            self.lock.release()

    def after_commit(self, line: dict[str, Any]) -> None:
        """The journal's listener: a checkpoint after an erasure, a repair, and every `EVERY` commits."""
        self._commits += 1
        if line.get("action") in ("erase", "repair") or self._commits >= EVERY:
            self.take()

    @contextlib.contextmanager
    def erasing(self, erasure_id: str) -> Iterator[None]:
        """Mark an erasure in progress (the caller holds the write lock) while it scrubs files in
        place; the marker goes, and a checkpoint is taken, once it is committed (`after_commit`). A
        crash inside leaves the marker for the next start-up check."""
        marker = self.memory_dir / ERASING
        fsio.atomic_write(marker, json.dumps({"erasure_id": erasure_id}).encode("ascii"))
        yield
        marker.unlink(missing_ok=True)
        fsio.fsync_dir(self.memory_dir)
        self.take()
