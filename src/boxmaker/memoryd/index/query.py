"""From the model's query to an FTS5 MATCH string, and the text of indexed columns (M5a sections 5-6;
DESIGN 7 and 11).

The model's text reaches SQLite only as quoted terms: it is split on anything that is not a letter or
digit, each term is wrapped in double quotes, and the terms are joined with ``OR``, so no FTS5 operator
from the model ever reaches SQLite (``NEAR``, ``*``, ``^``, quotes and column filters are just text).
On top of the seed's builder (DESIGN 11):

- English stop words are dropped (a question made only of stop words keeps them all);
- terms are lowercased and deduplicated; the index stems them (`TOKENIZER`);
- a run of Chinese, Japanese or Korean characters becomes its overlapping two-character pieces, as the
  index stores them (`cjk_bigrams`), so "数据" finds "数据库系统设计"; a lone CJK character becomes a
  prefix query of that one character (the only operator used, and never the model's).

Pure functions; `build` never raises for any ``str``.
"""

from __future__ import annotations

import datetime as dt
import re
from dataclasses import dataclass
from functools import lru_cache

#: The index's tokenizer: Porter stemming over unicode61 with diacritics folded.
TOKENIZER = "porter unicode61 remove_diacritics 2"

# The NLTK English list (apostrophe forms as their letter pieces) plus a few modal and filler words.
STOP_WORDS = frozenset(
    """
    i me my myself we our ours ourselves you your yours yourself yourselves he him his himself she
    her hers herself it its itself they them their theirs themselves what which who whom this that
    these those am is are was were be been being have has had having do does did doing a an the and
    but if or because as until while of at by for with about against between into through during
    before after above below to from up down in out on off over under again further then once here
    there when where why how all any both each few more most other some such no nor not only own
    same so than too very s t can will just don should now d ll m o re ve y ain aren couldn didn
    doesn hadn hasn haven isn ma mightn mustn needn shan shouldn wasn weren won wouldn would could
    might must shall ever also
    """.split()  # noqa: SIM905
)

# Han (with extension A and compatibility), Hiragana, Katakana (with extensions and halfwidth),
# Hangul syllables and jamo, and Han extensions B onwards.
_CJK = (
    "\u1100-\u11ff\u3040-\u30ff\u3130-\u318f\u31f0-\u31ff\u3400-\u4dbf\u4e00-\u9fff"
    "\uac00-\ud7af\uf900-\ufaff\uff66-\uff9f\U00020000-\U0002fa1f"
)
_CJK_RUN = re.compile(f"[{_CJK}]+")
_TERM = re.compile(r"[^\W_]+")


@dataclass(frozen=True, slots=True)
class Query:
    """A built query: the terms (lowercased, for snippets) and the MATCH string ("" = no terms)."""

    terms: tuple[str, ...]
    match: str


def _pieces(run: str) -> list[str]:
    return [run] if len(run) == 1 else [run[i : i + 2] for i in range(len(run) - 1)]


def _split(word: str) -> list[str]:
    if not _CJK_RUN.search(word):
        return [word]
    parts: list[str] = []
    position = 0
    for match in _CJK_RUN.finditer(word):
        if match.start() > position:
            parts.append(word[position : match.start()])
        parts.extend(_pieces(match.group()))
        position = match.end()
    if position < len(word):
        parts.append(word[position:])
    return parts


def terms(text: str) -> list[str]:
    """The query's terms: letter-or-digit runs, lowercased, stop words dropped, CJK runs in pieces,
    deduplicated, in order of first appearance."""
    words = [w.lower() for w in _TERM.findall(text)]
    kept = [w for w in words if w not in STOP_WORDS] or words
    seen: dict[str, None] = {}
    for word in kept:
        for piece in _split(word):
            seen.setdefault(piece, None)
    return list(seen)


def quote(term: str) -> str:
    """One FTS5 string: the term in double quotes, inner quotes doubled (none survive `terms`)."""
    return '"' + term.replace('"', '""') + '"'


def render_match(found: list[str]) -> str:
    """Quoted terms joined with OR; a lone CJK character as a prefix query."""
    return " OR ".join(quote(t) + (" *" if len(t) == 1 and _CJK_RUN.match(t) else "") for t in found)


def build(text: str) -> Query:
    """The query for the model's `text`; ``match`` is "" when it has no letters or digits."""
    found = terms(text)
    return Query(tuple(found), render_match(found))


def cjk_bigrams(text: str) -> str:
    """Index side: each CJK run rewritten as its overlapping two-character pieces, and the run's last
    character alone, separated by spaces (so a one-character prefix query finds any position)."""
    if text.isascii() or not _CJK_RUN.search(text):
        return text

    def pieces(match: re.Match[str]) -> str:
        run = match.group()
        extra = [run[-1]] if len(run) > 1 else []
        return " " + " ".join(_pieces(run) + extra) + " "

    return _CJK_RUN.sub(pieces, text)


#: What stands for a stop word in the context column: a private-use character, which FTS5's unicode61
#: reads as one token (as the word it replaces, so every row's length, and so bm25, is unchanged) and
#: which no query term can be (`terms` keeps letters and digits only).
FILLER = "\ue000"
# The stop words as they are written (lower case, capitalised, upper case), in UTF-8.
_STOP_FORMS = frozenset(
    form.encode() for word in STOP_WORDS for form in (word, word.capitalize(), word.upper())
)
_FILLER_BYTES = FILLER.encode()
# Every ASCII byte that is not a letter or a digit as a space: each separates tokens for unicode61 as a
# space does, so no token changes (the bytes of other characters stay as they are).
_SEPARATORS = bytes(c if c >= 128 or chr(c).isalnum() else 32 for c in range(256))


def stop_filled(text: str) -> str:
    """Index side, the context column only: `text` with every ASCII character that is not a letter or
    a digit as a space, and every stop word standing alone between them (``the``, ``The``, ``THE``;
    not ``thé`` nor ``the数据``: a non-ASCII character joins the token) as `FILLER`, so each token
    stays one token. The column keeps its length in tokens (bm25's lengths) while its stop words, which
    no query searches but a question made only of them, take one list of small gaps instead of an
    entry in each word's list (issue 16). What the context column no longer finds: a question made only
    of stop words, and a term the tokenizer folds or stems to a stop word's form ("thé" to "the",
    "owned" to "own"); the record's own text keeps them. Lone surrogates pass through unchanged."""
    return stop_filled_utf8(text).decode("utf-8", "surrogatepass")


def stop_filled_utf8(text: str) -> bytes:
    """`stop_filled` in UTF-8 (a lone surrogate as its three bytes, ``surrogatepass``): the walk hands
    the context column to SQLite as these bytes, without making a string of them (`walk`)."""
    words = text.encode("utf-8", "surrogatepass").translate(_SEPARATORS).split()
    return b" ".join([_FILLER_BYTES if w in _STOP_FORMS else w for w in words])


@lru_cache(maxsize=4096)
def time_words(day: dt.date) -> str:
    """A record's date as the time column indexes it: "8 May 2023"."""
    return f"{day.day} {day.strftime('%B')} {day.year}"
