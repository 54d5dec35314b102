"""What the review plan computes of item texts (`sections`; issue 16: a first plan over 100,000 items in
well under a second, nothing kept between plans but each topic's near pairs):

- `normalised`: text as duplicates are compared (NFKC, case folded, punctuation and spacing collapsed);
- `reads_like_rule`: text that reads like a standing rule (``always``, ``never``, ``from now on``, …);
- `facts`: for many texts at once, a key per text (equal `normalised` texts have equal keys; unequal ones
  may too, so a caller compares `normalised` when two keys are equal) and `reads_like_rule`, with the
  ASCII texts done a few thousand at a time in whole-buffer operations instead of one by one;
- `near_pairs`: the pairs of a topic whose normalised texts are near-identical (difflib's ratio at least
  `NEAR`), with only the pairs that can reach it compared (close lengths, enough characters shared).
"""

from __future__ import annotations

import bisect
import difflib
import re
import unicodedata
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from itertools import accumulate

NEAR = 0.9


#: What reads like a standing rule (an identity entry is read by it alone).
RULE = re.compile(
    r"\b(always|never|from now on|every time|whenever|must not|must|do not ever|don't ever)\b", re.IGNORECASE
)


_WORDS = re.compile(r"[^\w]+")
#: Every ASCII character `_WORDS` matches, mapped to a space (`normalised`'s fast path).
_ASCII_NON_WORDS = {c: " " for c in range(128) if _WORDS.fullmatch(chr(c))}
#: The same characters as bytes, deleted by `facts` (all but NUL, which separates the texts it joins).
_ASCII_NON_WORD_BYTES = bytes(c for c in _ASCII_NON_WORDS if c)
#: What `RULE` can match in ASCII text, lowercased: one of these is in it.
_RULE_WORDS = ("always", "never", "from now on", "every time", "must", "do not ever", "don't ever")
#: The same with their non-word characters deleted, as `facts` looks for them in its buffer (a text whose
#: lowered form holds a rule word holds this once those characters are gone).
_RULE_WORDS_SQUASHED = tuple(
    word.encode("ascii").translate(None, _ASCII_NON_WORD_BYTES) for word in _RULE_WORDS
)

#: How many ASCII texts `facts` joins into one buffer (a few MB at most: memoryd's peak stays low).
CHUNK = 4096


def normalised(text: str) -> str:
    """Text as duplicates are compared: NFKC, case folded, punctuation and spacing collapsed."""
    if text.isascii():  # the same, faster: NFKC leaves ASCII as it is, and casefold is lower
        return " ".join(text.lower().translate(_ASCII_NON_WORDS).split())
    return " ".join(_WORDS.sub(" ", unicodedata.normalize("NFKC", text).casefold()).split())


def reads_like_rule(text: str) -> bool:
    """True when `text` reads like a standing rule (`RULE`); ASCII text holding none of its words is
    passed over without the pattern."""
    if text.isascii():
        lower = text.lower()
        if not any(word in lower for word in _RULE_WORDS):
            return False
    return RULE.search(text) is not None


def facts(texts: Sequence[str]) -> tuple[list[int], list[int]]:
    """For each of `texts`, in order, its key: the hash of its `normalised` form without spaces (its word
    characters, folded) as UTF-8, so equal normalised texts give equal keys; and the positions in
    `texts` of those that `reads_like_rule`, in order."""
    keys: list[int] = []
    ruled: list[int] = []
    for start in range(0, len(texts), CHUNK):
        found, rules = _facts(texts[start : start + CHUNK])
        keys += found
        ruled += (start + n for n in rules)
    return keys, ruled


def _facts(texts: Sequence[str]) -> tuple[list[int], list[int]]:
    """`facts` of a few thousand texts, joined by NUL into one UTF-8 buffer: lowered, their ASCII
    non-word characters deleted and the rule words (squashed the same way) looked for over the whole
    buffer at once, which is exact for ASCII texts (each found holding a rule word is then read by
    `reads_like_rule` itself); the few others are done one by one."""
    joined = "\x00".join(texts)
    if joined.count("\x00") != len(texts) - 1:  # a text holding NUL: one by one
        return [_key(t) for t in texts], [n for n, t in enumerate(texts) if reads_like_rule(t)]
    lowered = joined.encode("utf-8", "surrogatepass").lower()  # bytes.lower: ASCII letters only
    squashed = lowered.translate(None, _ASCII_NON_WORD_BYTES)
    words = squashed.split(b"\x00")
    keys = list(map(hash, words))
    starts = list(accumulate((len(word) + 1 for word in words), initial=0))
    maybe = {bisect.bisect_right(starts, at) - 1 for at in _found(squashed, _RULE_WORDS_SQUASHED)}
    for n, text in enumerate(texts):
        if not text.isascii():
            keys[n] = _key(text)
            maybe.add(n)
    return keys, [n for n in sorted(maybe) if reads_like_rule(texts[n])]


def _key(text: str) -> int:
    """`facts`' key of one text: the hash of its normalised form's word characters, as UTF-8 bytes
    (what the buffer holds of an ASCII text)."""
    return hash(normalised(text).replace(" ", "").encode("utf-8", "surrogatepass"))


def _found(data: bytes, needles: Sequence[bytes]) -> Iterator[int]:
    """Where each of `needles` starts in `data`."""
    for needle in needles:
        at = data.find(needle)
        while at >= 0:
            yield at
            at = data.find(needle, at + 1)


def near_pairs(texts: Mapping[int, str], distinct: Sequence[int]) -> list[tuple[int, int]]:
    """The pairs (a, b), a before b in `distinct`, whose texts are near-identical (ratio >= `NEAR`), in
    that order. Two texts whose lengths differ too much cannot reach `NEAR` (the ratio is at most
    2 * shorter / (both lengths)), so only texts of close lengths are compared: near-linear in a large
    topic instead of every pair. A pair is then compared only when difflib's `quick_ratio` bound (the
    characters both hold, counted with repeats) reaches `NEAR`, that count taken as the set bits two
    `_unary` bags share, and when the tighter bound of their `lcs_length` does too."""
    by_length = sorted(distinct, key=lambda i: len(texts[i]))
    lengths = [len(texts[i]) for i in by_length]
    unary = _unary({i: Counter(texts[i]) for i in distinct})
    bags = [unary[i] for i in by_length]
    found: list[tuple[int, int]] = []
    for x, a in enumerate(by_length):
        size, bag = lengths[x], bags[x]
        end = bisect.bisect_right(lengths, size * (2 - NEAR) / NEAR)  # 2 * la / (la + lb) >= NEAR
        for y in range(x + 1, end):
            if 2 * (bag & bags[y]).bit_count() < NEAR * (size + lengths[y]):  # the characters both hold
                continue
            b = by_length[y]
            one, two = (a, b) if a < b else (b, a)
            if 2 * lcs_length(texts[one], texts[two]) < (NEAR - 1e-9) * (size + lengths[y]):
                continue  # difflib's matches are a common subsequence: the ratio cannot reach NEAR
            matcher = difflib.SequenceMatcher(None, texts[one], texts[two], autojunk=False)
            if matcher.quick_ratio() >= NEAR and matcher.ratio() >= NEAR:
                found.append((one, two))
    return sorted(found)


def lcs_length(a: str, b: str) -> int:
    """The length of the longest common subsequence of `a` and `b`, in characters: Hyyrö's bit-parallel
    form (one bit per character of `b`, a few int operations per character of `a`), so a pair costs
    about what difflib spends on one match; difflib's matching blocks are a common subsequence, so its
    ratio is at most 2 * this / (both lengths)."""
    masks: dict[str, int] = {}
    for at, char in enumerate(b):
        masks[char] = masks.get(char, 0) | (1 << at)
    full = (1 << len(b)) - 1
    row = full
    for char in a:
        common = row & masks.get(char, 0)
        row = ((row + common) | (row - common)) & full
    return len(b) - row.bit_count()


def _unary(counts: Mapping[int, Counter[str]]) -> dict[int, int]:
    """Each text's characters as one int: a field of bits per character (as wide as the most any text
    holds of it), with as many low bits set as the text holds of that character, so the bits two
    texts share (``a & b``) count the characters they share with repeats (`Counter`'s ``&``)."""
    widest: dict[str, int] = {}
    for counted in counts.values():
        for char, count in counted.items():
            if count > widest.get(char, 0):
                widest[char] = count
    at = dict(zip(widest, accumulate(widest.values(), initial=0), strict=False))
    return {
        i: sum(((1 << count) - 1) << at[char] for char, count in counted.items())
        for i, counted in counts.items()
    }
