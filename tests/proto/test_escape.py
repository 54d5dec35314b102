"""proto.escape: untrusted text shown to the owner cannot act on the terminal (M5a sections 10, 12)."""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from boxmaker.proto.escape import escape, escape_line
from boxmaker.proto.unicode_tables import is_invisible, is_noncharacter

# Characters hypothesis rarely draws by itself, mixed into every generated text.
HOSTILE = [
    "\x1b",
    "\x07",
    "\x00",
    "\r",
    "\x7f",
    "\x9b",
    "\x9d",
    "\u200b",
    "\u202e",
    "\u2066",
    "\u2028",
    "\ufeff",
    "\ufe0f",
    "\U000e0041",
    "\U000e007f",
    "\ufffe",
    "\U0010ffff",
    "\ud800",
    "\udfff",
    "\\",
    "\n",
    "\t",
]
ANY_TEXT = st.text(
    alphabet=st.one_of(st.characters(exclude_categories=()), st.sampled_from(HOSTILE)), max_size=80
)


def unsafe(char: str) -> bool:
    """What a terminal could act on or a reader could not see: the module's contract."""
    cp = ord(char)
    return (
        (cp < 0x20 and char not in "\n\t")
        or 0x7F <= cp <= 0x9F
        or 0xD800 <= cp <= 0xDFFF
        or is_invisible(cp)
        or is_noncharacter(cp)
    )


ESCAPE = re.compile(r"\\(?:x[0-9a-f]{2}|u[0-9a-f]{4}|U[0-9a-f]{8}|[ntr])")


def unescape(shown: str) -> str:
    """Read the notation back (for text that held no backslash of its own)."""
    named = {"n": "\n", "t": "\t", "r": "\r"}
    return ESCAPE.sub(lambda m: named.get(m[0][1]) or chr(int(m[0][2:], 16)), shown)


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("\x1b[31mred\x1b[0m", "\\x1b[31mred\\x1b[0m"),
        (
            "\x1b]8;;https://evil.example\x07click\x1b]8;;\x07",
            "\\x1b]8;;https://evil.example\\x07click\\x1b]8;;\\x07",
        ),
        ("c1\x9b31mred", "c1\\x9b31mred"),
        ("nul\x00", "nul\\x00"),
        ("line one\rline two", "line one\\rline two"),
        ("del\x7f", "del\\x7f"),
        ("a\u200bb", "a\\u200bb"),
        ("ab\u202ecd", "ab\\u202ecd"),
        ("first\u2028second", "first\\u2028second"),
        ("tag\U000e0041", "tag\\U000e0041"),
        ("x\ufffey", "x\\ufffey"),
        ("x\U0010ffff", "x\\U0010ffff"),
        ("lone\ud800", "lone\\ud800"),
        ("\ufeffBOM", "\\ufeffBOM"),
        ("heart\u2764\ufe0f", "heart\u2764\\ufe0f"),
    ],
)
def test_escape_shows_each_unsafe_code_point(text: str, shown: str) -> None:
    assert escape(text) == shown


@pytest.mark.parametrize(
    "text",
    [
        "Owner prefers answers in UTC.",
        "Deploys on Thursday.\n\tStaging at 10:00.",
        "Zoë, café, Łódź, שלום, مرحبا, 会議\u3000木曜日, 👍, ❤, \u00a0€",
        "C:\\Users\\owner and a literal \\x1b stay as they are",
        "[bold]not markup here[/bold] :smile:",
    ],
)
def test_safe_text_is_unchanged(text: str) -> None:
    assert escape(text) == text


def test_escape_line_also_shows_newline_and_tab() -> None:
    assert escape_line("a\nb\tc\rd\x1b") == "a\\nb\\tc\\rd\\x1b"
    assert escape_line("plain") == "plain"


@given(ANY_TEXT)
def test_nothing_unsafe_survives(text: str) -> None:
    shown = escape(text)
    assert not any(unsafe(c) for c in shown)
    shown.encode("utf-8")  # no lone surrogate left: strict UTF-8 never fails


@given(ANY_TEXT)
def test_escape_line_is_one_safe_line(text: str) -> None:
    shown = escape_line(text)
    assert not any(unsafe(c) or c in "\n\t" for c in shown)
    shown.encode("utf-8")


@given(ANY_TEXT)
def test_escaping_is_idempotent(text: str) -> None:
    shown = escape(text)
    assert escape(shown) == shown
    assert escape_line(escape_line(text)) == escape_line(text)


@given(ANY_TEXT.filter(lambda t: "\\" not in t))
def test_escape_loses_nothing(text: str) -> None:
    assert unescape(escape(text)) == text
    assert unescape(escape_line(text)) == text
