"""The item store kept in memory: ``memory/items.jsonl`` folded once, then followed (seed 003 sections
7.2 and 9; issue 16).

memoryd is the log's single writer (the home's lock), so the fold (`Fold`) is read from the file once
and then extended with the lines memoryd appends, read back from the file itself after each commit:
the fold is never ahead of the disk (it holds only complete lines found on disk, and is not extended
while a commit's intent file exists: the commit is not done) and never behind it (every read checks the
file first). Writes therefore cost the same on day 1 and in year 5.

Each read compares the file's identity (device, inode, size, mtime) with what the fold last read:

- the same: the fold is current;
- the same file, longer, and the bytes before the old end unchanged: the new complete lines are
  folded (memoryd's own append: `ItemStore.follow`, which the journal's listener calls after every
  commit, and any reader that comes first);
- anything else (another inode: erasure's rewrite or a replacement by hand; shorter; rewritten in
  place): the whole file is folded again (`ItemStore.refold`).

While a commit's intent (``memory/.intent.json``) exists, readers keep the fold they have: a commit
that fails leaves the fold equal to the file as it was before it, until the next start completes it.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import os
import threading
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import msgspec

from boxmaker.memoryd.files.journal import read_jsonl
from boxmaker.memoryd.files.names import INTENT, ITEMS_FILE
from boxmaker.memoryd.items.store import Item, apply_event, item_id
from boxmaker.proto.fsio import complete_lines

log = logging.getLogger("boxmaker.memoryd.items")

#: How many bytes before the folded end are compared when the file grows (a rewrite in place that
#: changed them is folded again from the start).
GUARD_BYTES = 64
#: The log is read this many bytes at a time.
READ_BYTES = 1 << 20

Identity = tuple[int, int, int, int] | None
#: One item changed by an event: (before, after); before is None for a capture.
Change = tuple[Item | None, Item]
#: Told of each change (`ItemStore.listeners`): the items changed, or None after a whole refold.
Listener = Callable[[list[Change] | None], None]


#: The events that name the items they change, and where.
_NAMED = ("id", "old", "new")
_LISTS = ("ids", "members")


class Fold:
    """An item log's fold, kept up to date one event at a time, with the lookups memoryd makes per
    request (seed 003 section 9): by notes.md key, the active state items of a subject, the highest
    ordinal of each day (the next id), each item's capture position. Not thread-safe: one writer
    applies events (`ItemStore` serialises them); readers use `items` and the lookups, whose values
    are replaced, never changed in place.

    Attributes:
        items: every item by id, in capture order (erased ones included).
        events: how many events have been offered (good and bad).
    """

    def __init__(self) -> None:
        self.items: dict[str, Item] = {}
        self.events = 0
        self._order: dict[str, int] | None = None  # made when first asked (`position`)
        self._by_note: list[str | None] = []  # item id by the position in its notes.md key
        self._subjects: dict[str, tuple[str, ...]] = {}
        self._highest: dict[str, int] = {}

    def apply(self, event: dict[str, Any]) -> list[Change]:
        """Apply one event; returns each item it changed as (before, after), before None for a
        capture ([] for an event that does not fit, which is skipped with a log line naming it: the
        fold never raises)."""
        self.events += 1
        self._count(event)
        before = (
            {}
            if event.get("event") == "capture"
            else {i: self.items[i] for i in _named(event) if i in self.items}
        )
        try:
            changed = apply_event(self.items, event)
        except (KeyError, TypeError, ValueError, msgspec.ValidationError) as exc:
            log.warning("skipping event %d of the item log (%s): %s", self.events, event.get("event"), exc)
            return []
        pairs = [(before.get(ident), self.items[ident]) for ident in changed]
        for old, new in pairs:
            self._index(old, new)
        return pairs

    def _count(self, event: dict[str, Any]) -> None:
        ident = event.get("id")
        if event.get("event") != "capture" or not isinstance(ident, str) or not ident.startswith("mem-"):
            return
        day, tail = ident[4:14], ident[15:]
        if ident[14:15] == "-" and tail.isascii() and tail.isdigit():
            self._highest[day] = max(self._highest.get(day, 0), int(tail))

    def _index(self, old: Item | None, new: Item) -> None:
        if old is None:
            if self._order is not None:
                self._order[new.id] = len(self._order)
            at = _note_position(new.note)
            if at is not None:
                if at >= len(self._by_note):
                    self._by_note += [None] * (at + 1 - len(self._by_note))
                self._by_note[at] = new.id
        was, now = _live_subject(old), _live_subject(new)
        if was == now:
            return
        if was is not None:
            kept = tuple(i for i in self._subjects.get(was, ()) if i != new.id)
            if kept:
                self._subjects[was] = kept
            else:
                self._subjects.pop(was, None)
        if now is not None:
            ids = [*self._subjects.get(now, ()), new.id]
            if old is not None:  # a capture comes last; anything else takes its place in capture order
                ids.sort(key=self.position)
            self._subjects[now] = tuple(ids)

    def next_number(self, day: dt.date) -> int:
        """The ordinal the next item of `day` gets (`next_number` over the events applied)."""
        return self._highest.get(day.isoformat(), 0) + 1

    def by_note(self, key: str) -> Item | None:
        """The item captured with notes.md key `key`, or None."""
        at = _note_position(key)
        ident = self._by_note[at] if at is not None and at < len(self._by_note) else None
        item = None if ident is None else self.items.get(ident)
        return item if item is not None and item.note == key else None

    def position(self, ident: str) -> int:
        """An item's capture position (0 for the first; -1 for an unknown id)."""
        if self._order is None:
            self._order = {found: n for n, found in enumerate(self.items)}
        return self._order.get(ident, -1)

    def active_of(self, subject: str) -> list[Item]:
        """The active, not erased state items of `subject`, in capture order (`active_by_subject`)."""
        return [self.items[i] for i in self._subjects.get(subject, ())]


def _note_position(key: str) -> int | None:
    """The position in a notes.md key ``note/<position>/<time>``, or None."""
    parts = key.split("/", 2)
    if len(parts) == 3 and parts[0] == "note" and parts[1].isascii() and parts[1].isdigit():
        return int(parts[1])
    return None


def _named(event: dict[str, Any]) -> list[str]:
    found = [event.get(key) for key in _NAMED]
    for key in _LISTS:
        values = event.get(key)
        if isinstance(values, list):
            found += values
    return [value for value in found if isinstance(value, str)]


def _live_subject(item: Item | None) -> str | None:
    """The subject `item` counts under in `Fold.active_of`, or None."""
    if item is None or item.kind != "state" or item.status != "active" or item.erased or not item.subject:
        return None
    return item.subject


class ItemStore:
    """``memory/items.jsonl`` folded in memory (module docstring). Thread-safe.

    Appends go through the journal (`journal.Change` appends), never through this class, so a crash
    completes them with the journal line that carries them.

    Args:
        memory_dir: the home's ``memory/`` folder.

    Attributes:
        refolds: how many times the whole file was folded (the first read included).
    """

    def __init__(self, memory_dir: Path) -> None:
        self.memory_dir = memory_dir
        self.path = memory_dir / ITEMS_FILE
        self.refolds = 0
        self._mutex = threading.RLock()
        self._fold = Fold()
        self._seen: Identity = None
        self._read = False
        self._offset = 0
        self._guard = b""
        self._snapshot: dict[str, Item] | None = None
        self._position: tuple[int, Identity] = (0, None)  # `position`, replaced as one value
        #: Told of every change, under the store's mutex (the projections keep their parts up to date).
        self.listeners: list[Listener] = []

    # Keeping up with the file -----------------------------------------------------------------

    def current(self) -> Fold:
        """The fold as the file is now (module docstring). Callers read it and never change it.

        Raises:
            OSError: when the log cannot be read.
        """
        identity = _identity(self.path)
        if self._read and identity == self._seen:
            return self._fold
        with self._mutex:
            if not self._read:
                self._refold()
            elif _identity(self.path) != self._seen and not (self.memory_dir / INTENT).exists():
                self._catch_up()
            return self._fold

    def latest(self) -> Fold:
        """The fold as the file is now, an intent or not: what the writer decides against, inside
        its lock (a failed commit's appends are on disk and are completed at the next start, so the
        next id counts them).

        Raises:
            OSError: when the log cannot be read.
        """
        self.follow()
        return self._fold

    def follow(self, line: dict[str, Any] | None = None) -> None:
        """Fold what memoryd just committed (the journal's listener, after the intent is gone).

        Raises:
            OSError: when the log cannot be read.
        """
        del line
        with self._mutex:
            if not self._read:
                self._refold()
            elif _identity(self.path) != self._seen:
                self._catch_up()

    def refold(self, upto: int | None = None) -> None:
        """Fold the whole file again (erasure, replay, reindex; a file changed underneath); with
        `upto`, only its first `upto` bytes, quietly, so that the next `follow` hands the rest to the
        listeners as changes (the projections' start, `pages.Pages.open`).

        Raises:
            OSError: when the log cannot be read.
        """
        with self._mutex:
            self._refold(upto)

    @property
    def folded(self) -> Fold:
        """The fold as last read, without looking at the file (for the listeners, which run while
        the store is being brought up to date)."""
        return self._fold

    def folded_items(self) -> dict[str, Item]:
        """A copy of the items, the file followed first unless another thread is doing so (then the
        fold as it is: that thread's listeners follow). For callers that may run inside a listener
        while another thread holds the store (the withdrawal controls), so they never wait for it.

        Raises:
            OSError: when the log cannot be read.
        """
        if self._mutex.acquire(blocking=False):
            try:
                return dict(self.items())
            finally:
                self._mutex.release()
        return dict(self._fold.items)

    def position(self) -> tuple[int, Identity]:
        """The bytes of the log folded and the identity of the file they were read from (taken without
        the store's lock, so a listener's caller holding another lock never waits for it)."""
        return self._position

    def _refold(self, upto: int | None = None) -> None:
        fold, offset, guard = Fold(), 0, b""
        try:
            handle = self.path.open("rb")
        except FileNotFoundError:
            identity: Identity = None
        else:
            with handle:
                identity = _of(os.fstat(handle.fileno()))
                limit = identity[2] if upto is None else min(upto, identity[2])
                rest = b""
                while offset + len(rest) < limit:  # in chunks: the file is never held whole
                    chunk = rest + handle.read(min(READ_BYTES, limit - offset - len(rest)))
                    if len(chunk) == len(rest):
                        break
                    used = _fold_lines(fold, chunk)
                    guard = (guard + chunk[:used])[-GUARD_BYTES:]
                    offset, rest = offset + used, chunk[used:]
            if upto is not None and offset == upto and upto < identity[2]:
                identity = (
                    identity[0],
                    identity[1],
                    upto,
                    -1,
                )  # not the file as it is: the next read follows it
        self._fold, self._seen, self._read = fold, identity, True
        self._offset, self._guard = offset, guard
        self._position = (offset, identity)
        self._snapshot = None
        self.refolds += 1
        if upto is None:
            for listener in self.listeners:
                listener(None)

    def _catch_up(self) -> None:
        """Fold the lines appended since the last read, or everything again when the file is not
        the one read, longer."""
        start = self._offset - len(self._guard)
        try:
            with self.path.open("rb") as handle:
                identity = _of(os.fstat(handle.fileno()))
                handle.seek(start)
                data = handle.read()
        except FileNotFoundError:
            identity, data = None, b""
        if identity is None or self._seen is None:
            same = identity is not None and self._offset == 0  # the log appeared: it grew from nothing
        else:  # the same file, longer than when last read, the bytes before its folded end unchanged
            same = identity[:2] == self._seen[:2] and identity[2] > self._seen[2]
        same = same and data[: len(self._guard)] == self._guard
        if not same:
            log.info("%s changed underneath memoryd; folding it again", self.path)
            self._refold()
            return
        tail = data[len(self._guard) :]
        changed: list[Change] = []
        consumed = _fold_lines(self._fold, tail, changed)
        self._offset += consumed
        self._guard = data[max(0, len(self._guard) + consumed - GUARD_BYTES) : len(self._guard) + consumed]
        self._seen = identity
        self._position = (self._offset, identity)
        if changed:
            self._snapshot = None
        for listener in self.listeners:
            listener(changed)

    # Reading ------------------------------------------------------------------------------------

    def items(self) -> Mapping[str, Item]:
        """Every item by id, in capture order (erased items included): a snapshot that later
        changes do not touch (taken once per change; do not modify it).

        Raises:
            OSError: when the log cannot be read.
        """
        fold = self.current()
        with self._mutex:
            if self._snapshot is None or fold is not self._fold:
                self._snapshot = dict(self._fold.items)
            return self._snapshot

    def get(self, ident: str) -> Item | None:
        """One item, or None.

        Raises:
            OSError: when the log cannot be read.
        """
        return self.current().items.get(ident)

    def events(self) -> list[dict[str, Any]]:
        """Every event, oldest first, read from the file (export and review read them; the fold
        keeps none).

        Raises:
            OSError: when the log cannot be read.
        """
        return read_jsonl(self.path, ("event", "time"))

    def next_id(self, day: dt.date, taken: int = 0) -> str:
        """The id the next item captured on `day` gets (the day's highest ordinal plus one); `taken`
        more ids already handed out in the same commit are skipped.

        Raises:
            OSError: when the log cannot be read.
        """
        return item_id(day, self.latest().next_number(day) + taken)


_DECODER = msgspec.json.Decoder()


def _fold_lines(fold: Fold, data: bytes, changed: list[Change] | None = None) -> int:
    """Apply the complete lines of `data` to `fold` (adding the ids they change to `changed`);
    returns the bytes those lines take. A line that is not an event is skipped with a log line."""
    lines, _ = complete_lines(data)
    consumed = 0
    for raw in lines:
        consumed += len(raw) + 1
        if not raw.strip():
            continue
        try:
            event = _DECODER.decode(raw)
        except msgspec.DecodeError:
            try:
                event = json.loads(raw)
            except ValueError:
                event = None
        if not isinstance(event, dict) or "event" not in event or "time" not in event:
            fold.events += 1
            log.warning("skipping line %d of the item log: not a record of this file", fold.events)
            continue
        touched = fold.apply(event)
        if changed is not None:
            changed.extend(touched)
    return consumed


def _of(info: os.stat_result) -> tuple[int, int, int, int]:
    return info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns


def _identity(path: Path) -> Identity:
    try:
        return _of(path.stat())
    except FileNotFoundError:
        return None
