"""Recall's ranking with bm25 from remembered document frequencies, on a connection of its own (M5a
section 6; issue 16).

Scored by FTS5's bm25(), each query of `search.plan` first counts every row that holds each of its
terms (the terms' idf), every time: on a large index a common word makes that count most of a recall.
`_rank`, the one compiled module (C, built by setup.py where a C compiler and SQLite's header are),
adds ``boxrank``: the same bm25, the same arithmetic in the same order, given the document frequencies
instead of counting them. `search.Frequencies` (``exact``) remembers them between recalls and counts
only the rows added since. The connection also remembers each scored row's length (FTS5 reads it from
its docsize table, a lookup per row: without this, most of a ranking's time). A recall's statements
run in one read transaction on the ranker's connection, so the frequencies, the row count and the
average row length are of one snapshot, and the scores equal bm25()'s bit for bit
(tests/memoryd/test_ranker.py).

Used only when the compiled module loads and links the same SQLite library as Python's sqlite3 (two
copies of SQLite in one process would not see each other's POSIX locks on the index file); otherwise
`problem` says why, and recall scores with bm25() on its Python connection: the same ranking, slower.
"""

from __future__ import annotations

import ctypes
import functools
import os
import sqlite3
from contextlib import suppress
from pathlib import Path

from boxmaker.memoryd.index.query import Query, render_match
from boxmaker.memoryd.index.schema import LAST_ROWID
from boxmaker.memoryd.index.search import GENERATION, WEIGHTS, Frequencies, Planned, merge, plan

try:
    from boxmaker.memoryd.index import _rank
except ImportError as exc:  # built without a compiler or sqlite3.h: bm25() instead
    _rank = None  # type: ignore[assignment]
    _MISSING = f"the compiled ranking module is not built ({exc})"
else:
    _MISSING = ""


@functools.cache
def problem() -> str:
    """ "" when `Ranker` can be used, else a sentence saying why not."""
    if _rank is None:
        return _MISSING
    import _sqlite3

    try:
        theirs = ctypes.cast(ctypes.CDLL(_sqlite3.__file__).sqlite3_libversion, ctypes.c_void_p).value
    except (OSError, AttributeError) as exc:
        return f"cannot tell which SQLite Python's sqlite3 uses ({exc})"
    if theirs != _rank.LIBRARY_ADDRESS:
        return (
            f"the compiled ranking module links another SQLite ({_rank.SQLITE_VERSION}) than Python's "
            f"sqlite3 ({sqlite3.sqlite_version})"
        )
    return ""


@functools.cache
def _ranked(phrases: int) -> str:
    """The ranked query for a MATCH of `phrases` phrases: their frequencies, then MATCH, lowest rowid, k."""
    weights = ", ".join(str(w) for w in WEIGHTS)
    marks = ", ".join("?" * phrases)
    return (
        f"SELECT rowid, boxrank(hits, {weights}, {marks}) AS score FROM hits"
        " WHERE hits MATCH ? AND rowid >= ? ORDER BY score LIMIT ?"
    )


def _joined(planned: list[Planned]) -> list[tuple[str, int, tuple[str, ...], int]]:
    """`planned` with its two queries (rare and common, rare alone) made one, and the number of
    phrases at the end of each MATCH that only select rows (scored with a negative frequency: left out).

    The two queries score the rows with a rare term, those with a common term too by every term; the
    best of a row's two scores is the score of the first, whose phrases are a superset. One query
    selects the same rows and scores each by every term: ``(rare) AND (common OR rare)``, with the
    repeated rare phrases not scored. Its scores are the two queries' best, bit for bit (a term a row
    lacks adds exactly 0.0), and it scores each row once.
    """
    if len(planned) != 2:
        return [(match, lowest, phrases, 0) for match, lowest, phrases in planned]
    (_, _, every), (rare_match, _, rare) = planned
    common = every[len(rare) :]
    return [(f"({rare_match}) AND ({render_match(list(common))} OR {rare_match})", 0, every, len(rare))]


class Ranker:
    """A read-only connection to an index file that ranks with ``boxrank``; one thread at a time.

    Raises (constructor):
        sqlite3.OperationalError: when the file cannot be opened or the function cannot be added.
        RuntimeError: when `problem` is not "" (check it first).
    """

    def __init__(self, path: Path, cache_kib: int) -> None:
        if problem() or _rank is None:
            raise RuntimeError(problem())
        self._conn = _rank.Ranker(os.fsencode(path.absolute()), cache_kib)  # bytes: any home path
        self._generation = -1  # of the rows whose lengths the connection remembers

    def rank(self, query: Query, k: int, frequencies: Frequencies) -> list[int]:
        """The rowids of the best `k` rows for `query`, best first: `search.rank`'s result, each
        planned query scored by ``boxrank`` with `frequencies` (which must be ``exact``).

        Raises:
            sqlite3.Error: when the index cannot be read.
        """
        run = self._conn.execute
        run("BEGIN", ())
        try:
            generation = int(run(GENERATION, ())[0][0])
            if generation != self._generation:  # rows left the table: a rowid may come back, longer
                self._conn.forget_lengths()
                self._generation = generation
            size = int(run(LAST_ROWID, ())[0][0])
            results = []
            for match, lowest, phrases, repeats in _joined(plan(run, query, frequencies, generation)):
                known = [frequencies.get(run, term, size, generation) for term in phrases]
                rows = run(_ranked(len(phrases) + repeats), (*known, *[-1] * repeats, match, lowest, k))
                results.append([(int(rowid), float(score)) for rowid, score in rows])
        except BaseException:
            with suppress(sqlite3.Error):
                run("ROLLBACK", ())
            raise
        run("COMMIT", ())
        return merge(results, k)

    def close(self) -> None:
        """Close the connection (idempotent)."""
        self._conn.close()
