"""Cutting a text so that the frame carrying it fits `frame.MAX_FRAME` after JSON escaping (issue 15
item 9): a page of control characters grows up to six times when `messages.encode` escapes it, and
an oversized frame would reach the model as a misleading "brokerd failed".
"""

from __future__ import annotations

from boxmaker.proto.frame import MAX_FRAME

#: Room kept in a frame for everything but the text (kind, call id, code, label), in bytes.
ENVELOPE = 64 * 1024
#: How a cut text ends.
CUT_NOTE = "\n[cut to fit the 4 MiB message limit: {shown:,} of {total:,} characters shown]"

_SHORT_ESCAPES = frozenset('\n\r\t\b\f"\\')


def escaped_size(char: str) -> int:
    """Bytes `char` takes in ASCII-only JSON (``ensure_ascii``): 1, 2 (``\\n``, ``\\"`` …), 6
    (``\\u00XX``, any other non-ASCII character) or 12 (a character outside the BMP: two escapes)."""
    if char in _SHORT_ESCAPES:
        return 2
    code = ord(char)
    if 0x20 <= code < 0x7F:
        return 1
    return 12 if code > 0xFFFF else 6


def fit(text: str, budget: int = MAX_FRAME - ENVELOPE) -> str:
    """`text` as it is when its escaped form fits `budget` bytes, else its longest prefix that fits
    with `CUT_NOTE` after it."""
    if len(text) * 12 <= budget:
        return text
    total = 0
    room = budget - 128  # the note itself
    for index, char in enumerate(text):
        total += escaped_size(char)
        if total > room:
            return text[:index] + CUT_NOTE.format(shown=index, total=len(text))
    return text
