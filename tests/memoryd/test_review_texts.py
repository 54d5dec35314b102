"""What review computes fast (issue 16) against the plain way it stands for: notes.md's legacy and marked
notes found by one scan (`notesview.legacy_or_marked`) and every note parsed by one pattern
(`notesview.parse_all`) against `notes.parse`; texts' keys and rule reading in bulk (`texts.facts`) and
near pairs (`texts.near_pairs`) against one text and one pair at a time; and a real memoryd's plan from
the few notes against the plan from every note."""

from __future__ import annotations

import bisect
import difflib
from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_skeptic import note

from boxmaker.memoryd.files.notes import Note, parse
from boxmaker.memoryd.files.notesview import legacy_or_marked, parse_all, parse_bytes
from boxmaker.memoryd.items.store import item_id_of
from boxmaker.memoryd.review import plan, sections
from boxmaker.memoryd.review.texts import NEAR, facts, lcs_length, near_pairs, normalised, reads_like_rule
from boxmaker.memoryd.service import Memoryd
from boxmaker.proto.messages import MemoryAdmin

MARKERS = sections.LEGACY_MARKERS

#: Lines notes.md can hold: captures as memoryd writes them, legacy and odd headers (an impossible date,
#: empty or spaced fields, a CR, a session run on), moved and dropped entries, markers in bodies and
#: headers, lines that only look like headers.
LINES = [
    "§ noted 2021-01-04T08:00Z in session chat-1 · private · mem-2021-01-04-001 · knowledge",
    "§ noted 2021-01-04T08:00Z in session chat-1 · secret · untrusted · mem-2024-02-29-012",
    "§ noted 2021-01-04T08:00Z in session chat-1 · private",
    "§ noted 2021-01-04T08:00Z in session chat-1",
    "§ noted 2021-01-04T08:00Z in session chat-1 · private · mem-2021-02-30-001 · knowledge",
    "§ noted 2021-01-04T08:00Z in session chat-1 · private · mem-2023-02-29-001",
    "§ noted 2021-01-04T08:00Z in session chat-1 · private · mem-2100-02-29-001",
    "§ noted 2021-01-04T08:00Z in session chat-1 · private · mem-2000-02-29-001",
    "§ noted 2021-01-04T08:00Z in session chat-1 · private · x · mem-0000-01-01-001",
    "§ noted 2021-01-04T08:00Z in session chat-1 ·  · mem-2021-01-04-001",
    "§ noted 2021-01-04T08:00Z in session chat-1 · · mem-2021-01-04-001",
    "§ noted 2021-01-04T08:00Z in session chat-1 · a b · mem-2021-01-04-0012 · k",
    "§ noted 2021-01-04T08:00Z in session chat-1 · mem-2021-01-04-001x · k",
    "§ noted 2021-01-04T08:00Z in session chat-1 · private · mem-2021-01-04-001\r",
    "§ noted 2021-01-04T08:00Z in session chat-1 · private · mem-2021-01-04-001 [待清理]",
    "§ noted 2021-01-04T08:00Z in session chat-1 · a·b · mem-2021-01-04-001",
    "§ noted 2021-01-04T08:00Z in session chat-1 · 20°C\x85 · mem-2021-01-04-001 · §",
    "§ noted 2021-01-04T08:00Z in session chat-1 · mem-2021-01-04-001·",
    "§ noted 2021-01-04T08:00Z in session Chat-1 · private",
    "§ noted 2021-01-04T08:00Z in session chat-1x · mem-2021-01-04-001",
    "§ moved 2021-01-04T08:00Z from memory.md in session chat-2",
    "§ dropped 2021-01-04T08:00Z from user.md in session chat-2 · x",
    "§ bogus header",
    "§ ",
    "body text",
    "[待清理] body",
    "x [待确认]",
    "  [待确",
    "认]",
    "",
    "   ",
]


notes_texts = st.lists(st.sampled_from(LINES), max_size=14).map("\n".join) | st.lists(
    st.sampled_from(LINES), max_size=14
).map(lambda lines: "\n".join(lines) + "\n")


def _wanted(note: Note) -> bool:
    return (note.kind == "noted" and item_id_of(note) is None) or any(m in note.text for m in MARKERS)


@settings(max_examples=400, deadline=None)
@given(notes_texts)
def test_legacy_or_marked_gives_every_note_review_needs_exactly_as_parsed(text: str) -> None:
    every = parse(text)
    picked = legacy_or_marked(text, MARKERS)
    assert [n.position for n in picked] == sorted({n.position for n in picked})
    assert all(every[n.position] == n for n in picked)
    assert {n.position for n in every if _wanted(n)} <= {n.position for n in picked}


def test_legacy_or_marked_leaves_out_the_notes_memoryd_writes() -> None:
    captures = "".join(
        f"§ noted 2021-01-04T08:{n:02d}Z in session chat-{n} · private · mem-2021-01-04-{n:03d} · knowledge\n"
        f"Text {n}.\n\n"
        for n in range(1, 60)
    )
    assert legacy_or_marked(captures, MARKERS) == []
    typed = (
        "Typed first [待确认].\n\n"
        + captures
        + "§ noted 2021-01-05T08:00Z in session chat-z · private\nOld.\n"
    )
    assert [(n.position, n.text) for n in legacy_or_marked(typed, MARKERS)] == [
        (0, "Typed first [待确认]."),
        (60, "Old."),
    ]


@settings(max_examples=400, deadline=None)
@given(notes_texts)
def test_parse_all_is_notes_parse(text: str) -> None:
    assert parse_all(text) == parse(text)


PIECES = [
    "Always do X.",
    "never",
    "whenever",
    "Mustard",
    "don't ever",
    "don’t ever",
    "Ｆｕｌｌ width ALWAYS",
    "a\x00b",
    "!!",
    "From now on, x",
    "from  now on",
    "Café must",
    "ever-y time",
    "every time",
    "İstanbul NEVER",
    "snake_case",
    "tab\tever",
    "mu-st",
    "Restart the okapi service",
]


@settings(max_examples=200, deadline=None)
@given(st.lists(st.lists(st.sampled_from(PIECES), max_size=4).map(" ".join), max_size=60))
def test_facts_are_the_texts_one_by_one(texts: list[str]) -> None:
    keys, ruled = facts(texts)
    assert keys == [hash(normalised(t).replace(" ", "").encode("utf-8", "surrogatepass")) for t in texts]
    assert ruled == [n for n, t in enumerate(texts) if reads_like_rule(t)]


def _near_pairs_one_by_one(texts: Mapping[int, str], distinct: Sequence[int]) -> list[tuple[int, int]]:
    """Every pair of close lengths whose character bags reach `NEAR`, then difflib's ratio."""
    by_length = sorted(distinct, key=lambda i: len(texts[i]))
    lengths = [len(texts[i]) for i in by_length]
    found = []
    for x, a in enumerate(by_length):
        for b in by_length[x + 1 : bisect.bisect_right(lengths, len(texts[a]) * (2 - NEAR) / NEAR)]:
            shared = sum((Counter(texts[a]) & Counter(texts[b])).values())
            if 2 * shared < NEAR * (len(texts[a]) + len(texts[b])):
                continue
            one, two = (a, b) if a < b else (b, a)
            if difflib.SequenceMatcher(None, texts[one], texts[two], autojunk=False).ratio() >= NEAR:
                found.append((one, two))
    return sorted(found)


@settings(max_examples=300, deadline=None)
@given(
    st.text(alphabet="aab c", max_size=30), st.lists(st.lists(st.integers(0, 40), max_size=4), max_size=12)
)
def test_near_pairs_are_every_pair_compared(base: str, edits: list[list[int]]) -> None:
    texts: dict[int, str] = {}
    for n, changes in enumerate(edits):
        text = list(base)
        for change in changes:
            if change % 3 == 0 and text:
                del text[change % len(text)]
            else:
                text.insert(change % (len(text) + 1), "abc "[change % 4])
        texts[n] = "".join(text)
    distinct = sorted({t: n for n, t in reversed(texts.items())}.values())
    assert near_pairs(texts, distinct) == _near_pairs_one_by_one(texts, distinct)


def test_the_plan_from_the_few_notes_is_the_plan_from_every_note(home: Path, service: Memoryd) -> None:
    """notes.md with a hand-typed start, legacy notes, markers in bodies and in a header, a moved entry
    and captures between them: review's sections equal those built from every parsed note."""
    note(service, "Restart the okapi service after upgrades.")
    notes_md = home / "memory" / "notes.md"
    with notes_md.open("a") as handle:
        handle.write(
            "§ noted 2026-09-01T10:00Z in session chat-legacy · private\nA legacy note [待清理]\n\n"
            "§ moved 2026-09-01T10:01Z from memory.md in session chat-y\nMoved [待确认] entry\n\n"
            "§ noted 2026-09-01T10:02Z in session chat-legacy · private · [待清理]\nHeader marker only\n\n"
        )
    note(service, "Never deploy the okapi on Fridays.")
    notes_md.write_text("Typed by hand [待确认].\n\n" + notes_md.read_text())
    inputs = plan.gather(service.memory.writer, service.memory.controls)
    every = type(inputs)(
        **{**{f: getattr(inputs, f) for f in inputs.__slots__}, "notes": parse_all(notes_md.read_text())}
    )
    assert [s.data() for s in sections.build(inputs)] == [s.data() for s in sections.build(every)]
    reply = service.handle("memory_admin", MemoryAdmin(command="review", arg="", args={}))
    found = {s["name"]: s for s in reply.data["sections"]}
    assert [r.get("note") for r in found["pending-cleanup"]["rows"] if r.get("legacy_marker")] == [
        "note/0/",
        "note/2/2026-09-01T10:00Z",
        "note/3/2026-09-01T10:01Z",
    ]
    assert [r["note"] for r in found["schema"]["rows"]] == [
        "note/0/",
        "note/2/2026-09-01T10:00Z",
        "note/4/2026-09-01T10:02Z",
    ]


def _lcs_one_by_one(a: str, b: str) -> int:
    row = [0] * (len(b) + 1)
    for x in a:
        diagonal = 0
        for j, y in enumerate(b, start=1):
            diagonal, row[j] = row[j], diagonal + 1 if x == y else max(row[j], row[j - 1])
    return row[-1]


@settings(max_examples=400, deadline=None)
@given(st.text(alphabet="abcé ", max_size=40), st.text(alphabet="abcé ", max_size=40))
def test_lcs_length_is_the_longest_common_subsequence(a: str, b: str) -> None:
    assert lcs_length(a, b) == _lcs_one_by_one(a, b)
    matched = sum(
        block.size for block in difflib.SequenceMatcher(None, a, b, autojunk=False).get_matching_blocks()
    )
    assert matched <= lcs_length(a, b)


def test_the_view_reads_bytes_as_the_store_reads_text(tmp_path: Path) -> None:
    """notes.md scanned or parsed as bytes gives what the decoded text gives; a BOM or CRLF file is read
    as the store reads it; a file that is not UTF-8 or is missing is refused as every read refuses it."""
    from boxmaker.memoryd.files.store import FileUnreadable, Store

    store = Store(tmp_path, tmp_path / "soul-starter.md")
    legacy = "§ noted 2026-09-01T10:00Z in session chat-legacy · private\nOld [待清理] note\n\n"
    capture = (
        "§ noted 2026-09-01T10:01Z in session chat-a · private · mem-2026-09-01-001 · knowledge\nNew\n\n"
    )
    for raw in (
        (capture + legacy).encode(),
        b"\xef\xbb\xbf" + (legacy + capture).encode(),
        (capture + legacy).replace("\n", "\r\n").encode(),
        ("Typed 🧘 first\n\n" + capture * 3 + legacy).encode(),
    ):
        store.notes_path.write_bytes(raw)
        text = raw.decode("utf-8").removeprefix("\ufeff").replace("\r\n", "\n")
        assert list(store.legacy_or_marked_notes(MARKERS)) == [n for n in parse(text) if _wanted(n)]
        assert list(store.parsed_notes()) == parse(text)
    store.notes_path.write_bytes(legacy.encode() + b"\xff\n")
    with pytest.raises(FileUnreadable, match="not UTF-8"):
        store.legacy_or_marked_notes(MARKERS)
    with pytest.raises(FileUnreadable, match="not UTF-8"):
        store.parsed_notes()
    store.notes_path.unlink()
    with pytest.raises(FileUnreadable, match="missing"):
        store.legacy_or_marked_notes(MARKERS)
    with pytest.raises(FileUnreadable, match="missing"):
        store.parsed_notes()


@settings(max_examples=400, deadline=None)
@given(notes_texts, st.integers(1, 200))
def test_parse_bytes_in_pieces_is_notes_parse(text: str, piece: int) -> None:
    assert parse_bytes(text.encode("utf-8"), piece) == parse(text)
