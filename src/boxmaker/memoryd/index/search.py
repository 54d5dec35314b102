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
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Sequence
from typing import Any

from boxmaker.memoryd.index.query import Query, render_match
from boxmaker.memoryd.index.schema import LAST_ROWID

#: bm25 column weights: text, ctx, time.
WEIGHTS = (1.0, 0.5, 0.3)
#: At most this many rows are scored by the rare terms' query.
BUDGET = 2000

_BM25 = f"bm25(hits, {', '.join(str(w) for w in WEIGHTS)})"
_RANKED = f"SELECT rowid, {_BM25} FROM hits WHERE hits MATCH ? AND rowid >= ? ORDER BY {_BM25} LIMIT ?"
_NEWEST = "SELECT rowid FROM hits WHERE hits MATCH ? ORDER BY rowid DESC LIMIT 1 OFFSET ?"
_COUNT = "SELECT count(*) FROM (SELECT 1 FROM hits WHERE hits MATCH ? LIMIT ?)"
_COUNT_AFTER = "SELECT count(*) FROM hits WHERE hits MATCH ? AND rowid > ?"
#: The generation of the index's rows: bumped by every change that takes rows out of the search table.
GENERATION = "SELECT coalesce((SELECT value FROM meta WHERE key = 'generation'), '0')"

#: A statement runner: SQL and its parameters in, every row out (a connection's, or `ranker.Ranker`'s).
Run = Callable[[str, tuple[Any, ...]], list[tuple[Any, ...]]]


def runner(conn: sqlite3.Connection) -> Run:
    """`conn` as a `Run`."""
    return lambda sql, params: conn.execute(sql, params).fetchall()


class Frequencies:
    """Each term's document frequency, remembered between queries.

    Counted up to `BUDGET` + 1 (all the plan needs) or, when `exact` (for `ranker`, which is given
    them instead of counting them per query as bm25() does), exactly. Rows are only ever appended
    except when the generation (`GENERATION`) moves, so a term over the budget stays over it, and an
    exact count made at index size S grows by the count of the rows after S. A count is remembered with
    the index size and generation it was made at. Thread-safe enough: a lost update only costs a recount.
    """

    def __init__(self, exact: bool = False) -> None:
        self.exact = exact
        self._known: dict[str, tuple[int, int, int]] = {}

    def get(self, run: Run, term: str, size: int, generation: int = 0) -> int:
        """The term's frequency in an index of `size` rows (at most `BUDGET` + 1 unless `exact`)."""
        known = self._known.get(term)
        if known is not None and known[2] != generation:
            known = None
        if self.exact:
            if known is not None and known[1] == size:
                return known[0]
            if known is not None and known[1] < size:
                count = known[0] + int(run(_COUNT_AFTER, (render_match([term]), known[1]))[0][0])
            else:
                count = int(run(_COUNT_AFTER, (render_match([term]), 0))[0][0])
        else:
            if known is not None and (known[0] > BUDGET or known[1] == size):
                return known[0]
            count = int(run(_COUNT, (render_match([term]), BUDGET + 1))[0][0])
        if len(self._known) > 200_000:
            self._known.clear()
        self._known[term] = (count, size, generation)
        return count


#: One query to run: its MATCH string, the lowest rowid it may score (0: any), and its terms in the
#: order they stand in the MATCH string (FTS5 numbers its phrases so).
Planned = tuple[str, int, tuple[str, ...]]


def plan(
    run: Run, query: Query, frequencies: Frequencies | None = None, generation: int = 0
) -> list[Planned]:
    """The queries to run for `query`: the full OR query alone; or, on a large index with a common
    term, the rare-and-common query and the rare-only query; or, when every term is common, the
    full query over the newest rows (see the module's docstring).

    Raises:
        sqlite3.Error: when the index cannot be read.
    """
    terms = list(query.terms)
    size = int(run(LAST_ROWID, ())[0][0])
    if size <= BUDGET:
        return [(query.match, 0, query.terms)]
    known = frequencies or Frequencies()
    frequency = {t: known.get(run, t, size, generation) for t in terms}
    ordered = sorted(terms, key=lambda t: frequency[t])
    if frequency[ordered[0]] > BUDGET:
        newest = run(_NEWEST, (query.match, BUDGET - 1))
        return [(query.match, int(newest[0][0]) if newest else 0, query.terms)]
    rare = [ordered[0]]
    spent = frequency[ordered[0]]
    for term in ordered[1:]:
        if spent + frequency[term] > BUDGET:
            break
        rare.append(term)
        spent += frequency[term]
    common = [t for t in terms if t not in rare]
    if not common:
        return [(query.match, 0, query.terms)]
    rare_match = render_match(rare)
    return [
        (f"({rare_match}) AND ({render_match(common)})", 0, (*rare, *common)),
        (rare_match, 0, tuple(rare)),
    ]


def scored(run: Run, planned: Planned, k: int) -> list[tuple[int, float]]:
    """The best `k` (rowid, bm25) of one planned query (lower scores are better).

    Raises:
        sqlite3.Error: when the index cannot be read.
    """
    match, lowest, _ = planned
    return [(int(rowid), float(score)) for rowid, score in run(_RANKED, (match, lowest, k))]


def merge(results: Sequence[list[tuple[int, float]]], k: int) -> list[int]:
    """The best `k` rowids of several scored lists, each row at its best score."""
    best: dict[int, float] = {}
    for result in results:
        for rowid, score in result:
            if score < best.get(rowid, 0.0):
                best[rowid] = score
    return [rowid for rowid, _ in sorted(best.items(), key=lambda item: (item[1], item[0]))[:k]]


def rank(conn: sqlite3.Connection, query: Query, k: int, frequencies: Frequencies | None = None) -> list[int]:
    """The rowids of the best `k` rows for `query`, best first (the queries of `plan`, one after
    the other on `conn`, scored by FTS5's bm25()).

    Raises:
        sqlite3.Error: when the index cannot be read.
    """
    run = runner(conn)
    generation = int(run(GENERATION, ())[0][0])  # remembered counts from before rows left are not used
    return merge([scored(run, planned, k) for planned in plan(run, query, frequencies, generation)], k)
