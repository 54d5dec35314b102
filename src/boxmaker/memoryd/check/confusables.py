"""Folds by the Unicode confusables skeleton (UTS #39 section 4, Unicode 16), for the write check's
``phrase``, ``role`` and ``mixed-script`` rules (DESIGN 10.6 as changed in docs/decisions.md).

``FOLD`` maps every non-ASCII code point that confusables.txt gives an all-ASCII prototype (the
generated ``_confusables.TABLE``: Cherokee, Greek, Cyrillic, Armenian, Coptic, Lisu, mathematical and
many more look-alikes) to that prototype, with the prototype ``rn`` read as ``m`` (it is how the
standard spells m-like letters). ASCII itself is left alone, so a fold never changes plain text.

Two facts of the standard shape the folds:

- prototypes are case-sensitive: the I-like letters (Greek Iota, Cyrillic І, Roman numeral one)
  share the prototype ``l`` with the l-like ones, so the phrase and role patterns treat ``i`` and ``l``
  as one letter after case folding (`merge_il`);
- a word written wholly in one other script can look like an English word ("сор", Greek "ο", Arabic
  "اه") and is ordinary prose, so ``mixed-script`` asks for a word that mixes scripts
  (`lookalike_word`).

Pure; the tables are built when the module is imported.
"""

from __future__ import annotations

import functools
import re
import unicodedata
from typing import Final

from boxmaker.memoryd.check._confusables import TABLE

__all__ = ["FOLD", "has_lookalike_word", "lookalike_word", "merge_il", "skeleton"]

FOLD: Final[dict[int, str]] = {cp: target.replace("rn", "m") for cp, target in TABLE.items()}
_IL: Final = str.maketrans("l", "i")
_WORDS: Final = re.compile(r"[^\W\d_]+")
#: Words shorter than this are not judged: "αx" or "ρv" in mathematics are ordinary.
MIN_LETTERS: Final = 3


def skeleton(text: str) -> str:
    """`text` with every non-ASCII confusable replaced by its ASCII prototype (ASCII unchanged)."""
    return text if text.isascii() else text.translate(FOLD)


def merge_il(folded: str) -> str:
    """Case-folded text with ``l`` read as ``i`` (they share a prototype; module docstring)."""
    return folded.translate(_IL)


@functools.lru_cache(maxsize=4096)
def _script(char: str) -> str:
    """The script a letter is written in, read from the Unicode name of its NFKC form (``LATIN``,
    ``GREEK``, ``CHEROKEE`` …; ``?`` for a code point this Python does not name)."""
    base = unicodedata.normalize("NFKC", char)[:1] or char
    return unicodedata.name(base, "?").partition(" ")[0]


def lookalike_word(word: str) -> bool:
    """Whether `word` (letters only) mixes scripts and yet its skeleton is plain ASCII letters: it
    would read as an ordinary Latin word (``Ꭵgnore``, ``sуstem`` with a Cherokee or Greek letter)."""
    if word.isascii() or len(word) < MIN_LETTERS:
        return False
    folded = word.translate(FOLD)
    if not (folded.isascii() and folded.isalpha()):
        return False
    return len({_script(char) for char in word}) > 1


def has_lookalike_word(text: str) -> bool:
    """Whether any word of `text` is a `lookalike_word`."""
    return any(
        lookalike_word(match.group()) for match in _WORDS.finditer(text) if not match.group().isascii()
    )
