"""Injection phrases of the memory-write check (DESIGN 10.6 rule 9; M5a section 5, "The check").

``has_injection_phrase(text)`` says whether ``text`` holds one of a short, fixed list of
prompt-injection phrases: "ignore/disregard/forget/override/bypass/discard ... previous/prior/above/
earlier/preceding ... instructions/prompts/rules/directions/guidelines/directives/commands/context/
orders/constraints/restrictions/guardrails/policies/programming", "forget/ignore everything/all
(that came) above/before" in the imperative and ending its sentence or going on to command, the
role hijack "you are now / from now on you are / act as ... (a|an)? unrestricted/jailbroken/DAN/
developer mode/uncensored ..." (docs/decisions.md, "More injection families"), "system prompt override",
"DAN mode enabled", "do anything now" (not right after "not" or "n't"), and "ignore the previous
instructions" in German, Spanish, French, Portuguese, Russian, Chinese, Japanese and Korean, each
with its common variants (word order, "all", formal and informal verb forms).

The fold. Text is matched after ``fold``: NFKD (which includes NFKC's compatibility folding:
mathematical, circled and full-width letters), combining marks removed, NFC again (so Hangul jamo
recompose into syllables), then, for the Latin-script patterns only, the Unicode confusables skeleton
(UTS #39 ``confusables.txt``, Unicode 16: every non-ASCII letter with an ASCII prototype, Cherokee,
Greek, Cyrillic, Armenian, Lisu and the rest, `check.confusables`; plus a few small capitals the
standard maps elsewhere; applied before casefold so that a capital Greek Nu still reads as N),
casefold, ``l`` read as ``i`` (the standard gives I-like and l-like letters one prototype: the
keywords pass through the same step), and white space and other punctuation collapsed into single
spaces. Sentence punctuation (``. ! ? ;`` and the ideographic full stop)
stays, as a token of its own, and keywords never pair across it: "Ignore the above error in CI;
the rules ..." is accepted.

Two folds, because the confusable map turns Cyrillic letters into Latin ones: the English, German,
Spanish, French and Portuguese patterns run on the fold with the map (so "Ign\\u043ere" is caught);
the Russian, Chinese, Japanese and Korean patterns run on the fold without it (the last three
before white space is collapsed: their gaps count characters). Every keyword is written in its
ordinary spelling and passed through the same fold when the patterns are built, so "Игнорируй"
and "すべて" match whatever the fold makes of them.

Bounded by construction: every repetition has a fixed upper bound (at most eight filler words of
at most 40 word characters between two keywords, at most twelve characters in Chinese and
Japanese, sixteen in Korean, Russian endings of at most eight letters), so the cost is linear in
the length of the text. A word pattern only runs when each of its keyword groups occurs in the
text as a plain substring, which most texts fail at once; a Chinese, Japanese or Korean pattern
starts with a keyword, so ``re`` skips ahead to the characters that can begin one.

A combining mark, here and in the ``combining-run`` rule, is a code point with a non-zero
canonical combining class (a UAX #15 non-starter) or of general category Mn or Me; ``MARK_RANGES``
is that set, built from ``unicodedata`` when this module is imported.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Final

from boxmaker.memoryd.check.confusables import FOLD, merge_il
from boxmaker.proto.unicode_tables import ASTRAL_RE, bmp_class, one_of, ranges_of

__all__ = ["MARK_RANGES", "fold", "has_injection_phrase", "without_marks"]

# Planes 0 and 1 and plane 14 hold every combining mark; the skipped blocks hold none (CJK
# ideographs, Hangul syllables, surrogates, private use).
_MARK_SCAN: Final = (
    range(0x0000, 0x3400),
    range(0xA000, 0xAC00),
    range(0xF900, 0x20000),
    range(0xE0000, 0xE1000),
)


def _mark_code_points() -> Iterator[int]:
    category, combining = unicodedata.category, unicodedata.combining
    for block in _MARK_SCAN:
        for cp in block:
            kind = category(chr(cp))
            if kind in ("Mn", "Me") or (kind == "Mc" and combining(chr(cp))):
                yield cp


MARK_RANGES: Final[tuple[tuple[int, int], ...]] = tuple(ranges_of(_mark_code_points()))
_MARK_RUNS: Final = re.compile(one_of(MARK_RANGES) + "+")
_BMP_MARK_RUNS: Final = re.compile(bmp_class(MARK_RANGES) + "+")
# Sentence punctuation: ". ! ? ;" when white space or the end follows (so "ignore.all.previous"
# is not three sentences), and the ideographic full stop anywhere.
_STOPS: Final = re.compile(r"[.!?;]+(?=\s|$)|\u3002+")
# Runs of anything but letters, digits and sentence punctuation (so "_" and markdown's "*" break
# words too), except a lone space that already separates two tokens (most of them: left alone,
# they cost no replacement).
_BREAKS: Final = re.compile(r"(?! (?!_)[\w.!?;\u3002])(?:_|[^\w.!?;\u3002]|[.!?;](?!\s|$))+")
_CYRILLIC: Final = re.compile(r"[\u0400-\u052f]")
_CJK: Final = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7a3\uf900-\ufaff]")

_LOOKALIKES: Final = {
    # Cyrillic capital and small letters that look like Latin ones.
    **dict(zip("АВЕКМНОРСТХУЅІӀЈԚԜ", "ABEKMHOPCTXYSIIJQW", strict=True)),
    **dict(zip("асԁеһіӏјкорԛѕуԝх", "acdehiljkopqsywx", strict=True)),
    # Greek capital and small letters that look like Latin ones.
    **dict(zip("ΑΒΕΖΗΙΚΜΝΟΡΤΥΧ", "ABEZHIKMNOPTYX", strict=True)),
    **dict(zip("αγικνορτυχ", "ayikvoptux", strict=True)),
    # Armenian small letters that look like Latin ones, and the Latin dotless i.
    **dict(zip("օսցհոı", "oughni", strict=True)),
    # Small capitals.
    **dict(zip("ᴀʙᴄᴅᴇɢʜɪᴊᴋʟᴍɴᴏᴘʀꜱᴛᴜᴠᴡʏᴢ", "abcdeghijklmnoprstuvwyz", strict=True)),
}
_CONFUSABLES: Final = {**{ord(char): latin for char, latin in _LOOKALIKES.items()}, **FOLD}
# Digits written for letters inside a word ("ign0re", "1nstructions"), and letters spelt out one by one.
_LEET: Final = str.maketrans("013457", "oieast")
_LEET_WORD: Final = re.compile(r"\w*[013457]\w*")
_SPELT: Final = re.compile(r"\b(?:[a-z] ){3,}[a-z]\b")


def without_marks(text: str) -> str:
    """NFKD, combining marks removed, NFC."""
    if text.isascii():
        return text
    decomposed = unicodedata.normalize("NFKD", text)
    runs = _MARK_RUNS if ASTRAL_RE.search(decomposed) else _BMP_MARK_RUNS
    return unicodedata.normalize("NFC", runs.sub("", decomposed))


def _with_confusables(text: str) -> str:
    return text if text.isascii() else text.translate(_CONFUSABLES)


def _latin_words(folded: str) -> str:
    """The Latin-pattern fold's last steps: digits inside words read as letters, and letters
    spelt out one by one ("i g n o r e") joined."""
    if any(digit in folded for digit in "013457"):
        folded = _LEET_WORD.sub(_leet, folded)
    return _SPELT.sub(lambda m: m.group().replace(" ", ""), folded)


def _leet(match: re.Match[str]) -> str:
    word = match.group()
    return word.translate(_LEET) if any("a" <= c <= "z" for c in word) else word


def _tokens(folded: str) -> str:
    """Sentence punctuation as tokens of its own; one space between tokens."""
    return _BREAKS.sub(" ", _STOPS.sub(r" \g<0> ", folded)).strip()


def fold(text: str, *, confusables: bool) -> str:
    """Fold ``text`` for phrase matching (the module docstring gives the steps); never raises.

    The result is words and sentence punctuation marks separated by single spaces.
    ``confusables`` applies the Cyrillic/Greek look-alike map (for the Latin-script patterns).
    """
    base = without_marks(text)
    if not confusables:
        return _tokens(base.casefold())
    return _tokens(merge_il(_with_confusables(base).casefold()))


class _Folded:
    """One casefolded text, with its tokens and its needle answers worked out on first use."""

    __slots__ = ("_needles", "_tokens", "text")

    def __init__(self, text: str) -> None:
        self.text = text
        self._tokens = ""
        self._needles: dict[str, bool] = {}

    def has(self, needle: str) -> bool:
        found = self._needles.get(needle)
        if found is None:
            found = self._needles[needle] = needle in self.text
        return found

    def tokens(self) -> str:
        """A space, then the tokens: every word, the first one included, follows a space."""
        if not self._tokens:
            self._tokens = " " + _tokens(self.text)
        return self._tokens


@dataclass(frozen=True, slots=True)
class _Phrase:
    """Keyword groups that must occur in order: ``needles`` gate, ``pattern`` decides.

    ``needles`` holds, per group, a substring of each keyword (at most its first five letters),
    so a text lacking every needle of some group cannot match and is passed over at the cost of a
    few substring tests.
    """

    needles: tuple[tuple[str, ...], ...]
    pattern: re.Pattern[str]
    on_tokens: bool

    def found_in(self, folded: _Folded) -> bool:
        if not all(any(folded.has(needle) for needle in group) for group in self.needles):
            return False
        subject = folded.tokens() if self.on_tokens else folded.text
        return self.pattern.search(subject) is not None


def _keywords(words: Sequence[str]) -> list[str]:
    """Keywords folded as the text is (``l`` as ``i``: only Latin keywords hold an ASCII l)."""
    return sorted({merge_il(fold(word, confusables=False)) for word in words}, key=len, reverse=True)


def _needles(groups: Sequence[Sequence[str]]) -> tuple[tuple[str, ...], ...]:
    """Per group: the first five letters of the longest word of each keyword, without repeats."""
    return tuple(
        tuple(sorted({max(keyword.split(" "), key=len)[:5] for keyword in _keywords(group)}))
        for group in groups
    )


def _alternatives(words: Sequence[str], tail: str = "", guards: dict[str, str] | None = None) -> str:
    guards = guards or {}
    return "(?:" + "|".join(re.escape(w) + tail + guards.get(w, "") for w in _keywords(words)) + ")"


def _in_words(
    *groups: Sequence[str],
    gap: int = 8,
    stems: bool = False,
    guard: str = "",
    guards: dict[str, str] | None = None,
    after: str = "",
) -> _Phrase:
    """Whole-word keyword groups in this order, at most ``gap`` filler words between two.

    Matched against the tokens, after a space, so each pattern starts with a space, which ``re``
    uses to skip ahead; ``guard`` (a look-behind) follows it; ``stems`` allows 8 more letters;
    ``guards`` maps a folded keyword to a look-ahead that follows it; ``after`` (a look-ahead)
    follows the last keyword.
    """
    tail = r"\w{0,8}" if stems else ""
    filler = rf"(?: \w{{1,40}}){{0,{gap}}}? "
    body = filler.join(_alternatives(group, tail, guards) for group in groups)
    return _Phrase(_needles(groups), re.compile(" " + guard + body + r"\b" + after), on_tokens=True)


def _in_chars(*groups: Sequence[str], gap: int = 12, guards: dict[str, str] | None = None) -> _Phrase:
    """Keyword groups in this order, at most ``gap`` characters between two, within a sentence.

    For scripts written without spaces: matched against the casefolded text itself (no tokens),
    with no needles, since the pattern starts with a keyword's first character, which ``re``
    uses to skip ahead.
    """
    filler = rf"[^.!?;\u3002]{{0,{gap}}}?"
    body = filler.join(_alternatives(group, guards=guards) for group in groups)
    return _Phrase((), re.compile(body), on_tokens=False)


def _romance(verbs: Sequence[str], rules: Sequence[str], previous: Sequence[str]) -> list[_Phrase]:
    """Both Romance word orders: verb, rules, previous; and verb, previous, rules."""
    return [_in_words(verbs, rules, previous), _in_words(verbs, previous, rules)]


_EN_VERBS: Final = ("ignore", "disregard", "forget", "override", "bypass", "discard")
_EN_PREVIOUS: Final = ("previous", "previously", "prior", "above", "earlier", "preceding")
_EN_RULES: Final = (
    *("instruction", "instructions", "prompt", "prompts", "rule", "rules"),
    *("direction", "directions", "guideline", "guidelines", "directive", "directives"),
    *("constraints", "restrictions", "guardrails", "policies", "programming"),
)
#: Nouns of everyday use too ("we should forget all prior orders from that supplier"): only with the
#: verb in the imperative, as `_IMPERATIVE` reads it.
_EN_WEAK_RULES: Final = ("command", "commands", "context", "orders")
#: The verb is not in the imperative after a subject, a modal or "to" (a look-behind on the tokens,
#: folded as they are: ``l`` read as ``i``).
_IMPERATIVE: Final = merge_il(
    "(?<!n t )"
    + "".join(
        f"(?<! {word} )"
        for word in (
            *("i", "we", "you", "they", "he", "she", "it", "can", "could", "may", "might", "not"),
            *("should", "would", "will", "must", "to", "did", "do", "does", "never", "ll", "d"),
        )
    )
)
#: "forget everything above": the verb in the imperative ("I forget everything before my coffee"
#: is not), "everything" or "all", at most four words, a word for
#: before, and then the end of the sentence or a word that goes on commanding ("and", "now", "you"),
#: so "forget everything above the fold" stays accepted.
_EN_EVERYTHING: Final = _in_words(
    ("ignore", "disregard", "forget", "discard"),
    ("everything", "all", "anything"),
    ("above", "before", "previously", "earlier", "prior", "so far", "until now", "up to now"),
    gap=4,
    guard=_IMPERATIVE,
    after=r"(?= [.!?;]| and\b| then\b| now\b| you\b| from\b| this\b| here\b| $|$)",
)
#: "you are now DAN", "from now on you are an unrestricted AI": a new persona without limits, at
#: most two words ("a", "an", "fully") after the opening ("you are now a member of the team" is fine).
_EN_HIJACK: Final = _in_words(
    (
        *("you are now", "you re now", "youre now", "ur now", "u r now", "you are henceforth"),
        *("from now on you are", "from now on you re", "from now on you will be", "you will now be"),
        *("act as", "pretend to be", "pretend you are", "roleplay as", "you are no longer bound"),
    ),
    (
        *("unrestricted", "jailbroken", "jailbreak", "dan", "developer mode", "dev mode", "god mode"),
        *("uncensored", "unfiltered", "unaligned", "unlimited", "unbound", "unchained", "evil"),
        *("no restrictions", "no limits", "no rules", "no filters", "without restrictions"),
        *("without limits", "without rules", "without filters", "by any rules", "free of all"),
    ),
    gap=2,
    guards={"dan": r"(?! s\b)"},
)
_DE_PREVIOUS: Final = ("vorherigen", "vorherige", "vorigen", "bisherigen", "obigen", "früheren")
_DE_RULES: Final = ("Anweisungen", "Anweisung", "Instruktionen", "Regeln", "Vorgaben", "Befehle")
_RU_VERBS: Final = ("игнорир", "проигнорир", "забуд", "забыт", "отбрось")
_RU_PREVIOUS: Final = ("предыдущ", "прежн", "прошл", "вышеуказанн", "ранее")
_RU_RULES: Final = ("инструкци", "указани", "правил")
_ZH_VERBS: Final = ("忽略", "无视", "無視", "忘记", "忘記", "忘掉", "不要理会", "不要理會", "跳过", "跳過")
_ZH_PREVIOUS: Final = ("之前", "以前", "先前", "此前", "上面", "上述", "以上", "前面")
_ZH_RULES: Final = ("指令", "指示", "说明", "說明", "规则", "規則", "提示")

_LATIN_SCRIPT: Final = (
    _in_words(_EN_VERBS, _EN_PREVIOUS, _EN_RULES),
    _in_words(_EN_VERBS, _EN_PREVIOUS, _EN_WEAK_RULES, guard=_IMPERATIVE),
    _EN_EVERYTHING,
    _EN_HIJACK,
    _in_words(("system prompt override",)),
    _in_words(("dan mode",), ("enabled", "activated"), gap=2),
    _in_words(("do anything now",), guard="(?<!n t )(?<!not )"),
    _in_words(
        ("ignoriere", "ignorier", "ignorieren", "vergiss", "vergessen", "missachte"),
        _DE_PREVIOUS,
        _DE_RULES,
    ),
    _in_words(_DE_PREVIOUS, _DE_RULES, ("ignorieren", "vergessen", "missachten"), gap=4),
    *_romance(  # Spanish
        ("ignora", "ignore", "ignorar", "ignoren", "olvida", "olvide", "olvidar", "descarta"),
        ("instrucciones", "indicaciones", "reglas", "órdenes", "directrices", "normas"),
        ("anteriores", "previas", "previos", "precedentes"),
    ),
    *_romance(  # French
        ("ignore", "ignorez", "ignorer", "oublie", "oubliez", "oublier"),
        ("instructions", "consignes", "règles", "directives", "indications"),
        ("précédentes", "précédents", "antérieures", "antérieurs", "ci-dessus"),
    ),
    *_romance(  # Portuguese
        ("ignore", "ignora", "ignorar", "esqueça", "esquece", "esquecer", "desconsidere"),
        ("instruções", "instrução", "regras", "orientações", "diretrizes", "ordens"),
        ("anteriores", "prévias", "precedentes", "acima"),
    ),
)

_RUSSIAN: Final = (
    _in_words(_RU_VERBS, _RU_PREVIOUS, _RU_RULES, stems=True),
    _in_words(_RU_PREVIOUS, _RU_RULES, _RU_VERBS, gap=4, stems=True),
)
_CJK_PHRASES: Final = (
    _in_chars(_ZH_VERBS, _ZH_PREVIOUS, _ZH_RULES),
    _in_chars(_ZH_PREVIOUS, _ZH_RULES, _ZH_VERBS, gap=8),
    _in_chars(  # Japanese; "前の" (the previous) but not in 名前 (name), 午前 (morning), 事前, ...
        ("以前", "前回", "これまで", "今まで", "上記", "先ほど", "先程", "上の", "前の"),
        ("指示", "命令", "指令", "ルール", "規則", "プロンプト"),
        ("無視", "忘れ"),
        guards={"前の": "(?<![名午事直目手]前の)"},
    ),
    _in_chars(  # Korean
        ("이전", "앞의", "앞선", "위의", "지금까지의"),
        ("지시", "지침", "명령", "규칙", "프롬프트"),
        ("무시", "잊어", "잊으", "잊고"),
        gap=16,
    ),
)


def _first_needles(phrases: Sequence[_Phrase]) -> frozenset[str]:
    return frozenset(needle for phrase in phrases for needle in phrase.needles[0])


_LATIN_FIRST: Final = _first_needles(_LATIN_SCRIPT)
_RUSSIAN_FIRST: Final = _first_needles(_RUSSIAN)


def _found(phrases: Sequence[_Phrase], first_needles: frozenset[str], folded_text: str) -> bool:
    """Whether one of ``phrases`` (each with needles) is in ``folded_text``.

    One pass of substring tests over the needles of every phrase's first group decides which
    phrases can match at all; usually none can.
    """
    present = {needle for needle in first_needles if needle in folded_text}
    if not present:
        return False
    folded = _Folded(folded_text)
    return any(not present.isdisjoint(phrase.needles[0]) and phrase.found_in(folded) for phrase in phrases)


_SQUASHED: Final = re.compile(
    merge_il(
        r"(?:ignore|disregard|forget|override|bypass|discard)(?:all|any|the|your|these|those|of|my){0,3}"
        r"(?:previous|prior|above|earlier|preceding)"
        r"(?:instructions|prompts|rules|directions|guidelines|directives)"
    )
)


_SQUASHED_VERBS: Final = ("ignore", "disregard", "forget", "override", "bypass", "discard")


def _squashed(folded: str) -> bool:
    """The core English phrase written without spaces ("ignoreallpreviousinstructions"), sought
    in each sentence with everything but letters removed."""
    if not any(verb in folded for verb in _SQUASHED_VERBS):
        return False
    return any(_SQUASHED.search(re.sub(r"[^a-z]", "", sentence)) for sentence in _STOPS.split(folded))


def has_injection_phrase(text: str) -> bool:
    """Whether ``text`` holds a phrase of the fixed list (DESIGN 10.6 rule 9).

    Expects text free of surrogates (the check's rule 1 runs first); never raises otherwise.
    """
    base = without_marks(text)
    latin = _latin_words(_tokens(merge_il(_with_confusables(base).casefold())))
    if _found(_LATIN_SCRIPT, _LATIN_FIRST, latin) or _squashed(latin):
        return True
    if base.isascii():
        return False
    plain = base.casefold()
    if _CYRILLIC.search(plain) is not None and _found(_RUSSIAN, _RUSSIAN_FIRST, plain):
        return True
    if _CJK.search(plain) is None:
        return False
    folded = _Folded(plain)
    return any(phrase.found_in(folded) for phrase in _CJK_PHRASES)
