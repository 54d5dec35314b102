"""The summary that carries a session into its next epoch (M5d section 3.4; DESIGN 11).

`Summariser.summarise` asks the model on the **background** slot, with **no tools**: the epoch's replay,
then one user message with ``compact.md``. The reply's content is tag-neutralised and cut to
``summary_chars``. When that request does not fit the slot's context (on the context-full path it
usually will not), the epoch is summarised in pieces that fit, as a plain transcript, and the pieces'
summaries are summarised together. When the model fails (not reachable, an error, an empty reply), the
fallback is the epoch's owner messages, newest last, cut to ``summary_chars`` from the front.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal, Protocol

from boxmaker.loopd.flush import FLUSH_SPEAKER
from boxmaker.loopd.model import Completion, ContextFull, ModelError
from boxmaker.loopd.session import Session
from boxmaker.proto.inert import inert_tags
from boxmaker.proto.records import Assistant, Record, ToolResult, User

log = logging.getLogger("boxmaker.loopd")

How = Literal["model", "pieces", "fallback"]

#: The most model calls one summary may take when it is made in pieces.
MAX_CALLS = 64
#: A transcript line is never cut below this many characters; a line that still does not fit gives up.
MIN_LINE = 200
#: A summary shorter than this (``[Sentence]``, say) is no summary: the fallback is used instead.
MIN_SUMMARY = 40

_THINK = re.compile(r"<think(?:ing)?>.*?</think(?:ing)?>", re.S | re.I)


class Model(Protocol):
    """The part of the model client a summary needs."""

    def complete(
        self,
        messages: list[dict[str, Any]],
        tools: list[dict[str, Any]] | None,
        slot: int | None,
        max_tokens: int | None = None,
    ) -> Completion:
        """One chat completion; see `ModelClient.complete`."""
        ...


def neutralise(text: str) -> str:
    """`text` with inline thinking removed and chat-template tags made inert (`proto.inert`):
    ``<|im_start|>`` becomes ``[im_start]``, ``</think>`` ``[/think]``, ``[INST]`` ``(INST)``, and any
    ``<|`` or ``|>`` left is split by a space, so a carried summary cannot open or close a turn of the
    template."""
    return inert_tags(_THINK.sub("", text))


def cut(text: str, chars: int) -> str:
    """`text` cut to at most `chars` characters, at a word boundary when one is near, marked with …."""
    if len(text) <= chars:
        return text
    head = text[: chars - 1]
    space = head.rfind(" ")
    if space > chars * 0.8:
        head = head[:space]
    return head.rstrip() + "…"


def fallback_summary(session: Session, chars: int) -> str:
    """The epoch's owner messages, newest last, cut to `chars` from the front (the newest kept); the
    memory flush's prompt (loopd's words) is not one of them."""
    texts = [f"- {r.content}" for r in session.records if isinstance(r, User) and r.speaker != FLUSH_SPEAKER]
    body = "\n".join(texts) if texts else "(no messages from the owner in this part)"
    heading = "The model could not summarise this part; the owner's messages in it were:\n"
    room = max(chars - len(heading), 0)
    if len(body) > room:
        body = "…" + body[len(body) - room + 1 :]
    return (heading + body)[:chars]


def transcript(session: Session) -> list[str]:
    """The epoch as plain lines: the carried summary, then one line per message-bearing record."""
    lines = [f"[summary of the earlier part] {session.carry}"] if session.carry else []
    lines += [line for record in session.records if (line := _line(record))]
    return lines


def _line(record: Record) -> str | None:
    if isinstance(record, User):
        return f"[{FLUSH_SPEAKER if record.speaker == FLUSH_SPEAKER else 'owner'}] {record.content}"
    if isinstance(record, Assistant):
        parts = [record.content] if record.content else []
        parts += [f"(called {call.name} {call.arguments})" for call in record.tool_calls]
        return f"[assistant] {' '.join(parts)}" if parts else None
    if isinstance(record, ToolResult):
        trust = ", untrusted" if record.untrusted else ""
        return f"[result of {record.call}{trust}] {record.content}"
    return None


@dataclass(frozen=True, slots=True)
class Summary:
    """A summary and how it was made."""

    text: str
    how: How
    calls: int


class Summariser:
    """Makes the summary of a session's current epoch.

    Args:
        model: the model client.
        slot: the background slot (None without slots).
        prompt: returns ``compact.md``'s text.
        chars: ``[compact] summary_chars``.
    """

    def __init__(self, model: Model, slot: int | None, prompt: Callable[[], str], chars: int) -> None:
        self.model = model
        self.slot = slot
        self.prompt = prompt
        self.chars = chars
        self._calls = 0

    def summarise(self, session: Session) -> Summary:
        """The summary of `session`'s current epoch; never raises for a model failure (falls back).

        Raises:
            OSError, UnicodeDecodeError: ``compact.md`` cannot be read.
        """
        prompt = self.prompt().strip()
        self._calls = 0
        try:
            text = self._ask([*session.messages(), {"role": "user", "content": prompt}])
            return Summary(text, "model", self._calls)
        except ContextFull:
            log.info("the summary of %s does not fit the slot: summarising in pieces", session.id)
        except _Unusable as exc:
            log.warning("summary of %s failed (%s): using the fallback", session.id, exc)
            return Summary(fallback_summary(session, self.chars), "fallback", self._calls)
        try:
            text = self._pieces(transcript(session), prompt)
            return Summary(text, "pieces", self._calls)
        except (ContextFull, _Unusable) as exc:
            log.warning("summary of %s in pieces failed (%s): using the fallback", session.id, exc)
            return Summary(fallback_summary(session, self.chars), "fallback", self._calls)

    def _ask(self, messages: list[dict[str, Any]]) -> str:
        """One summary request; its neutralised, cut content.

        Raises:
            ContextFull: the request does not fit.
            _Unusable: the model failed, answered nothing, or the call budget is spent.
        """
        if self._calls >= MAX_CALLS:
            raise _Unusable(f"more than {MAX_CALLS} model calls")
        self._calls += 1
        try:
            completion = self.model.complete(messages, None, self.slot, max(self.chars // 3, 128))
        except ContextFull:
            raise
        except ModelError as exc:
            raise _Unusable(str(exc)) from None
        text = neutralise(completion.content or "").strip()
        if len(text) < MIN_SUMMARY:
            raise _Unusable(f"the model answered {len(text)} characters, too few to carry a session")
        return cut(text, self.chars)

    def _pieces(self, lines: list[str], prompt: str) -> str:
        """Summarise `lines` as a transcript; halve what does not fit, then summarise the halves'
        summaries together.

        Raises:
            ContextFull: a single line cut to `MIN_LINE` characters still does not fit.
            _Unusable: see `_ask`.
        """
        body = "\n".join(lines)
        try:
            return self._ask([{"role": "user", "content": f"{prompt}\n\nThe conversation:\n{body}"}])
        except ContextFull:
            if len(lines) == 1:
                line = lines[0]
                if len(line) <= MIN_LINE:
                    raise
                return self._pieces([line[: len(line) // 2] + " […]"], prompt)
        half = len(lines) // 2
        first = self._pieces(lines[:half], prompt)
        second = self._pieces(lines[half:], prompt)
        parts = [f"[summary of part 1] {first}", f"[summary of part 2] {second}"]
        return self._pieces(parts, prompt) if len(parts[0]) + len(parts[1]) > self.chars else _joined(parts)


def _joined(parts: list[str]) -> str:
    """Two part summaries that already fit together, as one text."""
    return "\n\n".join(part.split("] ", 1)[1] for part in parts)


class _Unusable(Exception):
    """The model gave no usable summary (failed, empty, or too many calls)."""


def describe(summary: Summary) -> str:
    """A log line's account of a summary: how it was made, in how many calls, how long it is."""
    return json.dumps({"how": summary.how, "calls": summary.calls, "chars": len(summary.text)})
