"""The write check's ``secret`` rule (DESIGN 11; seed 003 section 18, "never store credentials or
tokens"), and `redact`, the same matcher applied to every text that becomes recall text (issue 15
item 5: the index, a reindex, snippets, export).

A credential is found by its shape (`secret_spans`), on the NFKC form of the text (so full-width look-
alikes are caught as their ASCII forms):

- a PEM private key (``-----BEGIN ... PRIVATE KEY-----`` with its END line or a base64 body of 40 or
  more characters after it: a header alone is a mention), a PuTTY key, and a key body without its
  armour: the base64 DER openings of RSA, PKCS #8, EC and Ed25519 private keys and of OpenSSH's
  ``openssh-key-v1``, or three or more lines of exactly 64 base64 characters;
- provider tokens by their prefix: AWS ``AKIA``/``ASIA``, GitHub ``ghp_`` … ``github_pat_``, GitLab
  ``glpat-``/``glptt-``/``gldt-``, Hugging Face ``hf_``, npm ``npm_``, PyPI ``pypi-``, Stripe
  ``sk_``/``rk_`` ``live``/``test``, ``whsec_``, Slack ``xox?-`` and ``xapp-``, Google ``AIza`` and
  ``ya29.`` and ``GOCSPX-``, SendGrid ``SG.``, Shopify ``shp??_``, DigitalOcean ``dop_v1_``, Atlassian
  ``ATATT3``, Notion ``secret_``/``ntn_``, Linear ``lin_api_``, Square ``sq0atp-``/``sq0csp-``,
  Databricks ``dapi``, Vault ``hvs.``, Tailscale ``tskey-``, Replicate ``r8_``, Groq ``gsk_``,
  Perplexity ``pplx-``, xAI ``xai-``, NVIDIA ``nvapi-``, Grafana ``glsa_``, Docker ``dckr_pat_``, a JWT,
  ``Bearer``/``Basic``/``Token`` credentials after ``Authorization:`` or alone;
- an ``sk-`` key (OpenAI, Anthropic, DeepSeek and the legacy forms): a hyphen-free part of 16 or more
  characters mixing letters and digits, or parts that joined are random-looking (`random_token`)
  (``sk-learn-pipeline-v2`` stays a name);
- a URL with a password (``scheme://user:password@host``);
- an assignment to a credential's name (``password=``, ``api_key:``, ``"client_secret": "..."``) whose
  value is not a placeholder (``$VAR``, ``<...>``, ``***``, ``none`` …) and is 8 or more characters, or
  for ``password``/``passwd``/``pwd``/``secret``/``token`` any length when quoted, assigned with ``=``,
  not all letters, or ending its line;
- any other ``name=value`` or ``name: value`` whose value is random-looking: 20 or more key
  characters holding a lower-case letter, an upper-case letter and a digit, with a Shannon entropy of
  at least 3.7 bits a character, not hex and not a URL, not an identifier of words (`random_token`);
  ordinary prose and the
  identifiers, hashes, versions and ids people write have none (tests: every turn of locomo-dev);
- any of these split over lines or spaces: chunks of key characters each holding a digit or an
  upper-case letter after its first, joined and checked again.

Mentions stay accepted: "rotate the AWS key", "ghp_ tokens", "password: see the vault", "Bearer tokens
expire", "sk-learn", "-----BEGIN PRIVATE KEY----- starts a key"; quoted after a credential's name
("password: \"see the vault\"") a value is taken for the credential, and withheld whole to its
closing quote. Every pattern is anchored on a fixed
prefix or bounded, so matching stays linear in the text's length. Pure.
"""

from __future__ import annotations

import math
import re
import unicodedata
from collections import Counter
from typing import Final

__all__ = ["REDACTED", "has_secret", "random_token", "redact", "secret_spans"]

#: What `redact` puts where a credential was.
REDACTED: Final = "[secret withheld]"

_SHAPES: Final = re.compile(
    r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b"
    r"|\bgh[pousr]_[A-Za-z0-9]{30,}"
    r"|\bgithub_pat_[A-Za-z0-9_]{22,}"
    r"|\bgl(?:pat|ptt|dt)-[A-Za-z0-9_\-]{20,}"
    r"|\bhf_[A-Za-z0-9]{30,}"
    r"|\bnpm_[A-Za-z0-9]{36,}"
    r"|\bpypi-AgE[A-Za-z0-9_\-]{50,}"
    r"|\b(?:sk|rk)_(?:live|test)_[A-Za-z0-9]{20,}"
    r"|\bwhsec_[A-Za-z0-9+/=]{24,}"
    r"|\bxox[abprse]-[A-Za-z0-9\-]{10,}"
    r"|\bxapp-[0-9]-[A-Za-z0-9\-]{20,}"
    r"|\bAIza[0-9A-Za-z_\-]{35}"
    r"|\bya29\.[A-Za-z0-9_\-]{30,}"
    r"|\bGOCSPX-[A-Za-z0-9_\-]{24,}"
    r"|\bSG\.[A-Za-z0-9_\-]{22}\.[A-Za-z0-9_\-]{43}"
    r"|\bshp(?:at|ss|ca|pa)_[a-fA-F0-9]{32}"
    r"|\bdop_v1_[a-f0-9]{64}"
    r"|\bATATT3[A-Za-z0-9_\-=]{50,}"
    r"|\b(?:secret|ntn)_[A-Za-z0-9]{40,}"
    r"|\blin_api_[A-Za-z0-9]{40}"
    r"|\bsq0(?:atp|csp)-[A-Za-z0-9_\-]{22,}"
    r"|\bdapi[a-f0-9]{32}"
    r"|\bhvs\.[A-Za-z0-9_\-]{24,}"
    r"|\btskey-[a-z]+-[A-Za-z0-9]{6,}-[A-Za-z0-9]{10,}"
    r"|\br8_[A-Za-z0-9]{37}"
    r"|\bgsk_[A-Za-z0-9]{40,}"
    r"|\bpplx-[A-Za-z0-9]{40,}"
    r"|\bxai-[A-Za-z0-9]{60,}"
    r"|\bnvapi-[A-Za-z0-9_\-]{40,}"
    r"|\bglsa_[A-Za-z0-9]{32}_[A-Fa-f0-9]{8}"
    r"|\bdckr_pat_[A-Za-z0-9_\-]{24,}"
    r"|\beyJ[A-Za-z0-9_\-]{10,}\.[A-Za-z0-9_\-]{10,}\.[A-Za-z0-9_\-]{16,}"
    r"|\b(?:[Bb]earer|BEARER)[ \t]+(?=[A-Za-z._~+/=\-]*[0-9])[A-Za-z0-9._~+/=\-]{20,}"
    r"|\b[Aa]uthorization[\"']?[ \t]*[:=][ \t]*[\"']?(?:Basic|Token|Digest|token)[ \t]+[A-Za-z0-9+/=._\-]{8,}"
    r"|\bPuTTY-User-Key-File-[0-9]+:[ \t]*[A-Za-z0-9]"
    r"|^[ \t]*Private-Lines:[ \t]*[0-9]+[ \t]*$"
    # Key bodies without their armour: DER openings of private keys in base64, OpenSSH's magic.
    r"|\bMII[A-Za-z0-9+/]{3}(?:IBAAK|IBADANBgkqhkiG9w0BAQEFAASC)[A-Za-z0-9+/]{20,}"
    r"|\bM[HI][A-Za-z0-9+/]{2}AgEAMBMGByqGSM49[A-Za-z0-9+/]{20,}"
    r"|\bMHcCAQEE[A-Za-z0-9+/]{30,}"
    r"|\bMC4CAQAwBQYDK2Vw[A-Za-z0-9+/]{20,}"
    r"|\bb3BlbnNzaC1rZXktdjE[A-Za-z0-9+/=]{20,}",
    re.MULTILINE,
)
#: Three or more lines of exactly 64 base64 characters: the body of a PEM block.
_PEM_BODY: Final = re.compile(r"(?:^[ \t]*[A-Za-z0-9+/]{64}[ \t]*\n){3,}", re.MULTILINE)
_SK_TOKEN: Final = re.compile(r"\bsk-[A-Za-z0-9_\-]{16,}")
_RANDOM_PART: Final = re.compile(r"(?=[A-Za-z_]*[0-9])(?=[0-9_]*[A-Za-z])[A-Za-z0-9_]{16,}\Z")
_PEM_HEADER: Final = re.compile(r"-----BEGIN[A-Z0-9 ]{0,40}PRIVATE[ \t]{1,8}KEY(?:[ \t]{1,8}BLOCK)?-----")
_PEM_END: Final = re.compile(r"-----END[A-Z0-9 ]{0,40}PRIVATE[ \t]{1,8}KEY(?:[ \t]{1,8}BLOCK)?-----")
_BASE64_TOKEN: Final = re.compile(r"[A-Za-z0-9+/]{16,}={0,2}\Z")
_URL_CREDENTIAL: Final = re.compile(
    r"\b[A-Za-z][A-Za-z0-9+.\-]{0,30}://[^\s:/@]{1,256}:([^\s/@]{1,256})@[A-Za-z0-9\[]"
)
_ASSIGNMENT: Final = re.compile(
    r"(?<![A-Za-z0-9])(password|passwd|passphrase|pwd|secret|token|api[_\-]?key|apikey|api[_\-]?secret"
    r"|access[_\-]?key|secret[_\-]?key|access[_\-]?token|auth[_\-]?token|refresh[_\-]?token"
    r"|client[_\-]?secret|private[_\-]?key)"
    # a quoted value runs to its closing quote, spaces, escaped quotes (\") and, in single quotes,
    # apostrophes before a letter (it's) and all; an unquoted one to a blank
    r"([\"']?)[ \t]*([:=])[ \t]*([\"']?)((?<=\")(?:[^\"\\\n]|\\.)+(?=\")"
    r"|(?<=')(?:[^'\\\n]|\\.|'(?=[A-Za-z]))+(?=')|[^\s\"'`,;]+)",
    re.IGNORECASE,
)
_SHORT_KEYWORDS: Final = frozenset({"password", "passwd", "passphrase", "pwd", "secret", "token"})
_PLACEHOLDER: Final = re.compile(
    r"^(?:[$<{%\[(*]|redacted|none|null|nil|empty|unset|hidden|omitted|n/a|(.)\1*$)", re.IGNORECASE
)
#: Any ``name=value`` or ``name: value``: the value is judged by `random_token`.
_KEY_VALUE: Final = re.compile(
    r"(?<![A-Za-z0-9_])[A-Za-z_][A-Za-z0-9_.\-]{0,40}[\"']?[ \t]*[:=][ \t]*[\"']?([A-Za-z0-9+/=_\-.~]{20,})"
)
_HEX: Final = re.compile(r"[0-9a-fA-F\-]+\Z")
#: Chunks of key characters separated by one space, tab or newline (a key split up).
_CHUNKS: Final = re.compile(
    r"[A-Za-z0-9_\-+/=.]{4,}(?:(?:[ \t]*\n[ \t]*|[ \t]+)[A-Za-z0-9_\-+/=.]{4,}){1,40}"
)
_LOWER_RUN: Final = re.compile(r"[a-z]{5,}")
_CHUNK_SPLIT: Final = re.compile(r"[ \t\n]+")
_KEYISH_CHUNK: Final = re.compile(r".[^0-9A-Z]*[0-9A-Z]")


def random_token(value: str) -> bool:
    """Whether `value` looks like a random key: 20 or more characters with a lower-case letter, an
    upper-case letter and a digit, not hex, not a URL, at least 3.7 bits of entropy a character, and
    either no run of five lower-case letters or four digits or more (``MemoryAdminReplyHandler2`` is an
    identifier: words leave long lower-case runs)."""
    if len(value) < 20 or "://" in value or _HEX.match(value):
        return False
    if _LOWER_RUN.search(value) and sum(c.isdigit() for c in value) < 4:
        return False
    if not (
        any(c.islower() for c in value)
        and any(c.isupper() for c in value)
        and any(c.isdigit() for c in value)
    ):
        return False
    counts = Counter(value)
    entropy = -sum(n / len(value) * math.log2(n / len(value)) for n in counts.values())
    return entropy >= 3.7


def _sk_key(token: str) -> bool:
    """An ``sk-`` token is a key when one hyphen-free part mixes letters and digits over 16 or more
    characters, or the parts joined are a `random_token` (``sk-learn-pipeline-v2`` is a name)."""
    parts = token[3:].split("-")
    return any(_RANDOM_PART.match(part) for part in parts) or random_token("".join(parts))


def _pem_end(text: str, end: int) -> int | None:
    """Where a PEM private key whose header ends at `end` ends: after its END line, or after a base64
    body of 40 or more characters; None when the header is a mention."""
    closing = _PEM_END.search(text, end)
    if closing is not None:
        return closing.end()
    body, position = 0, end
    for token in re.finditer(r"\S+", text[end : end + 2048]):
        if _BASE64_TOKEN.match(token.group()) is None:
            break
        body += len(token.group())
        position = end + token.end()
    return position if body >= 40 else None


def _assigned(text: str, match: re.Match[str]) -> bool:
    keyword, separator, quote, value = match.group(1).lower(), match.group(3), match.group(4), match.group(5)
    if _PLACEHOLDER.match(value) is not None:
        return False
    if len(value) >= 8:
        return True
    if keyword not in _SHORT_KEYWORDS or (keyword == "token" and value.isdigit()):
        return False
    rest = text[match.end() : match.end() + 1]
    return bool(quote) or separator == "=" or not value.isalpha() or rest in ("", "\n", "\r")


#: Quick tests of what each expression needs run before it (False: every expression runs on every
#: text, as a test compares). An expression matches only where its test passes:
#: - a run of 20 key characters, hence a word of 20 characters: `_SHAPES` (but for the three shapes
#:   of `_SHORT_SHAPES`), `_PEM_BODY`, a `_KEY_VALUE` value;
#: - ``sk-``, ``-----BEGIN``, ``://``: `_SK_TOKEN`, `_PEM_HEADER`, `_URL_CREDENTIAL`;
#: - ``:`` or ``=`` with a credential's name in any case (`_KEYWORDS`) right before it: `_ASSIGNMENT`;
#: - a chunk of four key characters or more after white space after another, with a digit or a capital
#:   after its first character: `_split_spans`.
#: The index redacts every record it stores, so most prose runs none of them.
QUICK = True
_SHORT_SHAPES: Final = ("xox", "uthorization", "Private-Lines:")
_KEYWORDS: Final = ("pass", "pwd", "secret", "token", "key")
_KEYISH_AFTER_SPACE: Final = re.compile(r"[ \t\n][A-Za-z0-9_\-+/=.][a-z_\-+/=.]*[0-9A-Z]")
#: What `_split_spans` needs of a text where `_KEYISH_AFTER_SPACE` matches (slower, so only then): a
#: chunk of `_CHUNKS` (four key characters or more) after white space after another chunk, key-like.
_KEYISH_PAIR: Final = re.compile(
    r"[A-Za-z0-9_\-+/=.]{4}[ \t\n]+(?=[A-Za-z0-9_\-+/=.]{4})[A-Za-z0-9_\-+/=.][a-z_\-+/=.]*[0-9A-Z]"
)
#: Every name of `_ASSIGNMENT` ends so (in lower case), right before its quote, blanks and ``:`` or ``=``.
_NAME_BEFORE: Final = re.compile(r"(?:word|wd|phrase|secret|token|key)[\"']?[ \t]*[:=]")


def _may_assign(text: str) -> bool:
    """Whether `_ASSIGNMENT` may match: a ``:`` or ``=`` and a credential's name in any case, for an
    ASCII text right before it (`_NAME_BEFORE`: "Caroline: I passed" is not looked at again)."""
    if "=" not in text and ":" not in text:
        return False
    if not text.isascii():
        return True  # case-insensitive matching knows a few non-ASCII forms of ASCII letters
    lowered = text.lower()
    # `_KEYWORDS` one by one (a generator over them took a third of a quiet text's time)
    return (
        "pass" in lowered or "pwd" in lowered or "secret" in lowered or "token" in lowered or "key" in lowered
    ) and _NAME_BEFORE.search(lowered) is not None


# For ASCII texts (nearly every chat turn) the quick tests are first made on a copy of the text's bytes
# with each character replaced by its class, where a plain substring search or a short expression does
# what a scan in Python did (`_quiet`).
#: Every white space character that `str.split` splits ASCII text at as b" ", everything else as b"x".
_SOLID: Final = bytes(32 if chr(c).isspace() else 120 for c in range(256))
#: `_KEYISH_AFTER_SPACE`'s classes: b" " for [ \t\n], b"a" for [a-z_\-+/=.], b"A" for [0-9A-Z], b"#".
_KEYISH_CLASSES: Final = bytes(
    32
    if chr(c) in " \t\n"
    else 97
    if chr(c) in "abcdefghijklmnopqrstuvwxyz_-+/=."
    else 65
    if chr(c) in "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ"
    else 35
    for c in range(256)
)
#: `_KEYISH_AFTER_SPACE` over `_KEYISH_CLASSES`: it matches the classes where it matches the text.
_KEYISH_CLASSED: Final = re.compile(rb" [aA]a*A")
#: `_KEYISH_PAIR` over `_KEYISH_CLASSES`.
_KEYISH_PAIR_CLASSED: Final = re.compile(rb"[aA]{4} +(?=[aA]{4})[aA]a*A")
_LONG_RUN: Final = b"x" * 20
_FIXED_HINTS: Final = ("sk-", "-----BEGIN", "://", *_SHORT_SHAPES)


def _quiet(text: str) -> bool:
    """For an ASCII `text`: True when none of the quick tests passes, so no expression can match
    (the same tests `_direct_spans` and `_split_spans` make one by one: a word of 20 characters, a
    fixed hint, a credential's name with ``:`` or ``=``, a key-like chunk after white space)."""
    if (
        "sk-" in text
        or "://" in text
        or "-----BEGIN" in text
        or "xox" in text
        or "uthorization" in text
        or "Private-Lines:" in text
        or _may_assign(text)
    ):
        return False  # `_FIXED_HINTS`, written out (faster than a generator over them)
    data = text.encode("ascii")
    if len(data) >= 20 and _LONG_RUN in data.translate(_SOLID):
        return False
    classes = data.translate(_KEYISH_CLASSES)
    return _KEYISH_CLASSED.search(classes) is None or _KEYISH_PAIR_CLASSED.search(classes) is None


def _direct_spans(text: str) -> list[tuple[int, int]]:
    """Spans of credentials in `text` as it is (no splits joined)."""
    every = not QUICK
    long = every or any(len(word) >= 20 for word in text.split())  # a run of 20 holds no white space
    spans: list[tuple[int, int]] = []
    if long or any(hint in text for hint in _SHORT_SHAPES):
        spans += [m.span() for m in _SHAPES.finditer(text)]
    if long:
        spans += [m.span() for m in _PEM_BODY.finditer(text)]
    if every or "sk-" in text:
        spans += [m.span() for m in _SK_TOKEN.finditer(text) if _sk_key(m.group())]
    if every or "-----BEGIN" in text:
        for match in _PEM_HEADER.finditer(text):
            end = _pem_end(text, match.end())
            if end is not None:
                spans.append((match.start(), end))
    if every or "://" in text:
        spans += [m.span(1) for m in _URL_CREDENTIAL.finditer(text) if _PLACEHOLDER.match(m.group(1)) is None]
    if every or _may_assign(text):
        spans += [m.span(5) for m in _ASSIGNMENT.finditer(text) if _assigned(text, m)]
    if long:
        spans += [m.span(1) for m in _KEY_VALUE.finditer(text) if random_token(m.group(1))]
    return spans


def _split_spans(text: str) -> list[tuple[int, int]]:
    """Spans of credentials split into chunks (each chunk key-like: a digit or a capital after its
    first character), joined and checked again."""
    spans: list[tuple[int, int]] = []
    if QUICK and (_KEYISH_AFTER_SPACE.search(text) is None or _KEYISH_PAIR.search(text) is None):
        return spans
    for run in _CHUNKS.finditer(text):
        chunks = _CHUNK_SPLIT.split(run.group())
        if not all(_KEYISH_CHUNK.match(chunk) for chunk in chunks[1:]):
            continue
        joined = "".join(chunks)
        if _direct_spans(joined) or random_token(joined.strip("-._")):
            spans.append(run.span())
    return spans


_NON_ASCII: Final = re.compile("[^\x00-\x7f]+")


def _nfkc_with_offsets(text: str) -> tuple[str, list[int]]:
    """NFKC of `text` character by character, without format characters (zero-width spaces and
    joiners, soft hyphens, bidirectional controls: general category Cf, which hide a token from a
    pattern but not from a reader), and for each position of the result the position in `text` it came
    from (so spans found on the folded form map back, the hidden characters inside them included)."""
    if text.isascii():
        return text, list(range(len(text) + 1))
    out: list[str] = []
    origin: list[int] = []
    done = 0
    for run in _NON_ASCII.finditer(text):  # ASCII between them is its own NFKC: copied whole
        start, end = run.span()
        out.append(text[done:start])
        origin += range(done, start)
        for position in range(start, end):
            char = text[position]
            if unicodedata.category(char) == "Cf":
                continue
            folded = unicodedata.normalize("NFKC", char)
            out.append(folded)
            origin += [position] * len(folded)
        done = end
    out.append(text[done:])
    origin += range(done, len(text) + 1)
    return "".join(out), origin


def secret_spans(text: str) -> list[tuple[int, int]]:
    """The (start, end) spans of credentials in `text` (found on its NFKC form), merged and sorted."""
    if text.isascii():
        if QUICK and _quiet(text):
            return []
        folded, origin = text, None
    else:
        folded, origin = _nfkc_with_offsets(text)
    found = sorted(_direct_spans(folded) + _split_spans(folded))
    if not found:
        return []
    merged: list[tuple[int, int]] = []
    for start, end in found:
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], end))
        else:
            merged.append((start, end))
    if origin is None:  # ASCII: NFKC changes nothing, positions are the text's
        return merged
    return [(origin[start], origin[end - 1] + 1 if end > start else origin[start]) for start, end in merged]


def has_secret(text: str) -> bool:
    """True when `text` (the caller passes the NFKC copy) holds a credential's shape."""
    return bool(_direct_spans(text) or _split_spans(text))


def redact(text: str) -> str:
    """`text` with every credential replaced by `REDACTED` (the rest unchanged); pure."""
    spans = secret_spans(text)
    if not spans:
        return text
    parts, last = [], 0
    for start, end in spans:
        parts += [text[last:start], REDACTED]
        last = end
    parts.append(text[last:])
    return "".join(parts)
