"""Item text and labels inside generated Markdown (seed 003 sections 9-11, 13).

The archive, `index.md` and the topic pages show items' text, which a session wrote and which may be
untrusted. `md_text` makes any text one inert line: newlines and every unsafe code point become
visible escapes (`boxmaker.proto.escape.escape_line`: ``\\n``, ``\\x1b``, ``\\u200b``…), a backslash is
doubled, and the ASCII punctuation that opens Markdown inline structure (code, emphasis, links, HTML,
tables) and the field separator ``·`` get a backslash. So an item can neither start a heading or a
list item nor forge another item's fields; the escaping is reversible and deterministic.
"""

from __future__ import annotations

import re

from boxmaker.proto.escape import escape_line
from boxmaker.proto.labels import Label

_MARKUP = re.compile(r"([`*_\[\]<>|·])")


def md_text(text: str) -> str:
    """`text` as one line of inert Markdown (pure, never raises)."""
    return _MARKUP.sub(r"\\\1", escape_line(text.replace("\\", "\\\\")))


def label_text(label: Label) -> str:
    """A label as shown on a line: ``private`` or ``private · untrusted``."""
    return label.data_class.value + (" · untrusted" if label.untrusted else "")
