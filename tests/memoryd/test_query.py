"""The query builder: only quoted terms reach FTS5 (M5a section 5; DESIGN 7 and 11)."""

from __future__ import annotations

import re
import sqlite3

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from boxmaker.memoryd.index.query import STOP_WORDS, build, cjk_bigrams, terms

# A MATCH string the builder may produce: quoted terms (a lone CJK character may carry " *"), joined by OR.
_QUOTED = r'"[^"]+"(?: \*)?'
_SHAPE = re.compile(rf"^(?:{_QUOTED}(?: OR {_QUOTED})*)?$")


@pytest.fixture(scope="module")
def fts() -> sqlite3.Connection:
    conn = sqlite3.connect(":memory:")
    conn.execute("CREATE VIRTUAL TABLE hits USING fts5(text, ctx, time, tokenize='porter unicode61')")
    conn.execute("INSERT INTO hits VALUES ('state of the art owner utc', '', '')")
    return conn


@settings(max_examples=400)
@given(st.text(max_size=120))
def test_the_builder_never_raises_and_never_passes_an_operator(text: str) -> None:
    query = build(text)
    assert _SHAPE.match(query.match), query.match
    inner = re.findall(r'"([^"]*)"', query.match)
    assert all(re.fullmatch(r"[^\W_]+", term) for term in inner)


@settings(max_examples=300)
@given(st.text(alphabet=st.sampled_from(list('abc -+*^:"(){}NEAR/ANDORNOT你好\u0300\x00')), max_size=40))
def test_every_built_query_runs_against_fts5(fts: sqlite3.Connection, text: str) -> None:
    query = build(text)
    if query.match:
        rows = fts.execute("SELECT rowid FROM hits WHERE hits MATCH ?", (query.match,)).fetchall()
        assert rows in ([], [(1,)])


@pytest.mark.parametrize(
    "text",
    [
        "state-of-the-art",
        "-owner",
        "owner-",
        "owner--utc",
        "owner - utc",
        "NOT owner",
        "owner AND",
        "(owner",
        "owner)",
        "col:owner",
        "{text}: owner",
        "owner*",
        "^owner",
        "NEAR(owner utc, 2)",
        "owner + utc",
        '"owner',
    ],
)
def test_hyphens_and_operators_never_raise(fts: sqlite3.Connection, text: str) -> None:
    """hermes #7824: a hyphen or an operator in a query must not raise."""
    query = build(text)
    rows = fts.execute("SELECT rowid FROM hits WHERE hits MATCH ?", (query.match,)).fetchall()
    assert rows == [(1,)]


def test_stop_words_dropped_unless_nothing_else_is_left() -> None:
    assert terms("What did Caroline research?") == ["caroline", "research"]
    assert terms("what is it") == ["what", "is", "it"]
    assert "may" not in STOP_WORDS  # a month


def test_terms_are_lowercased_and_deduplicated() -> None:
    assert terms("Owner OWNER owner's UTC") == ["owner", "utc"]


def test_cjk_runs_become_pieces_on_both_sides() -> None:
    assert terms("数据库") == ["数据", "据库"]
    assert terms("abc数据") == ["abc", "数据"]
    assert build("数").match == '"数" *'
    assert cjk_bigrams("我们在做数据库") == " 我们 们在 在做 做数 数据 据库 库 "
    assert cjk_bigrams("plain ascii") == "plain ascii"


# What the mutation run found untested (docs/mutation.md) -------------------------------------------


def test_only_a_lone_cjk_character_is_a_prefix_query() -> None:
    assert build("owner x 数").match == '"owner" OR "x" OR "数" *'
    assert build("数据").match == '"数据"'


def test_a_cjk_run_indexes_its_last_character_alone_only_when_it_is_longer_than_one() -> None:
    assert cjk_bigrams("数据") == " 数据 据 "
    assert cjk_bigrams("a 数 b") == "a  数  b"
