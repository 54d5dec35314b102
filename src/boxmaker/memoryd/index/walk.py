"""Walking a session log into index rows (M5a section 6, What is indexed and Labels).

Pure: records in, rows out. Walking a log in order keeps the session's label so far, the stricter of
``private`` and every `tool_result` before the record, and gives each row the label in force when its
record was written. Indexed: `user` content (with the speaker's name), `assistant` content when not
empty, each tool call as ``name arguments``, and `tool_summary` content (labelled with the stricter of
the session's label and its own). Never tool results, never reasoning, never the fixed sentence loopd
writes to close a cancelled or failed turn (the `assistant` record before a `turn_end`), never loopd's
own fixed prompt (a `user` record with speaker ``loopd``: the memory flush's, issue 19). A row above
``max_class`` is not indexed, and its text never reaches another row's context. Every text is indexed
with its credentials replaced (`check.secrets.redact`), and a hit's text is redacted when it is read
back, so recall never returns one.

A row is two tuples: where its text is (a `Row`: the log, the record, its line's offset, the part, the
label) and its searchable columns (the `hits` table): ``text`` (``speaker: text`` for a user turn with a
speaker), ``ctx`` (the two indexed user or assistant texts before it in the session: document
expansion; its stop words as one filler token each, `query.stop_filled`), ``time`` (its date in
words). CJK runs are stored as overlapping two-character pieces (`query.cjk_bigrams`).
"""

from __future__ import annotations

import datetime as dt
import re
import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import NamedTuple, TypeAlias

import msgspec

from boxmaker.memoryd.check.secrets import redact
from boxmaker.memoryd.index.query import cjk_bigrams, stop_filled, stop_filled_utf8, time_words
from boxmaker.proto.labels import DataClass
from boxmaker.proto.records import LOOPD_SPEAKER, Assistant, Record, ToolResult, ToolSummary, TurnEnd, User

#: How many indexed texts before a row, in the same session, go into its context column.
CONTEXT_ROWS = 2
#: At most this many characters of a record are indexed and kept for snippets (a log line can be huge).
TEXT_LIMIT = 100_000
#: At most this many characters of each text before a row go into its context.
CONTEXT_LIMIT = 2_000

#: A session row as the index stores it (the `origins` table): (log id, record number in the log, the
#: byte offset of its line, the line's check (`line_check`), part, label). Part 0 is the record's own
#: text, part i + 1 its tool call i; the label is the class rank (0-2) times 2 plus 1 when untrusted.
#: What a hit shows is read back from the log line (`shown_parts`; `rowtext`), not stored.
Row: TypeAlias = tuple[int, int, int, int, int, int]
#: (text, ctx, time) as the FTS5 table indexes them; a session row's ctx is ready JSON (a string
#: literal, `context_text` reads it back), made without a Python string of it (`_context`).
Searchable: TypeAlias = tuple[str, str | msgspec.Raw, str]


class Part(NamedTuple):
    """One indexed text of a record: its part number (`Row`), kind, role, speaker, the text a hit
    shows, the text indexed (``speaker: text`` for a user turn with a speaker) and whether it goes into
    the context of the rows after it. (A tuple: the walk makes one per row, five times faster than a
    frozen dataclass.)"""

    part: int
    kind: str
    role: str
    speaker: str
    shown: str
    indexed: str
    context: bool


def line_check(line: bytes) -> int:
    """A log line's check as a row keeps it: 23 bits of its CRC-32 (three bytes in SQLite), so a
    line changed underneath is not shown as the one indexed."""
    return zlib.crc32(line) & 0x7FFFFF


def shown_parts(record: Record) -> list[Part]:
    """The indexed texts of one record, as the walk indexes them and a hit shows them: a `user`
    turn, an `assistant` turn's content when not empty and each tool call as ``name arguments``, a
    `tool_summary` (its speaker the tool call's name); nothing for any other record."""
    if isinstance(record, User):
        speaker = record.speaker or ""
        text = f"{speaker}: {record.content}" if speaker else record.content
        return [Part(0, "turn", "user", speaker, record.content, text, True)]
    if isinstance(record, Assistant):
        parts = []
        if record.content and record.content.strip():
            parts.append(Part(0, "turn", "assistant", "", record.content, record.content, True))
        for i, call in enumerate(record.tool_calls):
            text = f"{call.name} {call.arguments}"
            parts.append(Part(i + 1, "turn", "call", "", text, text, False))
        return parts
    if isinstance(record, ToolSummary):
        return [Part(0, "summary", "summary", record.call, record.content, record.content, False)]
    return []


_RANK = {DataClass.PUBLIC: 0, DataClass.PRIVATE: 1, DataClass.SECRET: 2}


_CLASSES = (DataClass.PUBLIC.value, DataClass.PRIVATE.value, DataClass.SECRET.value)


@dataclass(slots=True)
class Walk:
    """The state of a session's walk: its label so far (class rank 0-2, untrusted) and the last
    indexed texts (for context)."""

    rank: int = 1
    untrusted: bool = False
    tail: list[str] = field(default_factory=list)
    #: `tail` with its stop words filled, in UTF-8 (`_prepared`), made again when it does not match.
    filled: list[bytes] = field(default_factory=list, compare=False)

    @property
    def data_class(self) -> str:
        """The label's class as the wire writes it ("private")."""
        return _CLASSES[self.rank]

    def copy(self) -> Walk:
        """An independent copy (a new epoch starts from the previous epoch's state)."""
        return Walk(self.rank, self.untrusted, list(self.tail), list(self.filled))


@dataclass(slots=True)
class Rows:
    """Rows made by a walk: what the `rows` table stores and what FTS5 indexes, in the same order."""

    rows: list[Row] = field(default_factory=list)
    searchable: list[Searchable] = field(default_factory=list)


#: `time_of`'s memo: a day ("2023-05-08") to its words.
_DAYS: dict[str, str] = {}


def time_of(stamp: str, cache: dict[str, str] = _DAYS) -> str:
    """A record time's date in words ("8 May 2023"); "" when it is not a date."""
    day = stamp[:10]
    words = cache.get(day)
    if words is None:
        try:
            words = time_words(dt.date.fromisoformat(day))
        except ValueError:
            words = ""
        if len(cache) < 100_000:
            cache[day] = words
    return words


def walk_records(
    log: int,
    first: int,
    records: Sequence[Record],
    lines: Sequence[tuple[int, int]],
    walk: Walk,
    *,
    max_class: DataClass,
    rows: Rows,
    skip: Callable[[int], bool] | None = None,
) -> None:
    """Append the rows of `records` (numbered from `first` in the log whose id is `log`; `lines[i]` is
    record i's line's byte offset and `line_check`) to `rows`, advancing `walk`.

    `skip(number)` True leaves that record out (a withdrawn record, seed 003 section 12.2): no row, and
    its text never reaches another row's context; what it did to the label still counts.
    """
    limit = _RANK[max_class]
    last = len(records) - 1
    add_row, add_searchable = rows.rows.append, rows.searchable.append
    # The walk's context, kept in locals while walking (set back at the end): the tail, its filled
    # form, and the context column of the next row (made when a row needs it, `_context`).
    tail, filled = walk.tail, _filled(walk)
    context: msgspec.Raw | None = None
    days = _DAYS
    for index, record in enumerate(records):
        parts: Sequence[tuple[int, str, bool]] | None = None  # (part, indexed text, enters the context)
        if isinstance(record, User):
            speaker = record.speaker
            if speaker == LOOPD_SPEAKER:
                continue  # loopd's own fixed prompt (the memory flush's): the same words in every session
            # nearly every row: its one part made here, as `shown_parts` makes it
            parts = ((0, f"{speaker}: {record.content}" if speaker else record.content, True),)
        elif isinstance(record, Assistant):
            if index < last and isinstance(records[index + 1], TurnEnd):
                # loopd's fixed sentence closing a turn that did not finish (the record right before
                # its `turn_end`, docs/session-log.md): nobody said it
                continue
        elif isinstance(record, (ToolResult, ToolSummary)):
            # What a tool returned, or a summary of it, labels the session from here on.
            walk.rank = max(walk.rank, _RANK[record.data_class])
            walk.untrusted = walk.untrusted or record.untrusted
            if isinstance(record, ToolResult):
                continue
        else:
            continue  # no text of any other record is indexed (`shown_parts`)
        number = first + index
        if walk.rank > limit or (skip is not None and skip(number)):
            continue
        if parts is None:
            parts = [(part.part, part.indexed, part.context) for part in shown_parts(record)]
            if not parts:
                continue
        label = walk.rank * 2 + int(walk.untrusted)
        offset, check = lines[index]
        time = days.get(record.time[:10]) or time_of(record.time)  # `time_of`, its memo read here
        for part, indexed, enters in parts:
            # Recall never returns a credential: the row's text is indexed redacted, and a hit's text
            # is redacted when read back (the log itself stays as it is; issue 15 item 5).
            text = redact(indexed)
            if len(text) <= TEXT_LIMIT and text.isascii() and "\x00" not in text:
                searchable = text  # what `searchable_text` makes of it
            else:
                searchable = searchable_text(text)
            if context is None:
                context = _context(tail, filled)
            add_row((log, number, offset, check, part, label))
            add_searchable((searchable, context, time))
            if enters:
                shown = text[:CONTEXT_LIMIT]
                made = _prepared(searchable if len(text) <= CONTEXT_LIMIT else searchable_text(shown))
                filled = [*filled[-(CONTEXT_ROWS - 1) :], made]
                tail = [*tail[-(CONTEXT_ROWS - 1) :], shown]
                context = None
    walk.tail, walk.filled = tail, filled


def searchable_text(text: str, limit: int = TEXT_LIMIT) -> str:
    """Text as the FTS5 table indexes it: at most `limit` characters, NUL (which would end the text
    for FTS5) as a space, CJK runs in two-character pieces."""
    if len(text) > limit:
        text = text[:limit]
    if "\x00" in text:
        text = text.replace("\x00", " ")
    return cjk_bigrams(text)


_SURROGATE = re.compile("[\ud800-\udfff]")


def _prepared(searchable: str) -> bytes:
    """A text of the tail as the context column indexes it, in UTF-8: `searchable_text`'s form with
    its stop words filled (`query.stop_filled`) and every lone surrogate as U+FFFD (so the column
    needs no check when written: `db`). Every ASCII character but letters and digits is a space
    there, so the bytes need no escaping inside a JSON string."""
    if searchable.isascii() or not _SURROGATE.search(searchable):
        return stop_filled_utf8(searchable)
    return _SURROGATE.sub("\ufffd", stop_filled(searchable)).encode("utf-8")


def _filled(walk: Walk) -> list[bytes]:
    """`walk.filled`, made from `walk.tail` when it is not its filled form (a walk resumed from the
    index's progress keeps the tail only)."""
    if len(walk.filled) != len(walk.tail):
        walk.filled = [_prepared(searchable_text(t)) for t in walk.tail]
    return walk.filled


def _context(tail: list[str], filled: list[bytes]) -> msgspec.Raw:
    """The context column of the next row, as a JSON string: the texts of `tail` joined by
    newlines, as `searchable_text` makes them (at most 2 x `CONTEXT_LIMIT` characters), with their stop
    words filled (`query.stop_filled`; each text is made ready once, when it enters the tail:
    `_prepared`, `filled`) and free of lone surrogates. Filling keeps every token a token, so the
    column's length in tokens is the unfilled text's. The JSON is what `msgspec` makes of the string,
    byte for byte (a newline escaped, nothing else to escape: `_prepared`), made without decoding the
    UTF-8."""
    if sum(map(len, tail)) + len(tail) - 1 > 2 * CONTEXT_LIMIT:  # the cut falls where it falls unfilled
        return msgspec.Raw(b'"' + _prepared(searchable_text("\n".join(tail), 2 * CONTEXT_LIMIT)) + b'"')
    return msgspec.Raw(b'"' + b"\\n".join(filled) + b'"')


def context_text(ctx: str | msgspec.Raw) -> str:
    """A row's context column as the string SQLite gets (`Searchable`)."""
    return ctx if isinstance(ctx, str) else str(msgspec.json.decode(ctx))
