"""Running a built query against an index file (M5a sections 5-6; DESIGN 11).

bm25 is the scorer, with column weights: the record's own text 1.0, its context (the two texts before
it in the session) 0.5, its date in words 0.3. The MATCH strings come only from `query`.

An OR of every term scores every row that shares any word with the question, so on a large index a
question with a common word costs time in proportion to how common it is. The search therefore splits
the terms by document frequency:

- each term's frequency is counted up to `BUDGET` + 1 rows (so counting costs at most that much);
- the rarest terms whose frequencies add up to at most `BUDGET` are *rare* (the rarest always is);
  the others are *common*;
- with no common term, the plain OR query runs. Otherwise two queries run: rows with a rare term
  (``rare OR ...``), and rows with a rare and a common term (``(rare OR ...) AND (common OR ...)``).
  Both carry the same bm25 idf per term as the full OR query, so a row's score is its full-query score
  (the better of its two scores); the best `k` of the union are the best `k` of the full query among
  rows that hold at least one rare term.

What this leaves out: rows that hold only common terms, which the full query would rank low anyway
(measured while choosing the method: the same quality on LoCoMo inside 100,000 other records; and
bench/scale.py: recall p99 within its targets at 100,000 and 1,000,000 rows).

When every term is common (a question made of the owner's name and a month, say), no term narrows
the search: the full query then ranks, by the same bm25, the newest `BUDGET` rows that hold one of
its terms (FTS5 walks its lists by rowid, newest first, cheaply), rather than scoring every row.

A common term held by at least half the rows leaves both plans' MATCH strings (not the newest rows'
bound): FTS5's bm25 gives such a term an idf of 1e-6 (log((N - n + 0.5) / (n + 0.5)) <= 0 is replaced
by it), so it adds at most 1e-6 x (k1 + 1) = 2.2e-6 to any row's score, and counting its long list
for that idf is most of a common question's time. The ranking changes only among rows whose scores
are within 2.2e-6 a term of each other. A question whose common terms are all such terms keeps them
when it has no rare term (the newest rows are then ranked by them alone).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence

from boxmaker.memoryd.index.query import Query, render_match
from boxmaker.memoryd.index.schema import last_rowid

#: bm25 column weights: text, ctx, time.
WEIGHTS = (1.0, 0.5, 0.3)
#: At most this many rows are scored by the rare terms' query.
BUDGET = 2000

_BM25 = f"bm25(hits, {', '.join(str(w) for w in WEIGHTS)})"
_RANKED = f"SELECT rowid, {_BM25} FROM hits WHERE hits MATCH ? AND rowid >= ? ORDER BY {_BM25} LIMIT ?"
_NEWEST = "SELECT rowid FROM hits WHERE hits MATCH ? ORDER BY rowid DESC LIMIT 1 OFFSET ?"
_COUNT = "SELECT count(*) FROM (SELECT 1 FROM hits WHERE hits MATCH ? LIMIT ?)"
_TOTALS = (
    "SELECT (SELECT block FROM hits_data WHERE id = 1),"
    " (SELECT coalesce(max(value), 0) FROM meta WHERE key = 'rows_deleted')"
)
#: A term is counted up to this share of the rows above half, so a count keeps proving it while the
#: index grows by a fifth.
_MARGIN = 0.1


def _varint(data: bytes) -> int:
    """The first SQLite varint of `data` (FTS5's averages record starts with its row count)."""
    value = 0
    for n, byte in enumerate(data[:9]):
        if n == 8:
            return (value << 8) | byte
        value = (value << 7) | (byte & 0x7F)
        if byte < 0x80:
            return value
    return value


def totals(conn: sqlite3.Connection) -> tuple[int, int]:
    """The rows FTS5 counts as bm25's N (its averages record; 0 when empty), and the rows ever
    deleted from the table (the `rows_deleted` meta value, 0 when unset)."""
    block, deleted = conn.execute(_TOTALS).fetchone()
    return (_varint(bytes(block)) if block else 0), int(deleted)


class Frequencies:
    """Each term's document frequency, counted up to `BUDGET` + 1, remembered between queries.

    Rows are only ever appended, so a term over the budget stays over it; a count under it is
    remembered with the index size it was made at and made again once the index has grown.
    Thread-safe enough: a lost update only costs a recount.
    """

    def __init__(self) -> None:
        self._known: dict[str, tuple[int, int]] = {}
        self._halves: dict[str, tuple[int, int, int]] = {}

    def get(self, conn: sqlite3.Connection, term: str, size: int) -> int:
        """The term's frequency (at most `BUDGET` + 1) in an index of `size` rows."""
        known = self._known.get(term)
        if known is not None and (known[0] > BUDGET or known[1] == size):
            return known[0]
        count = int(conn.execute(_COUNT, (render_match([term]), BUDGET + 1)).fetchone()[0])
        if len(self._known) > 200_000:
            self._known.clear()
        self._known[term] = (count, size)
        return count

    def halves(self, conn: sqlite3.Connection, terms: Sequence[str]) -> set[str]:
        """Those of `terms` (each known to be over `BUDGET`) held by at least half the rows now, so
        that bm25's idf for them is 1e-6.

        A count made at N0 rows with D0 deletions bounds the term's rows now: at least count -
        (D - D0), at most count + (N - N0) + (D - D0). It is made again only when the bounds do not
        decide; a count stops at N / 2 + `_MARGIN` x N rows.
        """
        found: set[str] = set()
        rows, deleted = totals(conn)
        if not rows:
            return found
        for term in terms:
            known = self._halves.get(term)
            if known is not None:
                count, rows0, deleted0 = known
                gone = deleted - deleted0
                if count - gone >= rows / 2:
                    found.add(term)
                    continue
                if rows >= rows0 and count + (rows - rows0) + gone < rows / 2:
                    continue
            cap = int(rows * (0.5 + _MARGIN)) + 1
            count = int(conn.execute(_COUNT, (render_match([term]), cap)).fetchone()[0])
            if len(self._halves) > 200_000:
                self._halves.clear()
            self._halves[term] = (count, rows, deleted)
            if count >= rows / 2:
                found.add(term)
        return found


#: One query to run: its MATCH string and the lowest rowid it may score (0: any).
Planned = tuple[str, int]


def plan(
    conn: sqlite3.Connection, query: Query, frequencies: Frequencies | None = None, *, halves: bool = True
) -> list[Planned]:
    """The queries to run for `query`: the full OR query alone; or, on a large index with a common
    term, the rare-and-common query and the rare-only query; or, when every term is common, the
    full query over the newest rows (see the module's docstring). With `halves`, terms held by at
    least half the rows leave the MATCH strings of the last two (bm25 gives them an idf of 1e-6).

    Raises:
        sqlite3.Error: when the index cannot be read.
    """
    terms = list(query.terms)
    size = last_rowid(conn)
    if size <= BUDGET:
        return [(query.match, 0)]
    known = frequencies or Frequencies()
    frequency = {t: known.get(conn, t, size) for t in terms}
    ordered = sorted(terms, key=lambda t: frequency[t])
    if frequency[ordered[0]] > BUDGET:
        newest = conn.execute(_NEWEST, (query.match, BUDGET - 1)).fetchone()
        over = known.halves(conn, terms) if halves else set()
        kept = [t for t in terms if t not in over]
        return [(render_match(kept) if kept else query.match, int(newest[0]) if newest else 0)]
    rare = [ordered[0]]
    spent = frequency[ordered[0]]
    for term in ordered[1:]:
        if spent + frequency[term] > BUDGET:
            break
        rare.append(term)
        spent += frequency[term]
    common = [t for t in terms if t not in rare]
    if not common:
        return [(query.match, 0)]
    rare_match = render_match(rare)
    if halves:
        over = known.halves(conn, [t for t in common if frequency[t] > BUDGET])
        common = [t for t in common if t not in over]
        if not common:
            return [(rare_match, 0)]
    return [(f"({rare_match}) AND ({render_match(common)})", 0), (rare_match, 0)]


def scored(conn: sqlite3.Connection, planned: Planned, k: int) -> list[tuple[int, float]]:
    """The best `k` (rowid, bm25) of one planned query (lower scores are better).

    Raises:
        sqlite3.Error: when the index cannot be read.
    """
    match, lowest = planned
    return [(int(rowid), float(score)) for rowid, score in conn.execute(_RANKED, (match, lowest, k))]


def merge(results: Sequence[list[tuple[int, float]]], k: int) -> list[int]:
    """The best `k` rowids of several scored lists, each row at its best score."""
    best: dict[int, float] = {}
    for result in results:
        for rowid, score in result:
            if score < best.get(rowid, 0.0):
                best[rowid] = score
    return [rowid for rowid, _ in sorted(best.items(), key=lambda item: (item[1], item[0]))[:k]]


def rank(
    conn: sqlite3.Connection,
    query: Query,
    k: int,
    frequencies: Frequencies | None = None,
    *,
    halves: bool = True,
) -> list[int]:
    """The rowids of the best `k` rows for `query`, best first (the queries of `plan`, with
    `halves`, one after the other on `conn`).

    Raises:
        sqlite3.Error: when the index cannot be read.
    """
    return merge([scored(conn, planned, k) for planned in plan(conn, query, frequencies, halves=halves)], k)
