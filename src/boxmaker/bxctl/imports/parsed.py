"""What every import source parses into (issue 17): conversations as session-log records, memory-like
entries, and instruction files shown to the owner as suggestions; `Malformed` for an export that cannot
be read, in one sentence naming the file and the place.

Records follow docs/session-log.md: ``user`` (the owner's words: no speaker), ``assistant`` (content and
tool calls), ``tool_result`` (every tool or browsing output, class ``private``, untrusted). Times are the
source's own, in UTC (RFC 3339 with ``Z``).
"""

from __future__ import annotations

import datetime as dt
import json
import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from boxmaker.proto.escape import escape_line

#: The most characters of one record's text an archive keeps (what the index reads of a record is
#: 100,000); a longer text is cut there with a marker saying how long it was.
TEXT_LIMIT = 200_000

#: Why a JSON value nested deeper than Python's parser goes is refused.
NESTED = "holds JSON nested too deeply to read"


class Malformed(Exception):
    """An export bxctl cannot read: the sentence names the file and the place (escaped: `escape_line`);
    nothing is imported."""

    def __init__(self, path: Path | str | None, place: str, why: str) -> None:
        where = f"{path}, {place}" if place else str(path)
        # the place quotes the export (a conversation id, a node id): escaped, so it cannot act on a terminal
        super().__init__(f"{escape_line(f'{where}: {why}')}; nothing was imported")


@dataclass(slots=True)
class Conversation:
    """One conversation: the source's id for it, its title, its records (session-log dicts)."""

    conversation: str
    title: str
    records: list[dict[str, Any]] = field(default_factory=list)
    #: The id of the last tool call not answered yet (a result without its own id answers it).
    open_call: str = ""
    #: The file it was read from (for sentences naming it).
    file: Path | None = None

    def user(self, time: str, content: str, speaker: str | None = None) -> None:
        """Append a ``user`` record (the owner's words when `speaker` is None)."""
        record: dict[str, Any] = {"type": "user", "time": time, "content": cut(content)}
        if speaker:
            record["speaker"] = speaker
        self.records.append(record)

    def assistant(
        self,
        time: str,
        content: str | None,
        calls: list[tuple[str, str, str]] | None = None,
        reasoning: str | None = None,
    ) -> None:
        """Append an ``assistant`` record; `calls` are (id, name, arguments JSON string)."""
        record: dict[str, Any] = {
            "type": "assistant",
            "time": time,
            "content": cut(content) if content is not None else None,
            "tool_calls": [{"id": i, "name": n, "arguments": cut(a)} for i, n, a in calls or []],
        }
        if reasoning:
            record["reasoning_content"] = cut(reasoning)
        self.records.append(record)

    def tool_result(self, time: str, call: str, call_id: str, content: str) -> None:
        """Append a ``tool_result``: private and untrusted (what a tool or a web page returned)."""
        self.records.append(
            {
                "type": "tool_result",
                "time": time,
                "call": call or "tool",
                "tool_call_id": call_id or "imported",
                "content": cut(content),
                "class": "private",
                "untrusted": True,
            }
        )


@dataclass(frozen=True, slots=True)
class Entry:
    """A memory-like entry: the identity file it was meant for (``memory``/``user``), its text, and
    where it was found."""

    file: str
    text: str
    place: str


@dataclass(frozen=True, slots=True)
class Suggestion:
    """An instruction file (CLAUDE.md, AGENTS.md, a GEMINI.md body, custom instructions): only shown to
    the owner, for soul.md or conventions.md, which the owner writes."""

    place: str
    text: str
    target: str


@dataclass(slots=True)
class Parsed:
    """Everything one source gave: conversations, entries and suggestions."""

    conversations: list[Conversation] = field(default_factory=list)
    entries: list[Entry] = field(default_factory=list)
    suggestions: list[Suggestion] = field(default_factory=list)
    #: The file being read (for sentences naming it).
    file: Path | None = None


def cut(text: str) -> str:
    """`text`, cut at `TEXT_LIMIT` characters with a marker saying how long it was."""
    if len(text) <= TEXT_LIMIT:
        return text
    return text[:TEXT_LIMIT] + f"\n[cut at import: {len(text):,} characters]"


def from_epoch(value: object) -> str | None:
    """An epoch time (seconds, int or float) as UTC RFC 3339 with ``Z``; None when it is not one."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    try:
        moment = dt.datetime.fromtimestamp(float(value), dt.UTC)
    except (OverflowError, OSError, ValueError):
        return None
    return _stamp(moment)


def from_iso(value: object) -> str | None:
    """An ISO 8601 time with an offset (``2026-01-02T03:04:05.678Z``, ``+02:00``) as UTC RFC 3339 with
    ``Z``; None when it is not one (a time without an offset is not taken as UTC: it is None), or when
    it falls outside the years 1 to 9999 in UTC."""
    if not isinstance(value, str) or not value:
        return None
    try:
        moment = dt.datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    if moment.tzinfo is None:
        return None
    try:
        return _stamp(moment)
    except OverflowError:  # 9999-12-31T23:59:59-05:00 is past the last UTC time Python holds
        return None


def _stamp(moment: dt.datetime) -> str:
    moment = moment.astimezone(dt.UTC)
    if moment.microsecond:
        return moment.strftime("%Y-%m-%dT%H:%M:%S.%f").rstrip("0") + "Z"
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def load_json(path: Path) -> Any:
    """A JSON file's value.

    Raises:
        Malformed: it cannot be read, is not a regular file, or is not JSON (naming the line and
            column).
    """
    data = _read(path)
    try:
        return json.loads(data)
    except UnicodeDecodeError as exc:
        raise Malformed(path, f"byte {exc.start}", "not UTF-8") from None
    except json.JSONDecodeError as exc:
        raise Malformed(path, f"line {exc.lineno} column {exc.colno}", f"not JSON ({exc.msg})") from None
    except RecursionError:
        raise Malformed(path, "", NESTED) from None


def loads(text: str | bytes, path: Path, place: str, what: str = "is") -> Any:
    """One JSON value found inside an export (a line of a ``.jsonl``, a database column).

    Raises:
        Malformed: naming `path` and `place`: ``{what} not JSON (...)``, or nested too deeply.
    """
    try:
        return json.loads(text)
    except UnicodeDecodeError as exc:
        raise Malformed(path, place, f"{what} not UTF-8 (byte {exc.start})") from None
    except json.JSONDecodeError as exc:
        raise Malformed(path, place, f"{what} not JSON ({exc.msg})") from None
    except RecursionError:
        raise Malformed(path, place, NESTED) from None


def read_text(path: Path) -> str:
    """A text file as UTF-8.

    Raises:
        Malformed: it cannot be read, is not a regular file, or is not UTF-8.
    """
    data = _read(path)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise Malformed(path, f"byte {exc.start}", "not UTF-8") from None


def _read(path: Path) -> bytes:
    """A regular file's bytes (a device such as /dev/zero or a pipe, named or reached by a symlink, is
    refused before it is opened: it could be endless or never answer).

    Raises:
        Malformed: it cannot be read or is not a regular file.
    """
    try:
        if not stat.S_ISREG(path.stat().st_mode):
            raise Malformed(path, "", "is not a regular file")
        return path.read_bytes()
    except OSError as exc:
        raise Malformed(path, "", f"cannot be read ({exc.strerror or exc})") from None


def text_of(value: object) -> str:
    """A message part as text: a string as it is, anything else as compact JSON."""
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))
