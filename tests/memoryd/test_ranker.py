"""`ranker.Ranker` (the compiled ``boxrank``) ranks as FTS5's bm25() does: the same rowids, the same
scores bit for bit, with frequencies remembered across appends and a deletion (M5a section 6; issue 16).
"""

from __future__ import annotations

import random
import shutil
import sqlite3
import sysconfig
import threading
import time
from pathlib import Path

import pytest

from boxmaker.memoryd.index import ranker
from boxmaker.memoryd.index.query import build, render_match
from boxmaker.memoryd.index.readers import Readers
from boxmaker.memoryd.index.schema import migrate, transaction
from boxmaker.memoryd.index.search import _BM25, BUDGET, GENERATION, WEIGHTS, Frequencies, plan, rank, runner

# Written for this test: a long-tailed vocabulary, so that questions mix common and rare words.
WORDS = [f"q{n}z" for n in range(300)]

_CC = (sysconfig.get_config_var("CC") or "cc").split()[0]
if Path("/usr/include/sqlite3.h").exists() and shutil.which(_CC):
    # with SQLite's header and a C compiler, setup.py builds the module: a silent fallback would hide
    # a broken build
    assert ranker.problem() == "", ranker.problem()
else:
    pytestmark = pytest.mark.skipif(bool(ranker.problem()), reason=ranker.problem() or "built")


_WEIGHTS = ", ".join(str(w) for w in WEIGHTS)
_COUNT = "SELECT count(*) FROM hits WHERE hits MATCH ?"


def made_rows(first: int, count: int, seed: int) -> list[tuple[int, str, str, str]]:
    """(rowid, text, ctx, time) rows of long-tailed words, the same for the same arguments."""
    rng = random.Random(seed)
    weights = [1 / (n + 1) for n in range(len(WORDS))]
    rows = []
    for rowid in range(first, first + count):
        text = " ".join(rng.choices(WORDS, weights, k=rng.randint(1, 16)))
        ctx = " ".join(rng.choices(WORDS, weights, k=rng.randint(0, 24)))
        rows.append((rowid, text, ctx, f"{rng.randint(1, 28)} June 2024"))
    return rows


def add_rows(conn: sqlite3.Connection, first: int, count: int, seed: int) -> None:
    with transaction(conn):
        for row in made_rows(first, count, seed):
            conn.execute("INSERT INTO hits(rowid, text, ctx, time) VALUES (?, ?, ?, ?)", row)
            conn.execute("INSERT INTO origins VALUES (?, 1, ?, 0, 0, 0, 2)", (row[0], row[0]))


@pytest.fixture
def index(tmp_path: Path) -> tuple[Path, sqlite3.Connection]:
    path = tmp_path / "index.sqlite"
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=OFF")  # a test's throwaway file
    migrate(conn)
    add_rows(conn, 1, BUDGET + 1200, seed=7)
    return path, conn


def questions(count: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    found = []
    for _ in range(count):
        common = rng.sample(WORDS[:8], rng.randint(0, 3))
        found.append(" ".join(common + rng.sample(WORDS[8:], rng.randint(0 if common else 1, 4))))
    return found


def same_as_bm25(
    fast: ranker.Ranker, conn: sqlite3.Connection, texts: list[str], frequencies: Frequencies
) -> None:
    """Each planned query scores the same under boxrank and bm25(), and the rankings agree."""
    for text in texts:
        query = build(text)
        assert fast.rank(query, 10, frequencies) == rank(conn, query, 10), text
        for match, lowest, phrases in plan(runner(conn), query):
            expected = conn.execute(
                f"SELECT rowid, {_BM25} FROM hits WHERE hits MATCH ? AND rowid >= ? ORDER BY 2, 1",
                (match, lowest),
            ).fetchall()
            known = tuple(int(conn.execute(_COUNT, (render_match([t]),)).fetchone()[0]) for t in phrases)
            marks = ", ".join("?" * len(phrases))
            got = fast._conn.execute(
                f"SELECT rowid, boxrank(hits, {_WEIGHTS}, {marks}) FROM hits"
                " WHERE hits MATCH ? AND rowid >= ? ORDER BY 2, 1",
                (*known, match, lowest),
            )
            assert got == expected, (text, match)


def test_boxrank_scores_equal_bm25_bit_for_bit(index: tuple[Path, sqlite3.Connection]) -> None:
    path, conn = index
    fast = ranker.Ranker(path, 1024)
    same_as_bm25(fast, conn, questions(60, seed=3), Frequencies(exact=True))
    assert fast._conn.remembered() > BUDGET  # the lengths of the rows it scored
    fast.close()


def test_remembered_frequencies_and_lengths_follow_appends_and_deletions(
    index: tuple[Path, sqlite3.Connection],
) -> None:
    path, conn = index
    fast = ranker.Ranker(path, 1024)
    frequencies = Frequencies(exact=True)
    texts = questions(40, seed=5)
    same_as_bm25(fast, conn, texts, frequencies)
    add_rows(conn, BUDGET + 1201, 700, seed=8)  # appended: each count grows by the rows after it
    same_as_bm25(fast, conn, texts, frequencies)
    with transaction(
        conn
    ):  # the newest rows taken out (as notes.md edited by hand does); the generation moves
        for rowid, text, ctx, time in made_rows(BUDGET + 1201, 700, seed=8):
            conn.execute(
                "INSERT INTO hits(hits, rowid, text, ctx, time) VALUES ('delete', ?, ?, ?, ?)",
                (rowid, text, ctx, time),
            )
        conn.execute("DELETE FROM origins WHERE rowid > ?", (BUDGET + 1200,))
        conn.execute("INSERT OR REPLACE INTO meta(key, value) VALUES ('generation', '1')")
    assert conn.execute(GENERATION).fetchone()[0] == "1"
    add_rows(conn, BUDGET + 1201, 700, seed=9)  # the same rowids again, other texts and lengths
    same_as_bm25(fast, conn, texts, frequencies)
    fast.close()


def test_readers_rank_the_same_with_and_without_the_compiled_ranking(
    index: tuple[Path, sqlite3.Connection], tmp_path: Path
) -> None:
    path, _ = index
    fast = Readers(path, tmp_path / "sessions")
    slow = Readers(path, tmp_path / "sessions")
    slow.ranking_problem = "switched off by the test"
    slow.frequencies = Frequencies()
    try:
        with fast._reader() as quick, slow._reader() as plain:
            assert quick.ranker is not None
            assert plain.ranker is None
            for text in questions(30, seed=9):
                query = build(text)
                expected = rank(plain.conn, query, 8, slow.frequencies)
                assert quick.ranker.rank(query, 8, fast.frequencies) == expected, text
    finally:
        fast.shutdown()
        slow.shutdown()


def test_the_ranker_refuses_what_it_cannot_do(index: tuple[Path, sqlite3.Connection], tmp_path: Path) -> None:
    path, _ = index
    with pytest.raises(sqlite3.OperationalError, match="cannot open the index"):
        ranker.Ranker(tmp_path / "missing.sqlite", 1024)
    fast = ranker.Ranker(path, 1024)
    with pytest.raises(sqlite3.OperationalError, match="boxrank: give one weight per column"):
        fast._conn.execute("SELECT boxrank(hits, 1.0) FROM hits WHERE hits MATCH 'q1z'", ())
    with pytest.raises(TypeError, match="parameter 1 is a list"):
        fast._conn.execute("SELECT ?", ([],))
    with pytest.raises(ValueError, match="takes 1 parameters, 2 given"):
        fast._conn.execute("SELECT ?", (1, 2))
    with pytest.raises(sqlite3.OperationalError, match="cannot prepare"):
        fast._conn.execute("SELEKT 1", ())
    assert fast._conn.execute("SELECT 1, 2.5, 'x', NULL, x'00'", ()) == [(1, 2.5, "x", None, b"\x00")]
    count = "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 5000000)"
    worker = threading.Thread(target=fast._conn.execute, args=(f"{count} SELECT count(*) FROM c", ()))
    worker.start()
    refused = []
    while worker.is_alive() and not refused:  # while it steps (the GIL let go), no other thread may use it
        try:
            fast._conn.execute("SELECT 1", ())
        except RuntimeError as exc:
            refused.append(str(exc))
            with pytest.raises(RuntimeError, match="in use by another thread"):
                fast.close()
        time.sleep(0.005)
    worker.join()
    assert refused == ["the ranking connection is in use by another thread"]
    fast.close()
    fast.close()
    with pytest.raises(sqlite3.OperationalError, match="closed"):
        fast._conn.execute("SELECT 1", ())


def test_a_term_common_before_rows_left_is_counted_again_on_both_paths(tmp_path: Path) -> None:
    # a term over the budget (so "common") whose rows mostly leave (notes.md edited by hand): both the
    # compiled ranking and bm25() must plan with its new count, as a fresh start would
    path = tmp_path / "index.sqlite"
    conn = sqlite3.connect(path, isolation_level=None)
    migrate(conn)
    rows = [(n, f"glorpx bulk filler {n}") for n in range(1, BUDGET + 101)]
    rows += [(BUDGET + 100 + n, f"glorpx keepme {n}") for n in range(1, 31)]
    rows += [(BUDGET + 130 + n, f"glorpy other {n}") for n in range(1, 101)]
    with transaction(conn):
        for rowid, text in rows:
            conn.execute("INSERT INTO hits(rowid, text, ctx, time) VALUES (?, ?, '', '')", (rowid, text))
            conn.execute("INSERT INTO origins VALUES (?, 1, ?, 0, 0, 0, 2)", (rowid, rowid))
    query = build("glorpx glorpy")
    fast, exact, capped = ranker.Ranker(path, 1024), Frequencies(exact=True), Frequencies()
    assert fast.rank(query, 5, exact) == rank(conn, query, 5, capped) == rank(conn, query, 5)
    with transaction(conn):
        for rowid, text in rows[: BUDGET + 100]:
            conn.execute(
                "INSERT INTO hits(hits, rowid, text, ctx, time) VALUES ('delete', ?, ?, '', '')",
                (rowid, text),
            )
        conn.execute("INSERT OR REPLACE INTO meta(key, value) VALUES ('generation', '1')")
    fresh = rank(conn, query, 5)
    assert set(fresh) <= set(range(BUDGET + 101, BUDGET + 131)), fresh  # the keepme rows lead
    assert fast.rank(query, 5, exact) == fresh
    assert rank(conn, query, 5, capped) == fresh
    fast.close()
