"""The edit journal and crash-safe commits (M5a section 3, The edit journal; DESIGN 7 and 10.4).

Every applied edit is one line of ``edits/YYYY-MM.jsonl`` with ``id, time, session, call, action,
file, where, before, after, untrusted`` (plus ``notes``, ``pending``, ``undoes`` where they apply).
Edit ids are ``YYYY-MM-DD-NNNN``, counted per day, and survive restarts.

A commit changes up to four files (the journal, notes.md, pending.jsonl, an identity file). To keep
them in agreement after a crash at any point, it first writes an intent (``memory/.intent.json``,
durably) listing every append with the file's size before it, and the identity file's text before and
after. Then it performs the steps and removes the intent. At start, a leftover intent is carried
forward: each append is completed (a torn one is cut back and written again), and the identity file is
written when it still holds the text before or after the edit (never over a later change by hand).
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from boxmaker.memoryd.files.names import INTENT
from boxmaker.proto import fsio
from boxmaker.proto.errors import InvalidId
from boxmaker.proto.ids import edit_id, parse_edit_id

log = logging.getLogger("boxmaker.memoryd.journal")


@dataclass(frozen=True, slots=True)
class Append:
    """Bytes to append to a file under memory/ (path relative to it)."""

    path: str
    data: bytes


@dataclass(frozen=True, slots=True)
class Rewrite:
    """An identity file's whole text before and after the edit (path relative to memory/)."""

    path: str
    before: str
    after: str


@dataclass(frozen=True, slots=True)
class Reserved:
    """An edit id and its moment, taken before the commit (`Journal.reserve`) so that the lines a
    change appends can name the edit that appends them (an item's ``owner:<edit id>`` Source)."""

    id: str
    moment: dt.datetime

    @property
    def time(self) -> str:
        """The journal line's time, ``YYYY-MM-DDTHH:MM:SSZ``."""
        return _stamp(self.moment)


@dataclass(slots=True)
class Change:
    """What one commit does: the journal line's fields, and the files it touches.

    `entry` holds the journal fields other than `id` and `time` (which the commit assigns, or
    takes from `reserved`); `appends` and `rewrite` are the other files' changes.
    """

    entry: dict[str, Any]
    appends: list[Append] = field(default_factory=list)
    rewrite: Rewrite | None = None
    reserved: Reserved | None = None


class Journal:
    """Owns ``edits/`` and commits changes under ``memory/``.

    Not thread-safe: the caller holds its write lock around read-decide-commit.
    """

    def __init__(self, memory_dir: Path, now: Callable[[], dt.datetime]) -> None:
        self.memory_dir = memory_dir
        self.edits_dir = memory_dir / "edits"
        self.now = now
        self._last_id: tuple[dt.date, int] | None = None
        #: Called with each committed line, after its files are written (e.g. the projections).
        self.listeners: list[Callable[[dict[str, Any]], None]] = []

    def open(self) -> None:
        """Carry a leftover intent forward, set torn journal tails aside, and load the id counter."""
        fsio.ensure_dir(self.edits_dir)
        self.recover()
        for path in sorted(self.edits_dir.glob("*.jsonl")):
            torn = fsio.set_aside_torn_tail(path)
            if torn:
                log.warning("set aside a torn last line of %s into %s.torn", path, path.name)
        self._last_id = None
        for entry in self.entries_newest_first():
            try:
                self._last_id = parse_edit_id(str(entry["id"]))
            except InvalidId:
                continue
            break

    def next_id(self, day: dt.date) -> str:
        """Allocate the next edit id of `day` (``YYYY-MM-DD-NNNN``)."""
        n = self._last_id[1] + 1 if self._last_id and self._last_id[0] == day else 1
        self._last_id = (day, n)
        return edit_id(day, n)

    def reserve(self) -> Reserved:
        """Allocate the id and moment of the next commit (pass it as `Change.reserved`; the caller
        holds the write lock from here to the commit)."""
        moment = self.now()
        return Reserved(self.next_id(moment.date()), moment)

    def commit(self, change: Change) -> dict[str, Any]:
        """Apply `change` durably and return its journal line (with `id` and `time`).

        Raises:
            OSError: when a write fails; the intent then completes the change at the next start.
        """
        reserved = change.reserved or self.reserve()
        moment = reserved.moment
        line = {"id": reserved.id, "time": reserved.time, **change.entry}
        journal = Append(f"edits/{moment:%Y-%m}.jsonl", encode_line(line) + b"\n")
        steps = [journal, *change.appends]
        for step in steps:
            path = self.memory_dir / step.path
            if path.suffix == ".jsonl" and not fsio.ends_with_newline(path):
                tail = fsio.set_aside_torn_tail(path)
                log.warning(
                    "set aside a line without its newline at the end of %s (%d bytes)", path, len(tail)
                )
        intent = {
            "appends": [
                {"path": a.path, "offset": _size(self.memory_dir / a.path), "data": a.data.decode("utf-8")}
                for a in steps
            ],
            "rewrite": None
            if change.rewrite is None
            else {
                "path": change.rewrite.path,
                "before": change.rewrite.before,
                "after": change.rewrite.after,
            },
        }
        fsio.atomic_write(self.memory_dir / INTENT, encode_line(intent))
        self._carry_out(intent)
        (self.memory_dir / INTENT).unlink()
        for listener in self.listeners:
            listener(line)
        return line

    def recover(self) -> bool:
        """Carry forward an intent left by a crash. Returns True when there was one."""
        path = self.memory_dir / INTENT
        try:
            raw = path.read_bytes()
        except FileNotFoundError:
            return False
        try:
            intent = json.loads(raw)
        except ValueError:
            log.warning("removing an unreadable intent %s (the crash came before its commit began)", path)
        else:
            log.warning("completing an edit interrupted by a crash (%s)", path)
            self._carry_out(intent)
        path.unlink()
        fsio.fsync_dir(self.memory_dir)
        return True

    def _carry_out(self, intent: dict[str, Any]) -> None:
        for step in intent["appends"]:
            self._complete_append(
                self.memory_dir / step["path"], step["offset"], step["data"].encode("utf-8")
            )
        rewrite = intent.get("rewrite")
        if rewrite:
            self._complete_rewrite(self.memory_dir / rewrite["path"], rewrite["before"], rewrite["after"])

    @staticmethod
    def _complete_append(path: Path, offset: int, data: bytes) -> None:
        size, current = _read_at(path, offset, len(data) + 1)  # never the whole file: flat at any size
        if current[: len(data)] == data:
            return
        if size > offset and not data.startswith(current):
            log.warning("%s changed after an interrupted edit; appending its record again", path)
            fsio.append_bytes(path, data)
            return
        if size > offset:
            fsio.truncate(path, offset)
        fsio.append_bytes(path, data)

    @staticmethod
    def _complete_rewrite(path: Path, before: str, after: str) -> None:
        try:
            current = path.read_bytes().decode("utf-8")
        except (OSError, UnicodeDecodeError):
            current = None
        if current == after:
            return
        if current not in (before, None):
            log.warning("%s was changed by hand after an interrupted edit; leaving it as it is", path)
            return
        fsio.atomic_write(path, after.encode("utf-8"))

    def entries_newest_first(self) -> Iterator[dict[str, Any]]:
        """Journal lines, newest first, across every month file (a line that is not a journal
        entry is skipped with a log line; a torn tail is not yet a line)."""
        for path in sorted(self.edits_dir.glob("*.jsonl"), reverse=True):
            yield from reversed(read_jsonl(path, ("id", "where")))

    def latest_for(self, where: str) -> dict[str, Any] | None:
        """The newest journal line that changed `where` (e.g. "memory.md"), or None."""
        return next((e for e in self.entries_newest_first() if e.get("where") == where), None)

    def find(self, wanted: str) -> dict[str, Any] | None:
        """The journal line with id `wanted`, or None."""
        return next((e for e in self.entries_newest_first() if e.get("id") == wanted), None)


def read_jsonl(path: Path, required: tuple[str, ...]) -> list[dict[str, Any]]:
    """The JSON objects of an append-only file's complete lines that have every `required` key.

    Anything else (not JSON, not an object, a key missing: a hand edit, or a line appended to one
    left without its newline) is skipped, with one log line naming the file and the line.
    """
    try:
        lines, _ = fsio.complete_lines(path.read_bytes())
    except FileNotFoundError:
        return []
    found = []
    for number, raw in enumerate(lines, start=1):
        if not raw.strip():
            continue
        try:
            value = json.loads(raw)
        except ValueError:
            value = None
        if isinstance(value, dict) and all(key in value for key in required):
            found.append(value)
        else:
            log.warning("skipping line %d of %s: not a record of this file", number, path)
    return found


def encode_line(value: dict[str, Any]) -> bytes:
    """One ASCII JSON line (no newline) for a journal or log file."""
    return json.dumps(value, ensure_ascii=True, separators=(",", ":")).encode("ascii")


def _stamp(moment: dt.datetime) -> str:
    return moment.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _read_at(path: Path, offset: int, count: int) -> tuple[int, bytes]:
    """A file's size and up to `count` of its bytes from `offset` (0 and nothing when it is missing)."""
    try:
        with path.open("rb") as handle:
            handle.seek(offset)
            return os.fstat(handle.fileno()).st_size, handle.read(count)
    except FileNotFoundError:
        return 0, b""


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except FileNotFoundError:
        return 0
