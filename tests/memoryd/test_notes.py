"""notes.md headers and labels (M5a section 3; DESIGN 10.4)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from boxmaker.memoryd.files.notes import Note, parse, render, render_header
from boxmaker.proto.labels import DataClass, Label

PRIVATE = Label(DataClass.PRIVATE, False)


def test_noted_header_trusted_and_untrusted() -> None:
    clean = Note("noted", "2026-09-24T21:02Z", "chat-abc", "", PRIVATE, "x")
    tainted = Note("noted", "2026-09-24T21:02Z", "chat-abc", "", Label(DataClass.SECRET, True), "x")
    assert render_header(clean) == "§ noted 2026-09-24T21:02Z in session chat-abc · private"
    assert render_header(tainted) == "§ noted 2026-09-24T21:02Z in session chat-abc · secret · untrusted"


def test_moved_and_dropped_headers() -> None:
    moved = Note("moved", "2026-09-24T20:14Z", "chat-y", "memory.md", PRIVATE, "x")
    dropped = Note("dropped", "2026-09-24T20:14Z", "chat-y", "user.md", PRIVATE, "x")
    assert render_header(moved) == "§ moved 2026-09-24T20:14Z from memory.md in session chat-y"
    assert render_header(dropped) == "§ dropped 2026-09-24T20:14Z from user.md in session chat-y"


def test_parse_reads_back_labels_positions_and_bodies() -> None:
    text = (
        "§ noted 2026-09-22T18:20Z in session mm-dh45qg · private · untrusted\n"
        "example.org says the release moved to March.\n\n"
        "§ moved 2026-09-24T20:14Z from memory.md in session chat-y\n"
        "Owner prefers answers in UTC.\nSecond line.\n\n"
        "§ noted 2026-09-25T08:00Z in session owner · public · kind knowledge\n"
        "Owner's own.\n"
    )
    notes = parse(text)
    assert [n.kind for n in notes] == ["noted", "moved", "noted"]
    assert notes[0].label == Label(DataClass.PRIVATE, True)
    assert notes[0].session == "mm-dh45qg"
    assert notes[1].label == PRIVATE
    assert notes[1].source == "memory.md"
    assert notes[1].text == "Owner prefers answers in UTC.\nSecond line."
    assert notes[2].label == Label(DataClass.PUBLIC, False)
    assert notes[2].extra == ("kind knowledge",)
    assert [n.position for n in notes] == [0, 1, 2]
    assert notes[1].key == "note/1/2026-09-24T20:14Z"


def test_text_before_the_first_header_is_the_owners() -> None:
    notes = parse("typed by hand\n\n§ noted 2026-09-22T18:20Z in session s1 · private\nx\n")
    assert notes[0].session == "owner"
    assert notes[0].text == "typed by hand"
    assert notes[0].label == PRIVATE


def test_a_line_that_only_resembles_a_header_stays_in_the_body() -> None:
    notes = parse("§ noted 2026-09-22T18:20Z in session s1 · private\nx\n§ noted yesterday by me\n")
    assert len(notes) == 1
    assert notes[0].text == "x\n§ noted yesterday by me"


_body = (
    st.text(
        alphabet=st.characters(blacklist_categories=("Cs", "Cc"), blacklist_characters="§"),
        min_size=1,
        max_size=40,
    )
    .map(str.strip)
    .filter(bool)
)


@given(st.lists(st.tuples(_body, st.booleans(), st.sampled_from(list(DataClass))), max_size=6))
def test_render_parse_round_trip(items: list[tuple[str, bool, DataClass]]) -> None:
    notes = [
        Note("noted", "2026-09-24T21:02Z", "chat-a", "", Label(c, u), body, i)
        for i, (body, u, c) in enumerate(items)
    ]
    assert parse("".join(render(n) for n in notes)) == notes
