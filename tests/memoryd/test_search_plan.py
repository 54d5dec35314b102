"""The rare/common plan of `search` ranks as the full OR query does among the rows that hold a rare term
(M5a section 6; issue 16): the same rowids, in the same order, with the same bm25 scores."""

from __future__ import annotations

import collections
import itertools
import random
import sqlite3

import pytest

from boxmaker.memoryd.index.query import build
from boxmaker.memoryd.index.schema import migrate
from boxmaker.memoryd.index.search import _BM25, BUDGET, Frequencies, plan, rank

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
    planned = plan(conn, query, halves=False)
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
        planned = plan(table, build(text), frequencies, halves=False)
        shapes[len(planned), planned[0][1] > 0] += 1
        expected = reference(table, text, 10)
        assert rank(table, build(text), 10, frequencies, halves=False) == [rowid for rowid, _ in expected], (
            text
        )
    assert set(shapes) == {(1, False), (1, True), (2, False)}  # every plan was made


def _full_scores(conn: sqlite3.Connection, text: str) -> dict[int, float]:
    query = build(text)
    return dict(
        conn.execute(f"SELECT rowid, {_BM25} FROM hits WHERE hits MATCH ?", (query.match,)).fetchall()
    )


def test_terms_in_half_the_rows_leave_the_plan_and_the_top_k_stays_but_for_ties(
    table: sqlite3.Connection,
) -> None:
    """Leaving out terms held by at least half the rows (bm25's idf 1e-6) gives the unmodified plan's
    best ten rows, but for rows whose full-query scores are within 3e-6 of each other."""
    frequencies, exact = Frequencies(), Frequencies()
    rows = table.execute("SELECT count(*) FROM origins").fetchone()[0]
    halves = {
        w
        for w in WORDS[:12]
        if len(table.execute("SELECT rowid FROM hits WHERE hits MATCH ?", (w,)).fetchall()) >= rows / 2
    }
    assert 3 <= len(halves) < 12
    changed = 0
    for text in questions():
        query = build(text)
        before = rank(table, query, 10, exact, halves=False)
        after = rank(table, query, 10, frequencies)
        if plan(table, query, frequencies) != plan(table, query, exact, halves=False):
            changed += 1
            assert set(query.terms) & halves, text
        score = _full_scores(table, text)
        worst = score[before[-1]] if before else 0.0
        assert len(after) == len(before), text
        for rowid in set(after) ^ set(before):  # only ties at the k-th place differ
            assert abs(score.get(rowid, 0.0) - worst) <= 3e-6, text
        ordered = [score[rowid] for rowid in after]
        assert all(a <= b + 3e-6 for a, b in itertools.pairwise(ordered)), text
    assert changed > 20


def test_a_question_of_only_such_terms_keeps_them() -> None:
    """All of a question's terms in half the rows: the newest rows are ranked by them, as before."""
    conn = sqlite3.connect(":memory:", isolation_level=None)
    migrate(conn)
    for rowid in range(1, 2 * BUDGET + 2):
        text = "alpha beta" if rowid % 3 else f"alpha word{rowid}"
        conn.execute("INSERT INTO hits(rowid, text, ctx, time) VALUES (?, ?, '', '')", (rowid, text))
        conn.execute("INSERT INTO origins VALUES (?, 1, ?, 0, 0, 0, 2)", (rowid, rowid))
    query = build("alpha beta")
    assert plan(conn, query) == plan(conn, query, halves=False)
    assert len(rank(conn, query, 10)) == 10


def test_the_count_is_made_again_when_growth_or_deletions_may_have_changed_it() -> None:
    """A term once in half the rows is no longer left out once rows without it outgrow it, and a
    deletion recorded in `rows_deleted` is taken into account."""
    conn = sqlite3.connect(":memory:", isolation_level=None)
    migrate(conn)

    def add(first: int, last: int, text: str) -> None:
        for rowid in range(first, last + 1):
            conn.execute("INSERT INTO hits(rowid, text, ctx, time) VALUES (?, ?, '', '')", (rowid, text))

    add(1, 3000, "common")
    add(3001, 5000, "other")
    frequencies = Frequencies()
    assert frequencies.halves(conn, ["common", "other"]) == {"common"}
    add(5001, 5999, "other")
    assert frequencies.halves(conn, ["common"]) == {"common"}  # 3,000 of 5,999
    add(6000, 6001, "other")
    assert frequencies.halves(conn, ["common"]) == set()  # 3,000 of 6,001
    for rowid in range(1, 3):
        conn.execute(
            "INSERT INTO hits(hits, rowid, text, ctx, time) VALUES ('delete', ?, 'common', '', '')", (rowid,)
        )
    conn.execute("INSERT INTO meta VALUES ('rows_deleted', '2')")
    add(6002, 6003, "common")  # 3,000 of 6,001 again, after two deletions and two appends
    assert frequencies.halves(conn, ["common"]) == set()
    add(6004, 6004, "common")
    assert frequencies.halves(conn, ["common"]) == {"common"}
