"""Show untrusted text (memory entries, notes, recall hits) to the owner in a terminal.

M5a section 12 ("entries shown by bxctl are escaped, ``proto::escape``") and section 10.

``escape(text)`` replaces every code point a terminal could act on, or that a reader cannot see, by
a visible escape, and leaves everything else as it is:

- every C0 control except newline and tab (ESC included, so ANSI CSI and OSC 8 hyperlink
  sequences cannot act), DEL and every C1 control (U+0080..U+009F, CSI U+009B among them);
- every invisible code point of ``unicode_tables.INVISIBLE_RANGES`` (zero-width characters,
  bidirectional controls, variation selectors, tag characters, U+2028/U+2029, ...);
- every noncharacter (U+FDD0..U+FDEF, U+xxFFFE, U+xxFFFF) and every lone surrogate.

``escape_line(text)`` does the same and also shows newline and tab, for one-line listings.

The notation is Python's string-literal escapes, in lower-case hex: ``\\n``, ``\\t`` and ``\\r`` for
those three, else ``\\xHH`` below U+0100, ``\\uHHHH`` in the Basic Multilingual Plane (lone surrogates
included) and ``\\UHHHHHHHH`` above it: ESC is ``\\x1b``, ZERO WIDTH SPACE ``\\u200b``, TAG LATIN
CAPITAL LETTER A ``\\U000e0041``. A backslash already in the text is left as it is (not doubled), so
paths such as ``C:\\Users`` stay readable; a literal ``\\x1b`` typed by someone is thus shown the
same way as an escaped ESC, which can mislead a reader but can never make the terminal act.

Both functions are pure, never raise for any ``str`` (lone surrogates included) and return text
that is valid UTF-8 and holds nothing a terminal interprets beyond newline and tab (none at all for
``escape_line``). The result is plain text, not markup: a caller that prints through ``rich`` must
also apply ``rich.markup.escape`` (or print with ``markup=False``), and should pass
``emoji=False`` and ``highlight=False``, so that ``[bold]`` or ``:smile:`` in an entry stays
literal. This module does not import ``rich``: ``proto`` has no dependency on it.
"""

from __future__ import annotations

import re
from typing import Final

from boxmaker.proto.unicode_tables import (
    CONTROL_RANGES,
    INVISIBLE_RANGES,
    NONCHARACTER_RANGES,
    SURROGATE_RANGES,
    char_class,
)

__all__ = ["escape", "escape_line"]

_UNSAFE_CLASS: Final = char_class(
    (*CONTROL_RANGES, *SURROGATE_RANGES, *INVISIBLE_RANGES, *NONCHARACTER_RANGES)
)
_UNSAFE: Final = re.compile(f"[{_UNSAFE_CLASS}]")
_UNSAFE_IN_LINE: Final = re.compile(f"[\\t\\n{_UNSAFE_CLASS}]")

_SHORT: Final = {"\n": "\\n", "\t": "\\t", "\r": "\\r"}


def _notation(match: re.Match[str]) -> str:
    char = match.group()
    short = _SHORT.get(char)
    if short is not None:
        return short
    cp = ord(char)
    if cp < 0x100:
        return f"\\x{cp:02x}"
    if cp < 0x10000:
        return f"\\u{cp:04x}"
    return f"\\U{cp:08x}"


def escape(text: str) -> str:
    """Return ``text`` with every unsafe code point replaced by its visible escape.

    Unsafe: C0 except newline and tab, DEL, C1, invisible (DESIGN 10.6 rule 3), noncharacters,
    lone surrogates. Newline and tab are kept. Never raises. See the module docstring for the
    notation, and for the extra step needed when printing through ``rich``.
    """
    if _UNSAFE.search(text) is None:
        return text
    return _UNSAFE.sub(_notation, text)


def escape_line(text: str) -> str:
    """Like ``escape``, and also shows newline as ``\\n`` and tab as ``\\t``: one line, always."""
    if _UNSAFE_IN_LINE.search(text) is None:
        return text
    return _UNSAFE_IN_LINE.sub(_notation, text)
