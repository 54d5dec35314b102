"""The context column's stop words (issue 16, schema version 3): each is indexed as one filler token, so
every row keeps its length in tokens and every query term its bm25 score, in a smaller index."""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest

from boxmaker.memoryd import tool as memory_tool
from boxmaker.memoryd.index.query import FILLER, STOP_WORDS, TOKENIZER, build, stop_filled, terms
from boxmaker.memoryd.index.search import WEIGHTS
from boxmaker.memoryd.index.walk import (
    CONTEXT_LIMIT,
    Rows,
    Walk,
    context_text,
    searchable_text,
    walk_records,
)
from boxmaker.memoryd.service import Memoryd
from boxmaker.proto.labels import DataClass
from boxmaker.proto.messages import MemoryCall, SessionUpdated, ToolRequest
from boxmaker.proto.records import Assistant, User
from conftest import record, start, write_log

# Written for these tests: apostrophes, underscores, case, digits, diacritics, CJK and dashes beside
# stop words, and stop words inside longer words.
TEXTS = [
    "The cat and I went to the park, didn't we? It was THE best day of my life.",
    "here_the thé the数据 2the THE-end -- and/or x.y.the 'the' (the) [an]",
    "Melanie: I'm painting a sunset over the lake, because it calms me down.",
    "Caroline: Have you ever been to Perth? I'd love to go there in May 2023.",
    "数据库系统设计 is what we talked about before the deploy of version 2.1",
    "Nothing here but stop words: is it what it was? No, not at all.",
    "Théo and Zoë went to the café; they're off to Zürich then.",
    "there their theirs them themselves then thence thesis theme",
]


def fts(conn: sqlite3.Connection, name: str) -> None:
    conn.execute(
        f"CREATE VIRTUAL TABLE {name} USING fts5(text, ctx, time, content='', tokenize='{TOKENIZER}')"
    )
    conn.execute(f"CREATE VIRTUAL TABLE {name}_v USING fts5vocab({name}, 'instance')")


def tokens(conn: sqlite3.Connection, text: str) -> list[str]:
    conn.execute("DELETE FROM one")
    conn.execute("INSERT INTO one(rowid, x) VALUES (1, ?)", (text,))
    return [str(row[0]) for row in conn.execute("SELECT term FROM one_v ORDER BY offset")]


def one_for_one(before: list[str], after: list[str]) -> bool:
    """True when `after` is `before` with some stop words as the filler."""
    return len(after) == len(before) and all(
        new == old or (new == FILLER and old in STOP_WORDS) for old, new in zip(before, after, strict=True)
    )


@pytest.fixture
def conn() -> Iterator[sqlite3.Connection]:
    conn = sqlite3.connect(":memory:")
    # the index's tokenizer without its stemmer (which changes no boundary), so tokens are words
    conn.execute(f"CREATE VIRTUAL TABLE one USING fts5(x, tokenize='{TOKENIZER.removeprefix('porter ')}')")
    conn.execute("CREATE VIRTUAL TABLE one_v USING fts5vocab(one, 'instance')")
    yield conn
    conn.close()


@pytest.mark.parametrize("text", TEXTS)
def test_each_stop_word_becomes_one_filler_token_and_every_other_token_stays(
    conn: sqlite3.Connection, text: str
) -> None:
    before = tokens(conn, text)
    after = tokens(conn, stop_filled(text))
    assert one_for_one(before, after)
    assert FILLER in after or not set(re.split(r"[^a-z]+", text.lower())) & STOP_WORDS


def test_no_query_term_can_be_the_filler() -> None:
    assert FILLER not in terms(f"what {FILLER} is {FILLER}x")
    assert FILLER not in build(FILLER).match


def test_every_query_term_scores_every_row_as_without_filling() -> None:
    """Every term but those the index folds or stems to a stop word's form ("thé", "owned": they no
    longer find that stop word in the context column)."""
    conn = sqlite3.connect(":memory:")
    fts(conn, "plain")
    fts(conn, "filled")
    for rowid, text in enumerate(TEXTS, start=1):
        ctx = "\n".join(TEXTS[max(0, rowid - 3) : rowid - 1])
        conn.execute(
            "INSERT INTO plain(rowid, text, ctx, time) VALUES (?, ?, ?, '8 May 2023')", (rowid, text, ctx)
        )
        conn.execute(
            "INSERT INTO filled(rowid, text, ctx, time) VALUES (?, ?, ?, '8 May 2023')",
            (rowid, text, stop_filled(ctx)),
        )
    weights = ", ".join(map(str, WEIGHTS))
    stop_stems = stems(conn, " ".join(STOP_WORDS))
    words = {w for text in TEXTS for w in terms(text)} | {"may 2023 perth", "cat park painting"}
    for word in sorted(words):
        match = build(word).match
        scores = {
            name: dict(
                conn.execute(
                    f"SELECT rowid, bm25({name}, {weights}) FROM {name} WHERE {name} MATCH ?", (match,)
                )
            )
            for name in ("plain", "filled")
        }
        if not stems(conn, word) & stop_stems:
            assert scores["filled"] == pytest.approx(scores["plain"], rel=1e-12), word


def stems(conn: sqlite3.Connection, text: str) -> set[str]:
    """The index's terms of `text` (folded and stemmed)."""
    conn.execute(f"CREATE VIRTUAL TABLE IF NOT EXISTS stem USING fts5(x, tokenize='{TOKENIZER}')")
    conn.execute("CREATE VIRTUAL TABLE IF NOT EXISTS stem_v USING fts5vocab(stem, 'instance')")
    conn.execute("DELETE FROM stem")
    conn.execute("INSERT INTO stem(rowid, x) VALUES (1, ?)", (text,))
    return {str(row[0]) for row in conn.execute("SELECT term FROM stem_v")}


def walked(records: list[User | Assistant], split: int | None = None) -> Rows:
    rows = Rows()
    lines = [(n * 100, 0) for n in range(len(records))]
    walk = Walk()
    cut = len(records) if split is None else split
    walk_records(1, 0, records[:cut], lines[:cut], walk, max_class=DataClass.PRIVATE, rows=rows)
    if split is not None:  # resumed as a catch-up does: the tail as the index keeps it, nothing else
        walk = Walk(walk.rank, walk.untrusted, list(walk.tail))
        walk_records(1, cut, records[cut:], lines[cut:], walk, max_class=DataClass.PRIVATE, rows=rows)
    return rows


def test_the_context_of_a_resumed_walk_and_of_long_texts_is_the_filled_unfilled_one(
    conn: sqlite3.Connection,
) -> None:
    long = "the deploy of the " * (CONTEXT_LIMIT // 9)
    texts = [*TEXTS, long, long + "x", "after the long ones", "and then the end"]
    records: list[User | Assistant] = [
        User(time="2023-05-08T10:00:00Z", content=t)
        if i % 2
        else Assistant(time="2023-05-08T10:00:00Z", content=t)
        for i, t in enumerate(texts)
    ]
    whole = walked(records)
    assert walked(records, split=5).searchable == whole.searchable
    contexts = [context_text(ctx) for _, ctx, _ in whole.searchable]
    assert all(FILLER in ctx for ctx in contexts[1:])
    tail: list[str] = []
    for text, ctx in zip(texts, contexts, strict=True):
        unfilled = searchable_text("\n".join(tail), 2 * CONTEXT_LIMIT)
        assert one_for_one(tokens(conn, unfilled), tokens(conn, ctx))
        tail = [*tail[-1:], text[:CONTEXT_LIMIT]]


def test_a_lone_surrogate_in_a_context_text_is_indexed_and_found_through_it(
    home: Path, service: Memoryd
) -> None:
    write_log(
        home,
        "chat-context",
        [
            start(),
            record("user", content="the ocelot \ud800 sleeps in the barn"),
            record("assistant", content="And what did it eat?"),
            record("user", content="A mouse, I think."),
        ],
    )
    service.handle("session_updated", SessionUpdated(session="chat-context"))
    request = ToolRequest(session="chat-asker", call_id="c1", tool="recall", arguments={"query": "ocelot"})
    found = memory_tool.call(
        service.memory, MemoryCall(request=request, taint=DataClass.PRIVATE, untrusted=False)
    ).output
    assert "the ocelot \ufffd sleeps in the barn" in found  # its own row
    assert "And what did it eat?" in found
    assert "A mouse, I think." in found
