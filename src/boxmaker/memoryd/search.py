"""Running a built query against an index file (M5a sections 5-6; DESIGN 11).

bm25 is the scorer, with column weights: the record's own text 1.0, its context (the two texts before
it in the session) 0.5, its date in words 0.3. The MATCH string comes only from `query.build`.
"""

from __future__ import annotations

import sqlite3

from boxmaker.memoryd.hits import Hit
from boxmaker.memoryd.query import Query
from boxmaker.proto.labels import DataClass, Label

#: bm25 column weights: text, ctx, time.
WEIGHTS = (1.0, 0.5, 0.3)

_RANKED = (
    "SELECT rowid FROM hits WHERE hits MATCH ? "
    f"ORDER BY bm25(hits, {', '.join(str(w) for w in WEIGHTS)}) LIMIT ?"
)
_SOURCES = (
    "SELECT rowid, key, kind, role, session, time, speaker, origin, class, untrusted, text "
    "FROM sources WHERE rowid IN ({})"
)


def search(conn: sqlite3.Connection, query: Query, k: int) -> list[Hit]:
    """The best `k` hits for `query`, best first.

    Raises:
        sqlite3.Error: when the index cannot be read.
    """
    rowids = [row[0] for row in conn.execute(_RANKED, (query.match, k))]
    if not rowids:
        return []
    rows = conn.execute(_SOURCES.format(",".join("?" * len(rowids))), rowids).fetchall()
    by_id = {row[0]: row for row in rows}
    return [_hit(by_id[rowid]) for rowid in rowids if rowid in by_id]


def _hit(row: tuple[object, ...]) -> Hit:
    _, key, kind, role, session, time, speaker, origin, data_class, untrusted, text = row
    return Hit(
        key=str(key),
        kind=str(kind),
        role=str(role),
        session=str(session),
        time=str(time),
        speaker=str(speaker),
        origin=str(origin),
        label=Label(DataClass(data_class), bool(untrusted)),
        text=str(text),
    )
