"""``memory/controls.jsonl``, read and cached (seed 003 section 12.2): its `records.WithdrawalRecord`s,
their resolved chains and the `exclusion.Exclusion` they give; appends go through the journal
(`receipts.Withdrawals`), never through this module.
"""

from __future__ import annotations

import datetime as dt
import logging
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TypeAlias

import msgspec

from boxmaker.memoryd.files.entries import IDENTITY_FILES, normalise_newlines
from boxmaker.memoryd.files.journal import Journal, read_jsonl
from boxmaker.memoryd.files.names import CONTROLS_FILE, ITEMS_FILE
from boxmaker.memoryd.files.notes import Note
from boxmaker.memoryd.files.notes import parse as parse_notes
from boxmaker.memoryd.files.store import Store
from boxmaker.memoryd.items.store import Item, fold, read_events
from boxmaker.memoryd.withdrawal.exclusion import Exclusion, from_chains, withdrawn_by, withdrawn_entries
from boxmaker.memoryd.withdrawal.records import (
    Chain,
    WithdrawalRecord,
    decode,
    next_number,
    resolve,
    withdrawal_id,
)
from boxmaker.proto import fsio

log = logging.getLogger("boxmaker.memoryd.controls")

Stat: TypeAlias = tuple[int, int] | None


@dataclass(frozen=True, slots=True)
class Loaded:
    """controls.jsonl read: its records (file order), lines it could not use, and the chains."""

    records: tuple[WithdrawalRecord, ...]
    damaged: tuple[int, ...]
    chains: tuple[Chain, ...]


class Controls:
    """``memory/controls.jsonl`` and the exclusion it gives, cached by the stat of the files it reads
    (controls.jsonl, items.jsonl, notes.md). Thread-safe. Appends go through the journal
    (`receipts.Withdrawals`), never through this class.

    Args:
        memory_dir: the home's ``memory/`` folder.
        items: the home's item store (`live.ItemStore.items`), so a change does not fold the log again;
            None: items.jsonl is read and folded when asked (a folder memoryd does not serve).
    """

    def __init__(self, memory_dir: Path, items: Callable[[], Mapping[str, Item]] | None = None) -> None:
        self.memory_dir = memory_dir
        self._items = items
        self.path = memory_dir / CONTROLS_FILE
        self._lock = threading.Lock()
        self._loaded: tuple[Stat, Loaded] | None = None
        self._exclusion: tuple[tuple[Stat, Stat, Stat], Exclusion] | None = None

    def load(self) -> Loaded:
        """The records and their chains (a line that is not a record is skipped, logged and
        reported in `Loaded.damaged`).

        Raises:
            OSError: when the file exists but cannot be read.
        """
        with self._lock:
            stat = _stat(self.path)
            if self._loaded is None or self._loaded[0] != stat:
                self._loaded = (stat, _read(self.path))
            return self._loaded[1]

    def records(self) -> list[WithdrawalRecord]:
        """Every record, in file order."""
        return list(self.load().records)

    def chains(self) -> list[Chain]:
        """Every scope's chain, resolved."""
        return list(self.load().chains)

    def next_id(self, day: dt.date) -> str:
        """The id the next control event of `day` gets (survives restarts: counted over the file)."""
        return withdrawal_id(day, next_number(self.load().records, day))

    def items(self) -> Mapping[str, Item]:
        """The item store's fold (items.jsonl; empty when it does not exist)."""
        if self._items is not None:
            return self._items()
        return fold(read_events(self.memory_dir / ITEMS_FILE))

    def notes(self) -> list[Note]:
        """notes.md's entries (none when it does not exist or is not UTF-8)."""
        try:
            data = fsio.read_bytes(self.memory_dir / "notes.md")
        except FileNotFoundError:
            return []
        return parse_notes(normalise_newlines(data.decode("utf-8", errors="replace")))

    def withdrawn_by(self) -> dict[str, list[str]]:
        """Each withdrawn item's id and the control events in force on it (`withdrawn_by`).

        Raises:
            OSError: when controls.jsonl or items.jsonl exists but cannot be read.
        """
        loaded = self.load()
        if not loaded.records:
            return {}
        return withdrawn_by(loaded.chains, self.items(), self.notes())

    def exclusion(self) -> Exclusion:
        """What is excluded right now (an empty `Exclusion` when nothing is withdrawn).

        Raises:
            OSError: when controls.jsonl or items.jsonl exists but cannot be read.
        """
        loaded = self.load()
        stats = (
            _stat(self.path),
            _stat(self.memory_dir / ITEMS_FILE),
            _stat(self.memory_dir / "notes.md"),
        )
        with self._lock:
            if self._exclusion is not None and self._exclusion[0] == stats:
                return self._exclusion[1]
        found = from_chains(loaded.chains, self.items(), self.notes()) if loaded.records else Exclusion()
        with self._lock:
            self._exclusion = (stats, found)
        return found


def _read(path: Path) -> Loaded:
    records: list[WithdrawalRecord] = []
    damaged: list[int] = []
    for number, line in enumerate(read_jsonl(path, ("withdrawal_id",)), start=1):
        try:
            records.append(decode(line))
        except msgspec.ValidationError as exc:
            log.warning("skipping control %d of %s: %s", number, path, exc)
            damaged.append(number)
    return Loaded(tuple(records), tuple(damaged), tuple(resolve(records)))


def _stat(path: Path) -> Stat:
    try:
        info = path.stat()
    except FileNotFoundError:
        return None
    return info.st_size, info.st_mtime_ns


def withdrawn_identity(
    controls: Controls, store: Store, journal: Journal, files: dict[str, tuple[str, ...]] | None = None
) -> frozenset[tuple[str, str]]:
    """The identity entries (file name, text) withdrawn now (`exclusion.withdrawn_entries`): `files`
    are the identity files' entries by name, read from `store` when not given; the journal is read only
    when something is withdrawn.

    Raises:
        OSError, FileUnreadable: a file cannot be read.
    """
    excluded = controls.exclusion()
    if not excluded:
        return frozenset()
    if files is None:
        files = {s.name: store.read_identity(s).entries for s in IDENTITY_FILES.values()}
    return frozenset(withdrawn_entries(excluded, dict(files), journal.entries_newest_first()))
