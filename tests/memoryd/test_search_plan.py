"""The rare/common plan of `search` ranks as the full OR query does among the rows that hold a rare term
(M5a section 6; issue 16): the same rowids, in the same order, with the same bm25 scores."""

from __future__ import annotations

import collections
import random
import sqlite3

import pytest

from boxmaker.memoryd.index.query import build
from boxmaker.memoryd.index.schema import migrate
from boxmaker.memoryd.index.search import _BM25, BUDGET, Frequencies, plan, rank, runner

# Written for this test: a long-tailed vocabulary, so that questions mix common and rare words.
WORDS = [f"w{n}x" for n in range(400)]


@pytest.fixture(scope="module")
def table() -> sqlite3.Connection:
    """An index of BUDGET + 1,500 rows of long-tailed words (texts, contexts and dates)."""
    rng = random.Random(16)
    weights = [1 / (rank + 1) for rank in range(len(WORDS))]
    conn = sqlite3.connect(":memory:", isolation_level=None)
    migrate(conn)
    rows = BUDGET + 1500
    for rowid in range(1, rows + 1):
        text = " ".join(rng.choices(WORDS, weights, k=rng.randint(3, 14)))
        ctx = " ".join(rng.choices(WORDS, weights, k=rng.randint(0, 20)))
        time = f"{rng.randint(1, 28)} May 2023"
        conn.execute("INSERT INTO hits(rowid, text, ctx, time) VALUES (?, ?, ?, ?)", (rowid, text, ctx, time))
        conn.execute("INSERT INTO origins VALUES (?, 1, ?, 0, 0, 0, 2)", (rowid, rowid))
    return conn


def questions() -> list[str]:
    """Questions of common words (the first ten), rarer ones, and both."""
    rng = random.Random(61)
    found = []
    for _ in range(150):
        common = rng.sample(WORDS[:10], rng.randint(0, 3))
        found.append(" ".join(common + rng.sample(WORDS[10:], rng.randint(0 if common else 1, 4))))
    return found


def reference(conn: sqlite3.Connection, text: str, k: int) -> list[tuple[int, float]]:
    """The best `k` (rowid, bm25) of the full OR query among the rows holding one of the rare terms
    `plan` chose (all rows when it chose one query)."""
    query = build(text)
    planned = plan(runner(conn), query)
    scored = conn.execute(f"SELECT rowid, {_BM25} FROM hits WHERE hits MATCH ?", (query.match,)).fetchall()
    if len(planned) == 2:
        rare = {row[0] for row in conn.execute("SELECT rowid FROM hits WHERE hits MATCH ?", (planned[1][0],))}
        scored = [row for row in scored if row[0] in rare]
    elif planned[0][1]:
        scored = [row for row in scored if row[0] >= planned[0][1]]
    return sorted(scored, key=lambda row: (row[1], row[0]))[:k]


def test_the_plan_ranks_as_the_full_query_among_rows_with_a_rare_term(table: sqlite3.Connection) -> None:
    frequencies = Frequencies()
    shapes = collections.Counter()
    for text in questions():
        planned = plan(runner(table), build(text), frequencies)
        shapes[len(planned), planned[0][1] > 0] += 1
        expected = reference(table, text, 10)
        assert rank(table, build(text), 10, frequencies) == [rowid for rowid, _ in expected], text
    assert set(shapes) == {(1, False), (1, True), (2, False)}  # every plan was made
