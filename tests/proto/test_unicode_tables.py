"""The generated code point tables (DESIGN 10.6 rules 1 to 4; scripts/make_unicode_tables.py)."""

from __future__ import annotations

import importlib.util
import itertools
import re
import unicodedata
from pathlib import Path
from types import ModuleType

import pytest
from hypothesis import given
from hypothesis import strategies as st

from boxmaker.memoryd.check.rules import check_text
from boxmaker.proto import unicode_tables as tables
from conftest import shared_data

REPO = Path(__file__).resolve().parents[2]
DICP_FILE = "default-ignorable-unicode16.txt"
EXTRA_INVISIBLE = [
    (0x2800, 0x2800),
    (0x2028, 0x2029),
    (0xFFF9, 0xFFFB),
    (0x13430, 0x1343F),
    (0x1D159, 0x1D159),
]
# Every code point, lone surrogates included, as one string: a regular expression that should
# match exactly a table's code points is checked against all of them at once.
EVERY_CODE_POINT = "".join(map(chr, range(0x110000)))


def expand(ranges: list[tuple[int, int]] | tuple[tuple[int, int], ...]) -> set[int]:
    return {cp for first, last in ranges for cp in range(first, last + 1)}


def dicp_ranges() -> list[tuple[int, int]]:
    ranges = []
    for line in shared_data(DICP_FILE).read_text(encoding="utf-8").split("\n"):
        if line.strip():
            first, _, last = line.strip().partition("..")
            ranges.append((int(first, 16), int(last or first, 16)))
    return ranges


INVISIBLE = expand(tables.INVISIBLE_RANGES)


def test_invisible_count_is_4197() -> None:
    assert tables.INVISIBLE_COUNT == 4197
    assert len(INVISIBLE) == 4197


@pytest.mark.parametrize(
    "ranges",
    [
        tables.INVISIBLE_RANGES,
        tables.NONCHARACTER_RANGES,
        tables.CONTROL_RANGES,
        tables.SURROGATE_RANGES,
    ],
)
def test_tables_are_sorted_disjoint_and_merged(ranges: tuple[tuple[int, int], ...]) -> None:
    assert all(0 <= first <= last <= 0x10FFFF for first, last in ranges)
    assert all(a[1] + 1 < b[0] for a, b in itertools.pairwise(ranges))


def test_the_17_dicp_ranges_of_the_data_file_are_all_present() -> None:
    dicp = dicp_ranges()
    assert len(dicp) == 17
    assert len(expand(dicp)) == 4174
    assert expand(dicp) <= INVISIBLE


def test_the_extra_ranges_of_rule_3_are_present_and_nothing_else() -> None:
    extra = expand(EXTRA_INVISIBLE)
    assert extra <= INVISIBLE
    assert expand(dicp_ranges()) | extra == INVISIBLE


def test_noncharacters_are_the_66() -> None:
    expected = set(range(0xFDD0, 0xFDF0))
    expected |= {plane << 16 | low for plane in range(17) for low in (0xFFFE, 0xFFFF)}
    assert expand(tables.NONCHARACTER_RANGES) == expected
    assert tables.NONCHARACTER_COUNT == len(expected) == 66


def test_controls_and_surrogates() -> None:
    controls = set(range(0x20)) - {0x09, 0x0A} | set(range(0x7F, 0xA0))
    assert expand(tables.CONTROL_RANGES) == controls
    assert expand(tables.SURROGATE_RANGES) == set(range(0xD800, 0xE000))


@pytest.mark.parametrize(
    "ranges",
    [
        tables.INVISIBLE_RANGES,
        tables.NONCHARACTER_RANGES,
        tables.CONTROL_RANGES,
        tables.SURROGATE_RANGES,
        ((0x5B, 0x5E), (0x2D, 0x2D), (0x10000, 0x10000)),  # class metacharacters, one astral
    ],
)
def test_regular_expression_forms_match_exactly_the_table(
    ranges: tuple[tuple[int, int], ...],
) -> None:
    expected = expand(ranges)
    one_of = {ord(c) for c in re.findall(tables.one_of(ranges), EVERY_CODE_POINT)}
    whole = {ord(c) for c in re.findall(f"[{tables.char_class(ranges)}]", EVERY_CODE_POINT)}
    bmp = {ord(c) for c in re.findall(tables.bmp_class(ranges), EVERY_CODE_POINT[:0x10000])}
    assert one_of == whole == expected
    assert bmp == {cp for cp in expected if cp <= 0xFFFF}


def test_invisible_re_matches_exactly_the_table() -> None:
    assert {ord(c) for c in tables.INVISIBLE_RE.findall(EVERY_CODE_POINT)} == INVISIBLE


def test_ranges_of_merges_consecutive_code_points() -> None:
    assert list(tables.ranges_of([1, 2, 3, 5, 7, 8])) == [(1, 3), (5, 5), (7, 8)]
    assert list(tables.ranges_of([])) == []


@given(st.integers(min_value=0, max_value=0x10FFFF))
def test_bisect_lookups_agree_with_the_tables(cp: int) -> None:
    assert tables.is_invisible(cp) == (cp in INVISIBLE)
    assert tables.is_noncharacter(cp) == (cp in expand(tables.NONCHARACTER_RANGES))


@pytest.mark.parametrize("first_last", tables.INVISIBLE_RANGES)
def test_bisect_lookups_at_range_edges(first_last: tuple[int, int]) -> None:
    first, last = first_last
    assert tables.is_invisible(first)
    assert tables.is_invisible(last)
    assert not tables.is_invisible(first - 1)
    assert not tables.is_invisible(last + 1)


def benign_sentence_with(cp: int) -> str:
    return unicodedata.normalize("NFC", f"Owner prefers short answers{chr(cp)} in UTC.")


def test_every_invisible_code_point_is_refused_as_invisible() -> None:
    wrong = [hex(cp) for cp in sorted(INVISIBLE) if _rule_of(benign_sentence_with(cp)) != "invisible"]
    assert wrong == []


@given(st.sampled_from(sorted(INVISIBLE)), st.text(max_size=40), st.text(max_size=40))
def test_an_invisible_code_point_anywhere_in_benign_text_is_refused(cp: int, before: str, after: str) -> None:
    benign = "".join(c for c in before + after if c.isalnum() or c == " ")
    cut = len(benign) // 2
    text = unicodedata.normalize("NFC", benign[:cut] + chr(cp) + benign[cut:])
    assert _rule_of(text) == "invisible"


def _rule_of(text: str) -> str | None:
    refusal = check_text(text)
    return None if refusal is None else refusal.rule


def _load_script() -> ModuleType:
    path = REPO / "scripts" / "make_unicode_tables.py"
    spec = importlib.util.spec_from_file_location("make_unicode_tables", path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_committed_module_is_what_the_script_makes_from_the_data_file() -> None:
    script = _load_script()
    source = shared_data(DICP_FILE)
    expected = script.render(source.name, source.read_text(encoding="utf-8"))
    committed = (REPO / "src" / "boxmaker" / "proto" / "_unicode_data.py").read_text(encoding="utf-8")
    assert committed == expected
    assert committed.startswith("# Generated by scripts/make_unicode_tables.py")
