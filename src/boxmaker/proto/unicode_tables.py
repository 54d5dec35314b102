"""Lookups over the code point tables of the memory-write check (DESIGN 10.6 rules 1 to 4) and
``proto.escape``. The tables themselves are generated into ``_unicode_data`` by
``scripts/make_unicode_tables.py``; each is a sorted tuple of disjoint ``(first, last)`` pairs.

``ranges_of`` merges code points into such pairs and ``char_class`` turns pairs into the body of a
regular expression character class, ``one_of`` into a fragment matching one code point that
``re`` runs fast, and ``bmp_class`` into a faster class for text without astral characters
(``ASTRAL_RE``); the compiled ``INVISIBLE_RE`` and the bisect-based ``is_invisible`` /
``is_noncharacter`` are the fast lookups.
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Iterable, Iterator
from typing import Final

from boxmaker.proto._unicode_data import (
    CONTROL_RANGES,
    INVISIBLE_COUNT,
    INVISIBLE_RANGES,
    NONCHARACTER_COUNT,
    NONCHARACTER_RANGES,
    SURROGATE_RANGES,
)

__all__ = [
    "ASTRAL_RE",
    "CONTROL_RANGES",
    "INVISIBLE_COUNT",
    "INVISIBLE_RANGES",
    "INVISIBLE_RE",
    "NONCHARACTER_COUNT",
    "NONCHARACTER_RANGES",
    "SURROGATE_RANGES",
    "bmp_class",
    "char_class",
    "is_invisible",
    "is_noncharacter",
    "one_of",
    "ranges_of",
]


def ranges_of(code_points: Iterable[int]) -> Iterator[tuple[int, int]]:
    """Merge ascending ``code_points`` into ``(first, last)`` pairs of consecutive ones."""
    first = last = -2
    for cp in code_points:
        if cp != last + 1:
            if first >= 0:
                yield (first, last)
            first = cp
        last = cp
    if first >= 0:
        yield (first, last)


def char_class(ranges: Iterable[tuple[int, int]]) -> str:
    """The body of a ``re`` character class matching ``ranges`` (no brackets).

    The code points stand as themselves (``re`` parses that much faster than escapes), except
    the class metacharacters, which are backslash-escaped.
    """
    parts = []
    for first, last in ranges:
        parts.append(_member(first) if first == last else f"{_member(first)}-{_member(last)}")
    return "".join(parts)


def _member(cp: int) -> str:
    char = chr(cp)
    return "\\" + char if char in "\\[]^-" else char


def one_of(ranges: Iterable[tuple[int, int]]) -> str:
    """A ``re`` fragment that matches one code point of ``ranges``, fast whatever the planes.

    ``re`` compiles the Basic Multilingual Plane part of a class into a bitmap but tests every
    range above it one by one, for each character scanned; so the astral ranges are tried only
    behind a single test that the character is astral at all.
    """
    pairs = list(ranges)
    bmp = [(first, min(last, 0xFFFF)) for first, last in pairs if first <= 0xFFFF]
    astral = [(max(first, 0x10000), last) for first, last in pairs if last > 0xFFFF]
    if not astral:
        return f"[{char_class(bmp)}]"
    guarded = f"(?=[\\U00010000-\\U0010ffff])[{char_class(astral)}]"
    return f"(?:[{char_class(bmp)}]|{guarded})" if bmp else f"(?:{guarded})"


def bmp_class(ranges: Iterable[tuple[int, int]]) -> str:
    """A ``re`` class of the Basic Multilingual Plane part of ``ranges`` only.

    Several times faster than ``one_of`` and equivalent to it on text with no astral character
    (``ASTRAL_RE`` finds those).
    """
    bmp = [(first, min(last, 0xFFFF)) for first, last in ranges if first <= 0xFFFF]
    return f"[{char_class(bmp)}]"


ASTRAL_RE: Final = re.compile("[\U00010000-\U0010ffff]")
INVISIBLE_RE: Final = re.compile(one_of(INVISIBLE_RANGES))

_INVISIBLE_FIRSTS: Final = tuple(first for first, _ in INVISIBLE_RANGES)
_NONCHARACTER_FIRSTS: Final = tuple(first for first, _ in NONCHARACTER_RANGES)


def _in_table(cp: int, firsts: tuple[int, ...], ranges: tuple[tuple[int, int], ...]) -> bool:
    index = bisect.bisect_right(firsts, cp) - 1
    return index >= 0 and cp <= ranges[index][1]


def is_invisible(cp: int) -> bool:
    """Whether code point ``cp`` is in ``INVISIBLE_RANGES`` (DESIGN 10.6 rule 3)."""
    return _in_table(cp, _INVISIBLE_FIRSTS, INVISIBLE_RANGES)


def is_noncharacter(cp: int) -> bool:
    """Whether code point ``cp`` is a Unicode noncharacter (DESIGN 10.6 rule 4)."""
    return _in_table(cp, _NONCHARACTER_FIRSTS, NONCHARACTER_RANGES)
