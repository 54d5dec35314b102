"""The memory-write check: the content rules of DESIGN 10.6 (M5a section 5, "The check").

``check_text(text)`` applies the ten content rules, in this order, to text the caller has already
NFC-normalised; the first failing rule wins and names the ``refused:<rule>`` code:

1. ``surrogate``: a code point U+D800..U+DFFF (a lone surrogate, however it arrived);
2. ``control``: C0 except newline and tab (so CR is refused), DEL, C1 (U+0080..U+009F);
3. ``invisible``: ``proto.unicode_tables.INVISIBLE_RANGES`` (4,197 code points);
4. ``noncharacter``: U+FDD0..U+FDEF and every U+xxFFFE, U+xxFFFF (66 code points);
5. ``combining-run``: more than 30 combining marks in a row. A combining mark is a code point with
   a non-zero canonical combining class (a non-starter in UAX #15's Stream-Safe Text Format, whose
   bound is 30) or of general category Mn or Me (so enclosing marks and class-0 nonspacing marks
   such as U+20DD or U+0489 also count);
6. ``separator``: a line (split on "\\n" only) whose stripped text (``str.strip``, which strips
   NBSP) is ``§``, or starts with ``§`` and white space: it could pass for a notes header;
7. ``template``, on an NFKC copy: ``<|``, ``|>``, and the special tokens of the common chat
   templates (Gemma turns, Llama 2 and Mistral ``[INST]``/``<<SYS>>`` and the bracketed tool and
   system tokens with their closing forms, ``<think>``, ``<tool_call>``, ``<tool_response>`` and
   their closing forms, all in any case; ``<s>`` and ``</s>`` in lower case only, so that a
   generic ``Vec<S>`` stays fine);
8. ``role``, on the NFKC copy: a line that opens like a turn of another speaker: after optional
   white space and markdown markers (``# > * - _ +``), ``system``, ``assistant``, ``developer``,
   ``tool`` or ``human`` in any case, optionally in ``[...]``, ``<...>`` or ``(...)``, then a colon;
   or a markdown heading that is only ``Instruction``, ``Response`` or ``System`` (any level, any
   case, optional colon). ``User:`` is allowed. Added (docs/decisions.md, "More injection
   families"): a line or heading that is only "new instructions", "updated system prompt" and the
   like; a fake role or prompt-section marker opening a line (``[SYSTEM]``, ``<system>``,
   ``</memory>``, ``[ADMIN]`` …, unless the next word names it as markup: "<system> tag"); and a
   closing tag of a prompt section (``</memory>``, ``</system>``, ``</user>`` …) anywhere, when a
   tag follows it or it ends its line;
9. ``phrase``: the fixed injection phrases of ``memoryd.check.phrases`` (its docstring gives the fold);
10. ``mixed-script``: a word (a maximal run of letters and combining marks) holding both a Latin
    and a Cyrillic letter, the script read from the letter's Unicode name;
11. ``secret`` (DESIGN 11; seed 003 section 18, "never store credentials or tokens"), on the NFKC
    copy (so full-width forms are caught): a credential's shape: a PEM private key
    (``-----BEGIN ... PRIVATE KEY-----``, any run of spaces, with its END line or a base64 body of 40
    or more characters after it: a header alone is a mention), a PuTTY key (``PuTTY-User-Key-File-N:``
    or ``Private-Lines:``), an AWS access key id (``AKIA``/``ASIA`` and 16 upper-case letters or
    digits), a GitHub token (``ghp_``, ``gho_``, ``ghu_``, ``ghs_``, ``ghr_`` and 30 or more characters,
    ``github_pat_``), a GitLab ``glpat-`` token (20 or more), a Hugging Face ``hf_`` token (30 or more
    letters and digits), an ``sk-``/``sk-ant-``/``sk-proj-`` key (a hyphen-free part of 16 or more
    characters mixing letters and digits: ``sk-learn-pipeline-v2`` is a name) or a Stripe
    ``sk_live_``/``sk_test_`` key, a Slack ``xox[abpr]-`` token, a Google ``AIza`` key (35 more
    characters), a JWT (three base64url parts, the first starting ``eyJ``), ``Bearer`` and a token of
    20 or more characters with a digit, a URL with a password (``scheme://user:password@host``), and
    an assignment (``password=``, ``api_key:``, ``"client_secret": "..."`` and the like) whose value is
    not a placeholder (``$VAR``, ``<...>``, ``{...}``, ``%s``, ``***``, ``none``, one character
    repeated) and is 8 or more characters, or, for ``password``/``passwd``/``pwd``/``secret``/
    ``token``, any length when quoted, assigned with ``=``, not all letters, or ending its line.
    Mentions stay accepted: "rotate the AWS key", "ghp_ tokens", "password: see the vault",
    "Bearer tokens expire", "sk-learn", "-----BEGIN PRIVATE KEY----- starts a key".

Rule 11 is not one of the ten of ``../shared/data/bad-inputs-dev.json`` (`CONTENT_RULES`); it is the
protocol's (`PROTOCOL_RULES`) and runs after them (`RULES` is the whole order).

Pure: no I/O; the tables are built once, when the module is imported. The argument and edit rules
(``length``, ``empty``, ``limit``) belong to the edit code, which applies them first.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Final

from boxmaker.memoryd.check.confusables import has_lookalike_word, merge_il, skeleton
from boxmaker.memoryd.check.phrases import MARK_RANGES, has_injection_phrase, without_marks
from boxmaker.memoryd.check.secrets import has_secret
from boxmaker.proto.unicode_tables import (
    ASTRAL_RE,
    CONTROL_RANGES,
    INVISIBLE_RANGES,
    NONCHARACTER_RANGES,
    SURROGATE_RANGES,
    bmp_class,
    one_of,
    ranges_of,
)

__all__ = [
    "CONTENT_RULES",
    "HARDENING_RULES",
    "PROTOCOL_RULES",
    "RULES",
    "CheckRefusal",
    "check_text",
    "sentence_for",
    "sentence_keys",
]

CONTENT_RULES: Final[tuple[str, ...]] = (
    "surrogate",
    "control",
    "invisible",
    "noncharacter",
    "combining-run",
    "separator",
    "template",
    "role",
    "phrase",
    "mixed-script",
)
#: Rules the protocol adds after the ten (seed 003 section 18).
PROTOCOL_RULES: Final[tuple[str, ...]] = ("secret",)
#: Rules added by the security hardening (issue 15): ``format`` right after ``invisible``, ``heading``
#: last.
HARDENING_RULES: Final[tuple[str, ...]] = ("format", "heading")
#: Every content rule, in the order they are applied.
RULES: Final[tuple[str, ...]] = (
    *CONTENT_RULES[:3],
    "format",
    *CONTENT_RULES[3:],
    *PROTOCOL_RULES,
    "heading",
)
#: Sentences that refine a rule: the key, and the rule (code) it refuses under.
_REFINES: Final[Mapping[str, str]] = MappingProxyType({"mixed-script-lookalike": "mixed-script"})

_SENTENCES: Final[Mapping[str, str]] = MappingProxyType(
    {
        "surrogate": "refused (surrogate): the text contains a lone surrogate code point, "
        "which is not a character; nothing was written",
        "control": "refused (control): the text contains a control character other than "
        "newline and tab; nothing was written",
        "invisible": "refused (invisible): the text contains an invisible or "
        "direction-changing character; nothing was written",
        "noncharacter": "refused (noncharacter): the text contains a Unicode noncharacter; "
        "nothing was written",
        "combining-run": "refused (combining-run): the text has more than 30 combining marks "
        "in a row; nothing was written",
        "separator": "refused (separator): a line holds only the entry separator § or starts "
        "with § and a space; nothing was written",
        "template": "refused (template): the text contains chat-template markup or a model's "
        "special token; nothing was written",
        "role": "refused (role): a line opens like a turn of another speaker, such as a system "
        "or assistant label or an instruction heading; nothing was written",
        "phrase": "refused (phrase): the text contains a known prompt-injection phrase; nothing was written",
        "mixed-script": "refused (mixed-script): a word mixes Latin and Cyrillic letters; "
        "nothing was written",
        "mixed-script-lookalike": "refused (mixed-script): a word mixes letters of different scripts "
        "that together read as a plain Latin word; nothing was written",
        "format": "refused (format): the text contains a format, private-use or object-replacement "
        "character; nothing was written",
        "heading": "refused (heading): a line reads like a heading of the memory block (such as "
        "# soul.md or # memory.md); nothing was written",
        "secret": "refused (secret): the text looks like a credential (a private key, an API key, "
        "a token or a password); credentials are never stored in memory; nothing was written",
    }
)


@dataclass(frozen=True, slots=True)
class CheckRefusal:
    """Why ``check_text`` refused a text: the rule's name and its fixed sentence."""

    rule: str
    sentence: str

    @property
    def code(self) -> str:
        """The stable machine-read code, ``refused:<rule>`` (DESIGN 10.3)."""
        return f"refused:{self.rule}"


def sentence_for(rule: str) -> str:
    """The fixed sentence of content rule ``rule`` (or of a refinement key, `sentence_keys`);
    ``KeyError`` for any other name."""
    return _SENTENCES[rule]


def sentence_keys() -> tuple[str, ...]:
    """Every rule and refinement that has a fixed sentence (the sentences snapshot pins each)."""
    return tuple(_SENTENCES)


def check_text(text: str) -> CheckRefusal | None:
    """Apply rules 1-11 to text the caller has already NFC-normalised; first failing rule wins.

    Returns None when the text is accepted, else the ``CheckRefusal`` of the first rule (in
    ``RULES`` order, not text position) that it fails. DESIGN 10.6 rules 1 to 10 and 11; M5a
    section 5, "The check". Never raises for any ``str``, lone surrogates included (rule 1 refuses
    them before any normalisation runs).
    """
    key = _first_failing_rule(text)
    return None if key is None else CheckRefusal(_REFINES.get(key, key), _SENTENCES[key])


@dataclass(frozen=True, slots=True)
class _Search:
    """One regular expression in two builds: with every class whole (``one_of``), and with the
    classes cut to the Basic Multilingual Plane, which ``re`` runs several times faster and which
    gives the same answer for text without astral characters."""

    full: re.Pattern[str]
    bmp: re.Pattern[str]

    @classmethod
    def build(cls, template: str, flags: int = 0, **sets: Sequence[tuple[int, int]]) -> _Search:
        """``template`` names each code point set as ``%(name)s``."""
        full = {name: one_of(ranges) for name, ranges in sets.items()}
        bmp = {name: bmp_class(ranges) for name, ranges in sets.items()}
        return cls(re.compile(template % full, flags), re.compile(template % bmp, flags))

    def found(self, text: str, astral: bool) -> bool:
        return (self.full if astral else self.bmp).search(text) is not None


def _format_ranges() -> list[tuple[int, int]]:
    """``format``: Cf outside the invisible table (U+0600..U+0605, U+06DD, U+110BD …), private use
    (Co) and U+FFFC, OBJECT REPLACEMENT CHARACTER; U+FFFD stays accepted (bad-inputs-dev.json
    ok-replacement-char; docs/decisions.md)."""
    invisible = {cp for first, last in INVISIBLE_RANGES for cp in range(first, last + 1)}
    found = [0xFFFC]
    for block in (range(0x20000), range(0xE0000, 0xE1000)):
        found += [cp for cp in block if unicodedata.category(chr(cp)) == "Cf" and cp not in invisible]
    private = [(0xE000, 0xF8FF), (0xF0000, 0xFFFFD), (0x100000, 0x10FFFD)]
    return sorted([*ranges_of(sorted(found)), *private])


FORMAT_RANGES: Final[tuple[tuple[int, int], ...]] = tuple(_format_ranges())

# Rules 1 to 4 and format: one scan for all; on a hit, the rule is the first in rule order that fails.
_CODE_POINT_RULES: Final = (
    ("surrogate", SURROGATE_RANGES),
    ("control", CONTROL_RANGES),
    ("invisible", INVISIBLE_RANGES),
    ("format", FORMAT_RANGES),
    ("noncharacter", NONCHARACTER_RANGES),
)
_ANY_CODE_POINT_RULE: Final = _Search.build(
    "%(any)s", any=sorted(pair for _, ranges in _CODE_POINT_RULES for pair in ranges)
)
_EACH_CODE_POINT_RULE: Final = tuple((rule, re.compile(one_of(ranges))) for rule, ranges in _CODE_POINT_RULES)

_COMBINING_RUN: Final = _Search.build("%(mark)s{31}", mark=MARK_RANGES)

_SEPARATOR_LINE: Final = re.compile(r"^[^\S\n]*§(?:[^\S\n]|$)", re.MULTILINE)

# Every alternative starts with "<", "|" or "[", which ``re`` then uses to skip ahead.
_TEMPLATE: Final = re.compile(
    r"<\||\|>|<start_of_turn>|<end_of_turn>|<</?sys>>|</?think>|</?tool_call>|</?tool_response>"
    r"|\[/?(?:inst|system_prompt|tool_calls|available_tools|tool_results|tool_content|think)\]",
    re.IGNORECASE,
)
_SENTENCE_TOKEN: Final = re.compile(r"</?s>")  # lower case only: "Vec<S>" is ordinary code
#: Special tokens of more chat templates, in their exact case (a tokenizer matches them so): Gemma's
#: ``<bos>``, ``<eos>``, ``<pad>`` and image and audio markers; GLM's ``[gMASK]``, ``[sMASK]``, ``<sop>``,
#: ``<eop>``; Mistral's image tokens; the fill-in-the-middle markers of Code Llama and Mistral.
_EXACT_TOKENS: Final = re.compile(
    r"<(?:bos|eos|pad|sop|eop|start_of_image|end_of_image|image_soft_token|start_of_audio"
    r"|end_of_audio|audio_soft_token)>"
    r"|\[(?:gMASK|sMASK|IMG|IMG_BREAK|IMG_END|PREFIX|SUFFIX|MIDDLE)\]"
    r"|<(?:PRE|SUF|MID|EOT)>"
)

# Each white-space run below is bounded by characters it cannot match, so that no two
# repetitions can share out the same run between them: matching stays linear in the line length.
_ROLE_LABEL: Final = (
    r"^(?:[^\S\n]|[#>*_+\-])*"  # white space and markdown markers
    r"(?:[\[<(][^\S\n]*)?"  # an opening bracket
    r"(?:system|assistant|developer|tool|human)"
    r"(?:[^\S\n]*[\]>)])?"  # a closing bracket
    r"(?:[^\S\n]|[*_])*:"
)
_ROLE_HEADING: Final = (
    r"^(?:[^\S\n]|>)*#+[^\S\n]*[*_]*"
    r"(?:instruction|response|system)"
    r"(?:[^\S\n]|[*_])*(?::(?:[^\S\n]|[*_])*)?$"
)
#: A line (or heading) that is only "new instructions", "updated system prompt" and the like;
#: "new instructions for the dishwasher are in the drawer" goes on, and is prose.
_ROLE_NEW_INSTRUCTIONS: Final = (
    r"^(?:[^\S\n]|[#>*_+\-])*"
    r"(?:new|updated|revised|real|actual|true|hidden|secret|override|additional|important)"
    r"[^\S\n]+(?:system[^\S\n]+)?(?:instructions?|directives?|prompt|system[^\S\n]+prompt)"
    r"(?:[^\S\n]|[*_])*(?::(?:[^\S\n]|[*_])*)?$"
)
_SECTION_NAMES: Final = (
    r"system|system[_\-]?prompt|assistant|developer|tool|human|admin|administrator|root|sudo"
    r"|memory|instructions?|prompt|context|soul|override|jailbreak|im_start|im_end"
)
#: A fake role or prompt-section marker opening a line: ``[SYSTEM]``, ``<system>``, ``</memory>``
#: (not when the line goes on to name it as markup: "<system> tag in our XML config").
_ROLE_MARKER: Final = (
    r"^(?:[^\S\n]|[#>*_+\-])*(?:\[[^\S\n]*|</?)(?:" + _SECTION_NAMES + r")[^\S\n]*[\]>]"
    r"(?![^\S\n]*(?:tags?|elements?|sections?|blocks?|fields?|nodes?|keys?|entry|entries|headers?"
    r"|markers?|tokens?|names?|labels?)\b)"
)
#: A closing tag of a prompt section (``</memory>``, ``</system>``, ``</user>`` …) anywhere, when a
#: tag follows it or the line ends with it: the text pretends to close the block it is read in.
_ROLE_CLOSING: Final = (
    r"</[^\S\n]*(?:" + _SECTION_NAMES + r"|user|notes|conventions)[^\S\n]*>(?=[^\S\n]*(?:<|$))"
)
_ROLE_ALL: Final = "|".join((_ROLE_LABEL, _ROLE_HEADING, _ROLE_NEW_INSTRUCTIONS, _ROLE_MARKER, _ROLE_CLOSING))
_ROLE: Final = re.compile(_ROLE_ALL, re.MULTILINE | re.IGNORECASE)
#: The same on the confusables fold (`_folded`), where I-like and l-like letters are one letter.
_ROLE_FOLDED: Final = re.compile(merge_il(_ROLE_ALL), re.MULTILINE | re.IGNORECASE)
#: ``heading``: a line that reads like a section heading of the memory block (a file of memory/).
_HEADING: Final = re.compile(
    merge_il(r"^(?:[^\S\n]|>)*#{1,6}[^\S\n]*[*_`]*(?:soul|conventions|memory|user|notes|index)\.md\b"),
    re.MULTILINE | re.IGNORECASE,
)


def _script_ranges() -> tuple[list[tuple[int, int]], list[tuple[int, int]]]:
    """The Latin and the Cyrillic letters (by Unicode name) of planes 0 and 1, as ranges."""
    letters: dict[str, list[int]] = {"LATIN": [], "CYRILLIC": []}
    category, name = unicodedata.category, unicodedata.name
    # The skipped blocks hold neither: CJK ideographs, Yi, Hangul, surrogates, private use.
    for block in (range(0x3400), range(0xA000, 0xAC00), range(0xF900, 0x20000)):
        for cp in block:
            if category(chr(cp))[0] == "L":
                script = name(chr(cp), "").partition(" ")[0]
                if script in letters:
                    letters[script].append(cp)
    return list(ranges_of(letters["LATIN"])), list(ranges_of(letters["CYRILLIC"]))


_LATIN_RANGES, _CYRILLIC_RANGES = _script_ranges()
_ANY_CYRILLIC: Final = _Search.build("%(cyrillic)s", cyrillic=_CYRILLIC_RANGES)
_ANY_LATIN: Final = _Search.build("%(latin)s", latin=_LATIN_RANGES)
# A word holding both scripts holds a Latin and a Cyrillic letter with only other letters or marks
# (neither Latin nor Cyrillic) between them; the pattern starts at either letter, and its gap
# cannot pass a Latin or Cyrillic letter, so each character is looked at a bounded number of times.
_GAP: Final = r"(?:(?!%(both)s)(?:[^\W\d_]|%(mark)s))"
_MIXED_WORD: Final = _Search.build(
    f"%(both)s(?:(?<=%(latin)s){_GAP}*%(cyrillic)s|(?<=%(cyrillic)s){_GAP}*%(latin)s)",
    both=sorted([*_LATIN_RANGES, *_CYRILLIC_RANGES]),
    latin=_LATIN_RANGES,
    cyrillic=_CYRILLIC_RANGES,
    mark=MARK_RANGES,
)


def _first_failing_rule(text: str) -> str | None:
    ascii_only = text.isascii()  # then no mark, no Cyrillic, nothing astral, and NFKC is a no-op
    astral = not ascii_only and ASTRAL_RE.search(text) is not None
    if _ANY_CODE_POINT_RULE.found(text, astral):
        for rule, pattern in _EACH_CODE_POINT_RULE:
            if pattern.search(text) is not None:
                return rule
    if not ascii_only and _COMBINING_RUN.found(text, astral):
        return "combining-run"
    if "§" in text and _SEPARATOR_LINE.search(text) is not None:
        return "separator"
    nfkc = text if ascii_only else unicodedata.normalize("NFKC", text)
    if _TEMPLATE.search(nfkc) or _SENTENCE_TOKEN.search(nfkc) or _EXACT_TOKENS.search(nfkc):
        return "template"
    folded = merge_il(nfkc.casefold()) if ascii_only else _folded(nfkc)
    if _ROLE.search(nfkc) is not None or (not ascii_only and _ROLE_FOLDED.search(folded) is not None):
        return "role"
    if has_injection_phrase(text):
        return "phrase"
    if not ascii_only and _has_mixed_script_word(text, astral):
        return "mixed-script"
    if not ascii_only and has_lookalike_word(text):
        return "mixed-script-lookalike"
    if has_secret(nfkc):
        return "secret"
    if "#" in folded and _HEADING.search(folded) is not None:
        return "heading"
    return None


def _folded(nfkc: str) -> str:
    """The NFKC copy with combining marks removed, confusables replaced by their ASCII prototypes,
    case folded and ``l`` read as ``i`` (`check.confusables`)."""
    return merge_il(skeleton(without_marks(nfkc)).casefold())


def _has_mixed_script_word(text: str, astral: bool) -> bool:
    return (
        _ANY_CYRILLIC.found(text, astral)
        and _ANY_LATIN.found(text, astral)
        and _MIXED_WORD.found(text, astral)
    )
