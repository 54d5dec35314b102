"""A batch of index rows on its way to the file (M5a section 6; issue 16): what the walk collects
(`Batch`) and the form `db.IndexDB` writes it in (`Encoded`), made on the walking thread so the writing
thread only hands JSON to SQLite. Every text reaches SQLite free of lone surrogates (possible in a
model's text; SQLite takes UTF-8 only).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

import msgspec

from boxmaker.memoryd.index.walk import Rows, Searchable


@dataclass(slots=True)
class Batch:
    """Rows and progress lines waiting to be written together."""

    rows: Rows = field(default_factory=Rows)
    notes: list[tuple[Any, ...]] = field(default_factory=list)
    progress: list[tuple[int, str, int, int, str, int, str]] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.rows.rows) + len(self.notes)

    def encoded(self) -> Encoded:
        """The batch as `IndexDB._flush` writes it (made on the producer's thread): every text free
        of lone surrogates (possible in a model's text; SQLite takes UTF-8 only), each note as JSON,
        the session rows and the searchable columns each as one JSON array."""
        searchable = [_clean_searchable(row) for row in self.rows.searchable]
        return Encoded(
            len(self.rows.rows),
            _ENCODER.encode(self.rows.rows),
            [_json(note) for note in self.notes],
            _ENCODER.encode(searchable),
            _ENCODER.encode([_clean(row) for row in self.progress]),
        )


@dataclass(frozen=True, slots=True)
class Encoded:
    """A batch ready to write: how many session rows, the session rows (`origins`) as one JSON array,
    the notes (JSON each), the searchable columns of both in that order as one JSON array, and the
    progress of each log read (`logs` rows) as one JSON array. The arrays are UTF-8 bytes, which SQLite
    reads as text (``CAST(? AS TEXT)``: no Python string is made of them, nor encoded again when
    bound)."""

    sessions: int
    origins: bytes
    notes: list[str]
    searchable: bytes
    progress: bytes

    @property
    def count(self) -> int:
        """Rows in the batch (session rows and notes)."""
        return self.sessions + len(self.notes)


_ENCODER = msgspec.json.Encoder()
_SURROGATE = re.compile("[\ud800-\udfff]")


def _json(row: tuple[Any, ...]) -> str:
    """A row as one JSON array; a lone surrogate (possible in a model's text) becomes U+FFFD."""
    try:
        return _ENCODER.encode(row).decode("utf-8")
    except UnicodeEncodeError:
        return _ENCODER.encode(_clean(row)).decode("utf-8")


def _clean_searchable(row: Searchable) -> Searchable:
    """`_clean` of a row's searchable columns; its context column is free of lone surrogates already
    (`walk._context`), and is full of non-ASCII fillers, so it is not looked at again."""
    text, ctx, time = row
    if text.isascii() and time.isascii():
        return row
    return (_SURROGATE.sub("\ufffd", text), ctx, _SURROGATE.sub("\ufffd", time))


def _clean(row: tuple[Any, ...]) -> tuple[Any, ...]:
    """`row` with every lone surrogate in its texts as U+FFFD (ASCII texts are looked at no further)."""
    if all(not isinstance(v, str) or v.isascii() or not _SURROGATE.search(v) for v in row):
        return row
    return tuple(_SURROGATE.sub("\ufffd", v) if isinstance(v, str) else v for v in row)
