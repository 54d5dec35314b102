"""Entries: parsing and rendering memory.md and user.md (M5a section 3; DESIGN 7, 10.4)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from boxmaker.memoryd.files.entries import (
    file_content,
    normalise_newlines,
    parse_entries,
    prepare,
    render_entries,
    text_length,
)


def test_parse_splits_on_separator_lines_and_trims() -> None:
    text = "  first entry \n§\nsecond\nspans lines\n  §  \n\nthird\n"
    assert parse_entries(text) == ["first entry", "second\nspans lines", "third"]


def test_empty_entries_between_separators_are_dropped() -> None:
    assert parse_entries("§\n§\n\na\n§\n") == ["a"]
    assert parse_entries("") == []


def test_section_sign_inside_a_line_is_not_a_separator() -> None:
    assert parse_entries("Contract § 4.2\n§§ is fine\n§4.2 too") == ["Contract § 4.2\n§§ is fine\n§4.2 too"]


def test_split_on_newline_only_never_on_other_line_boundaries() -> None:
    # VT, FS and U+2028 are line boundaries for str.splitlines(); a § between them is not a separator.
    for boundary in ("\x0b", "\x1c", "\u2028", "\r"):
        text = f"a{boundary}§{boundary}b"
        assert parse_entries(text) == [text]


def test_entry_holding_a_separator_line_is_not_stored_as_two() -> None:
    """hermes #54403: an entry with a § line must never come back as two entries."""
    from boxmaker.memoryd.check.rules import check_text

    refusal = check_text("one\n§\ntwo")
    assert refusal is not None
    assert refusal.rule == "separator"


def test_render_and_count() -> None:
    entries = ["a" * 10, "b" * 5]
    assert render_entries(entries) == "a" * 10 + "\n§\n" + "b" * 5
    assert text_length(entries) == 18
    assert file_content(entries) == render_entries(entries) + "\n"
    assert file_content([]) == ""


def test_final_newline_is_not_counted() -> None:
    assert text_length(parse_entries(file_content(["x" * 2201]))) == 2201


def test_bom_and_crlf_read_as_plain_text() -> None:
    assert normalise_newlines("\ufeffa\r\n§\r\nb\r\n") == "a\n§\nb\n"
    assert parse_entries(normalise_newlines("\ufeffa\r\n§\r\nb")) == ["a", "b"]


def test_prepare_is_nfc_and_trimmed() -> None:
    assert prepare("  e\u0301 \n") == "\u00e9"


_line = st.text(alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\n"), max_size=20)
_entry = (
    st.lists(_line, min_size=1, max_size=4)
    .map("\n".join)
    .map(str.strip)
    .filter(lambda e: bool(e) and not any(line.strip() == "§" for line in e.split("\n")))
)


@given(st.lists(_entry, max_size=8))
def test_parse_render_parse_round_trip(entries: list[str]) -> None:
    rendered = render_entries(entries)
    assert parse_entries(rendered) == entries
    assert parse_entries(file_content(entries)) == entries
    assert render_entries(parse_entries(rendered)) == rendered
