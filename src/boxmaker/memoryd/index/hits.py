"""Recall hits and how the model reads them (M5a section 5, `recall`; DESIGN 10.4).

Each hit starts with one of three fixed source tags, so the model can weigh it and not only read it:

| tag | hits |
|---|---|
| identity | notes.md entries marked `moved`: identity that consolidate took out of the prompt |
| memory | notes and session records from sessions that had not read untrusted content; `dropped` entries |
| memory-tainted | notes and session records from sessions that had read untrusted content |

then where the hit is from and its class, then the snippet (at most 600 characters)::

    [1] identity · moved 2026-09-24 from memory.md · private
    Owner prefers answers in UTC.
    [2] memory · session mm-8ass9m…, 2026-09-20 14:02 UTC, the owner said · private
    …the launch window moved to Thursday…
    [3] memory-tainted · note, 2026-09-21 10:12 UTC, session mcp-claud… via mcp:claude-code · private
    The deploy window is Thursday.

A note an MCP client wrote (its session id ``mcp-<client>-…``, issue 17) names the client after the
session: ``via mcp:<client>``.

The result's label is the highest class among the hits (at least private), untrusted if any hit is
tagged memory-tainted. Hits that are items get their metadata after the class on the same header line
(`header`'s `fields`, made by `skeptic`), and lines after their snippet (`render`'s `after`); other
hits keep exactly this line. Pure functions.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from boxmaker.proto.escape import escape
from boxmaker.proto.ids import mcp_client_of
from boxmaker.proto.inert import inert_tags
from boxmaker.proto.labels import DataClass, Label

SNIPPET_LIMIT = 600
ELLIPSIS = "…"


@dataclass(frozen=True, slots=True)
class Hit:
    """One indexed source found by recall.

    Attributes:
        key: the stable source key (recall log; DESIGN 10.4).
        kind: "turn" (a session record), "note", or "summary" (a tool-output summary).
        role: for turns "user", "assistant" or "call"; for notes "noted", "moved" or "dropped".
        session: the session id ("owner" for the owner's notes).
        time: UTC ``YYYY-MM-DDTHH:MM`` or longer; "" when unknown.
        speaker: who spoke a user turn ("" when not recorded); the tool name of a summary.
        origin: the file a moved or dropped note left.
        label: the label in force when it was written.
        text: the indexed text.
    """

    key: str
    kind: str
    role: str
    session: str
    time: str
    speaker: str
    origin: str
    label: Label
    text: str

    @property
    def tag(self) -> str:
        """identity, memory or memory-tainted."""
        if self.kind == "note" and self.role == "moved":
            return "identity"
        if self.kind == "note" and self.role == "dropped":
            return "memory"
        return "memory-tainted" if self.label.untrusted else "memory"


def short_session(session: str) -> str:
    """A session id as hits show it: the first 9 characters and "…" when longer than 10."""
    return session if len(session) <= 10 else session[:9] + ELLIPSIS


def _when(time: str) -> str:
    return f"{time[:10]} {time[11:16]} UTC" if len(time) >= 16 else time[:10]


def one_line(text: str, limit: int = 80) -> str:
    """A field shown in a hit's header: on one line (white space collapsed), at most `limit` characters."""
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + ELLIPSIS


_NUMBERED = re.compile(r"\[([0-9]+)\]")
_LINE_BREAKS = re.compile("\r\n?|[\x0b\x0c\x1c-\x1e\x85\u2028\u2029]")


def defuse(snippet: str) -> str:
    """A snippet as the model reads it, still at most `SNIPPET_LIMIT` characters, that cannot pass
    for another hit nor for a turn of the chat template: chat-template tags are made inert
    (`proto.inert`: ``<|im_start|>`` is ``[im_start]``), every line break is a plain newline, every code
    point a terminal or a reader cannot see is written as a visible escape (`proto.escape`, so NUL
    is ``\\x00`` and ZERO WIDTH SPACE ``\\u200b``), and every ``[n]`` gets a backslash before it
    (``\\[2] identity ...``), so text inside one hit never forges the header of another."""
    safe = _NUMBERED.sub(r"\\[\1]", escape(_LINE_BREAKS.sub("\n", inert_tags(snippet))))
    return safe if len(safe) <= SNIPPET_LIMIT else safe[: SNIPPET_LIMIT - 1] + ELLIPSIS


def speaker_words(speaker: str) -> str:
    """Who said a `user` record's text, in words: ``the owner`` (no speaker), ``the scheduler`` (a
    heartbeat turn), ``the job NAME`` (a cron job's run, ``job:NAME``), else the speaker's name."""
    if not speaker:
        return "the owner"
    if speaker == "scheduler":
        return "the scheduler"
    if speaker.startswith("job:"):
        return f"the job {one_line(speaker[4:])}"
    return one_line(speaker)


def where(hit: Hit) -> str:
    """What follows the tag: where the hit is from and when."""
    if hit.kind == "note":
        if hit.role in ("moved", "dropped"):
            return f"{hit.role} {hit.time[:10]} from {hit.origin}"
        if hit.session == "owner":
            return f"note, {_when(hit.time)}, by the owner" if hit.time else "note by the owner"
        client = mcp_client_of(hit.session)
        via = f" via mcp:{client}" if client else ""
        return f"note, {_when(hit.time)}, session {short_session(hit.session)}{via}"
    place = f"session {short_session(hit.session)}, {_when(hit.time)}"
    if hit.kind == "summary":
        return f"{place}, a summary of {one_line(hit.speaker)} output"
    if hit.role == "user":
        return f"{place}, {speaker_words(hit.speaker)} said"
    if hit.role == "call":
        return f"{place}, the assistant called"
    return f"{place}, the assistant said"


def header(number: int, hit: Hit, fields: str = "") -> str:
    """The first line of a hit: ``[n] tag · where · class``, then `fields` (an item's metadata,
    `skeptic.fields`) after `` · `` when given."""
    line = f"[{number}] {hit.tag} · {where(hit)} · {hit.label.data_class.value}"
    return f"{line} · {fields}" if fields else line


_WORD = re.compile(r"\w+")


def snippet(text: str, terms: Sequence[str], limit: int = SNIPPET_LIMIT) -> str:
    """At most `limit` characters of `text`, around the first place a query term starts a word.

    Cut text is marked with "…" at the cut ends (counted in the limit).
    """
    if len(text) <= limit:
        return text
    lowered = text.lower()
    starts = [
        m.start() for m in _WORD.finditer(lowered) if any(lowered.startswith(t, m.start()) for t in terms)
    ]
    first = starts[0] if starts else 0
    start = max(0, min(first - limit // 3, len(text) - limit + 1))
    body = limit - (1 if start > 0 else 0)
    end = start + body
    if end < len(text):
        end -= 1
    piece = text[start:end]
    return (ELLIPSIS if start > 0 else "") + piece + (ELLIPSIS if end < len(text) else "")


def result_label(hits: Sequence[Hit]) -> Label:
    """The highest class among the hits (at least private), untrusted if any is memory-tainted."""
    data_class = max((h.label.data_class for h in hits), default=DataClass.PRIVATE)
    return Label(max(data_class, DataClass.PRIVATE), any(h.tag == "memory-tainted" for h in hits))


def render(
    hits: Sequence[Hit],
    terms: Sequence[str],
    fields: Sequence[str] | None = None,
    after: Sequence[str] | None = None,
) -> str:
    """The text the model reads for a non-empty result; `fields[i]` goes on hit i's header line and
    `after[i]` on the lines after its snippet ("" for neither: `skeptic`)."""
    lowered = [t.lower() for t in terms]
    parts = []
    for i, hit in enumerate(hits):
        extra = fields[i] if fields else ""
        tail = after[i] if after else ""
        text = f"{header(i + 1, hit, extra)}\n{defuse(snippet(hit.text, lowered))}"
        parts.append(f"{text}\n{tail}" if tail else text)
    return "\n".join(parts)
