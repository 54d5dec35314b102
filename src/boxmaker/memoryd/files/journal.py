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

A step that fails (a full disk) undoes the commit: the appends are cut back to their offsets and the
intent removed, so the caller can say that nothing was written. Each line also records where its
appends landed (``appended``: file, offset, length, SHA-256), which the start-up check verifies.

Each line is sealed into the journal's hash chain (`chain`: ``salt``, ``commitment``, ``chain``) after
the line before it; the journal keeps the newest chain value (`Journal.head`) in memory, so an append
costs the same at any history. The intent holds the sealed line, so a line completed at the next start
carries the same values.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import logging
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from boxmaker.memoryd.files import chain
from boxmaker.memoryd.files.names import INTENT
from boxmaker.proto import fsio
from boxmaker.proto.errors import BoxmakerError, InvalidId
from boxmaker.proto.ids import edit_id, parse_edit_id

log = logging.getLogger("boxmaker.memoryd.journal")


class CommitPending(BoxmakerError):
    """Raised when a commit's write failed and its appends could not be cut back: the intent stays,
    and the change is completed at the next start (`Journal.recover`)."""

    def __init__(self, cause: OSError) -> None:
        super().__init__(
            f"a write failed and could not be undone ({cause.strerror or cause}); "
            "it is completed at memoryd's next start"
        )


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
        #: The newest line's chain value (`chain.GENESIS` before the first chained line): the next
        #: line is sealed after it. Loaded by `open`, moved on by every commit.
        self.head = chain.GENESIS
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
        self.head = chain.GENESIS
        for n, entry in enumerate(self.entries_newest_first()):
            if n == 0:  # the newest line: the next one is sealed after it
                self.head = chain.head_of(entry)
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
        """Apply `change` durably and return its journal line (with `id` and `time`, and `appended`:
        where each of its appends landed, for the start-up check).

        Once the journal line and every file of the change are written, the change is made: what the
        listeners do after it (the projections) is logged when it fails, never raised.

        Raises:
            OSError: when a write fails (a full disk: `fsio.disk_full`); every file is then as it was
                before (the appends are cut back, the intent removed): nothing was written.
            CommitPending: when a write failed and could not be undone; the intent completes the
                change at the next start.
        """
        reserved = change.reserved or self.reserve()
        moment = reserved.moment
        journal_path = f"edits/{moment:%Y-%m}.jsonl"
        for name in dict.fromkeys([journal_path, *(a.path for a in change.appends)]):
            path = self.memory_dir / name
            if path.suffix == ".jsonl" and not fsio.ends_with_newline(path):
                tail = fsio.set_aside_torn_tail(path)
                log.warning(
                    "set aside a line without its newline at the end of %s (%d bytes)", path, len(tail)
                )
        line = {"id": reserved.id, "time": reserved.time, **change.entry}
        if change.appends:
            line["appended"] = [appended(a, _size(self.memory_dir / a.path)) for a in change.appends]
        line = chain.seal(line, self.head)
        steps = [Append(journal_path, encode_line(line) + b"\n"), *change.appends]
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
        try:
            self._carry_out(intent)
        except OSError:
            if self._undo(intent):
                raise
            log.warning("a write failed after %s's change was complete; it stands", reserved.id)
        self.head = str(line[chain.CHAIN])
        (self.memory_dir / INTENT).unlink()
        self._tell(line)
        return line

    def _undo(self, intent: dict[str, Any]) -> bool:
        """After a failed step: cut every append back and remove the intent, unless the rewrite had
        already replaced its file (then the change is made: returns False).

        Raises:
            CommitPending: an append could not be cut back (the intent stays, for the next start).
        """
        rewrite = intent.get("rewrite")
        if rewrite and _text(self.memory_dir / rewrite["path"]) == rewrite["after"]:
            return False
        try:
            for step in reversed(intent["appends"]):
                path = self.memory_dir / step["path"]
                if _size(path) > step["offset"]:
                    fsio.truncate(path, step["offset"])
            (self.memory_dir / INTENT).unlink()
            fsio.fsync_dir(self.memory_dir)
        except OSError as exc:
            raise CommitPending(exc) from exc
        return True

    def _tell(self, line: dict[str, Any]) -> None:
        for listener in self.listeners:
            try:
                listener(line)
            except Exception:
                log.exception("edit %s is made, but what follows it failed (it is redone later)", line["id"])

    def recover(self) -> bool:
        """Carry forward an intent left by a crash. Returns True when there was one."""
        path = self.memory_dir / INTENT
        try:
            raw = fsio.read_bytes(path)
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
            current = fsio.read_bytes(path).decode("utf-8")
        except (OSError, UnicodeDecodeError):
            current = None
        if current == after:
            return
        if current not in (before, None):
            log.warning("%s was changed by hand after an interrupted edit; leaving it as it is", path)
            return
        fsio.atomic_write(path, after.encode("utf-8"))

    def entries_newest_first(self, containing: bytes = b"") -> Iterator[dict[str, Any]]:
        """Journal lines, newest first, across every month file, read backwards a block at a time and
        decoded one by one as they are asked for (a line that is not a journal entry is skipped with a
        log line; a torn tail is not yet a line). With `containing`, only lines holding those bytes
        are decoded (a filter before the caller's own: a month file is about 3 MB at 55 notes a day)."""
        for path in sorted(self.edits_dir.glob("*.jsonl"), reverse=True):
            yield from read_jsonl_newest_first(path, ("id", "where"), containing)

    def lines_newest_first(self, containing: bytes) -> Iterator[bytes]:
        """The raw journal lines holding `containing`, newest first, undecoded (for a caller that
        decodes only the fields it needs: an archive line names every item it archived)."""
        for path in sorted(self.edits_dir.glob("*.jsonl"), reverse=True):
            for raw, _ in lines_newest_first(path, containing):
                yield raw

    def latest_for(self, where: str) -> dict[str, Any] | None:
        """The newest journal line that changed `where` (e.g. "memory.md"), or None."""
        return next((e for e in self.entries_newest_first() if e.get("where") == where), None)

    def find(self, wanted: str) -> dict[str, Any] | None:
        """The journal line with id `wanted`, or None."""
        return next((e for e in self.entries_newest_first() if e.get("id") == wanted), None)


#: `read_jsonl_newest_first` reads this many bytes at a time.
BACKWARD_BLOCK = 1 << 20


def read_jsonl_newest_first(
    path: Path, required: tuple[str, ...], containing: bytes = b""
) -> Iterator[dict[str, Any]]:
    """`read_jsonl`'s objects, last line first (`lines_newest_first`): memory does not grow with the
    file, and a caller that stops early reads only the end. Lines without `containing` are passed over
    undecoded."""
    for raw, offset in lines_newest_first(path, containing):
        value = _object(raw)
        if value is not None and all(key in value for key in required):
            yield value
        else:
            log.warning("skipping line %d of %s: not a record of this file", _line_number(path, offset), path)


def lines_newest_first(path: Path, containing: bytes = b"") -> Iterator[tuple[bytes, int]]:
    """The complete, non-blank lines of `path` holding `containing`, last first, each with the offset
    it starts at; read from the end `BACKWARD_BLOCK` bytes at a time (a torn tail is not yet a line)."""
    try:
        handle = path.open("rb")
    except FileNotFoundError:
        return
    with handle:
        position = os.fstat(handle.fileno()).st_size
        rest, whole = b"", False  # the start of the line the later block began inside; tail dropped
        while position > 0:
            start = max(0, position - BACKWARD_BLOCK)
            handle.seek(start)
            data = handle.read(position - start) + rest
            position, rest = start, b""
            if not whole:  # what follows the file's last newline is a torn tail, not yet a line
                cut = data.rfind(b"\n")
                if cut < 0:
                    continue
                data, whole = data[:cut], True
            pieces = data.split(b"\n")
            if start > 0:
                rest = pieces.pop(0)  # it may begin before this block
            at = start + len(rest) + 1 if start > 0 else 0
            starts = []
            for piece in pieces:
                starts.append(at)
                at += len(piece) + 1
            for raw, offset in zip(reversed(pieces), reversed(starts), strict=True):
                if raw.strip() and (not containing or containing in raw):
                    yield raw, offset


def _object(raw: bytes) -> dict[str, Any] | None:
    try:
        value = json.loads(raw)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def _line_number(path: Path, offset: int) -> int:
    """The 1-based number of the line starting at byte `offset` (for a warning: reads the file up to it)."""
    with path.open("rb") as handle:
        return handle.read(offset).count(b"\n") + 1


def read_jsonl(path: Path, required: tuple[str, ...]) -> list[dict[str, Any]]:
    """The JSON objects of an append-only file's complete lines that have every `required` key.

    Anything else (not JSON, not an object, a key missing: a hand edit, or a line appended to one
    left without its newline) is skipped, with one log line naming the file and the line.
    """
    try:
        lines, _ = fsio.complete_lines(fsio.read_bytes(path))
    except FileNotFoundError:
        return []
    found = []
    for number, raw in enumerate(lines, start=1):
        if not raw.strip():
            continue
        value = _object(raw)
        if value is not None and all(key in value for key in required):
            found.append(value)
        else:
            log.warning("skipping line %d of %s: not a record of this file", number, path)
    return found


def encode_line(value: dict[str, Any]) -> bytes:
    """One ASCII JSON line (no newline) for a journal or log file."""
    return json.dumps(value, ensure_ascii=True, separators=(",", ":")).encode("ascii")


def _stamp(moment: dt.datetime) -> str:
    return moment.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def appended(append: Append, at: int) -> dict[str, Any]:
    """What a journal line records of one of its appends (``appended``): the file, the offset it
    starts at, its length in bytes and its SHA-256, so the start-up check can verify that the file
    still holds it."""
    data = append.data
    return {"file": append.path, "at": at, "bytes": len(data), "sha256": hashlib.sha256(data).hexdigest()}


def _text(path: Path) -> str | None:
    try:
        return path.read_bytes().decode("utf-8")
    except (OSError, UnicodeDecodeError):
        return None


def _read_at(path: Path, offset: int, count: int) -> tuple[int, bytes]:
    """A file's size and up to `count` of its bytes from `offset` (0 and nothing when it is missing),
    opened without following a link (`fsio.open_nofollow`)."""
    try:
        fd = fsio.open_nofollow(path, os.O_RDONLY)
    except FileNotFoundError:
        return 0, b""
    try:
        return os.fstat(fd).st_size, os.pread(fd, count, offset)
    finally:
        os.close(fd)


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except FileNotFoundError:
        return 0
