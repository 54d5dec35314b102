"""Session-log records (DESIGN 4 and 10.4; M5a sections 6 and 9; M5d 3.1 and 4.3).

A session log ``sessions/<id>/N.jsonl`` holds one JSON object per line with a snake_case ``type`` and a
``time`` (UTC RFC 3339 with ``Z``). Records are written with ``ensure_ascii``, one write per line on an
O_APPEND descriptor. A reader counts only complete lines: a torn last line of a log being written is
not yet a record, and not a reason to skip the log. The full schema is in ``docs/session-log.md``.
"""

from __future__ import annotations

import datetime as dt
import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Annotated, Any, Literal, TypeAlias

import msgspec

from boxmaker.proto.errors import BoxmakerError
from boxmaker.proto.fsio import complete_lines, open_nofollow
from boxmaker.proto.labels import DataClass, Label

TIME_PATTERN = r"^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}(\.[0-9]{1,9})?Z\Z"
Time: TypeAlias = Annotated[str, msgspec.Meta(pattern=TIME_PATTERN)]
Count: TypeAlias = Annotated[int, msgspec.Meta(ge=0)]


class _Record(msgspec.Struct, frozen=True, forbid_unknown_fields=True, tag_field="type"):
    """Common base: every record has `type` (the tag) and `time`."""

    time: Time


class SessionStart(_Record, frozen=True, tag="session_start"):
    """First record of every epoch: its number, the slot it runs on (null without slots), and
    ``sha256:<hex>`` of the epoch's baseline file."""

    epoch: Count
    slot: Count | None
    baseline: Annotated[str, msgspec.Meta(pattern=r"^sha256:[0-9a-f]{64}\Z")]


#: The `speaker` of a `user` record whose text is loopd's own fixed prompt (the memory flush before
#: compaction, issue 19): not the owner's words, and not indexed.
LOOPD_SPEAKER = "loopd"


class User(_Record, frozen=True, tag="user", omit_defaults=True):
    """What the owner (or a scheduler prompt) said; `speaker` names who, when known (left out of the
    line when not known): ``scheduler`` for a heartbeat turn and ``job:<name>`` for a cron job's run
    (issue 18), ``loopd`` (`LOOPD_SPEAKER`) for the memory flush's prompt (issue 19), a speaker's name
    in imported conversations; absent for the owner."""

    content: str
    speaker: str | None = None


class ToolCall(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """One tool call of an assistant record; `arguments` is the model's JSON string."""

    id: str
    name: str
    arguments: str


class Assistant(_Record, frozen=True, tag="assistant"):
    """A model reply: its content, its reasoning (kept, never replayed as content), its tool calls."""

    content: str | None = None
    reasoning_content: str | None = None
    tool_calls: list[ToolCall] = msgspec.field(default_factory=list)


class _Labelled(_Record, frozen=True):
    """A tool's output (or a summary of it) with its label; `call` is the tool's name."""

    call: str
    tool_call_id: str
    content: str
    data_class: DataClass = msgspec.field(name="class")
    untrusted: bool

    @property
    def label(self) -> Label:
        """The output's label."""
        return Label(self.data_class, self.untrusted)


class ToolResult(_Labelled, frozen=True, tag="tool_result"):
    """A tool's result with its label."""


class Usage(_Record, frozen=True, tag="usage"):
    """Token counts of one model request (llama-server `timings`, or `usage` elsewhere)."""

    prompt_n: Count
    cache_n: Count
    predicted_n: Count = 0


class EpochEnd(_Record, frozen=True, tag="epoch_end"):
    """Last record of a compacted epoch: the next epoch's number and the carried summary (M5d 3.5)."""

    next: Count
    summary: str


class ToolSummary(_Labelled, frozen=True, tag="tool_summary"):
    """A model-written summary of a tool's output, labelled like the output (M5d 4.3)."""


class TurnEnd(_Record, frozen=True, tag="turn_end"):
    """Last record of a turn that did not finish (added by issue 18): `reason` is ``cancelled`` (the
    owner stopped it) or ``failed``, `code` the failure's code (``model-unreachable``, ``cancelled``, ...).
    It follows the records that close the turn: a `tool_result` for each call left unanswered and an
    `assistant` record with loopd's fixed closing sentence, so the next turn's request is valid and
    still strictly extends what was sent before."""

    reason: Literal["cancelled", "failed"]
    code: Annotated[str, msgspec.Meta(min_length=1, max_length=64)]


class Flush(_Record, frozen=True, tag="flush", omit_defaults=True):
    """loopd's memory flush before compaction (added by issue 19), written once it is over, at most one
    per epoch: `outcome` ``done`` when the flush turn (a `user` record with speaker ``loopd``, the
    model's replies and its tool calls, just before this record) ended with a reply, ``failed`` when it
    did not or could not run, `why` saying why (a timeout, the model failing, no room left); the session
    is then compacted without it. Not a message: the replay skips it."""

    outcome: Literal["done", "failed"]
    why: Annotated[str, msgspec.Meta(max_length=2000)] = ""


Record: TypeAlias = (
    SessionStart | User | Assistant | ToolResult | Usage | EpochEnd | ToolSummary | TurnEnd | Flush
)

_DECODER = msgspec.json.Decoder(Record)
_MANY = msgspec.json.Decoder(list[Record])


class RecordError(BoxmakerError):
    """Raised when a log line is not a valid record; names the file and the line."""

    def __init__(self, path: str, line: int, why: str) -> None:
        super().__init__(f"{path}: line {line}: {why}")
        self.path = path
        self.line = line
        self.why = why


def format_time(moment: dt.datetime) -> str:
    """UTC RFC 3339 with ``Z`` and whole seconds, e.g. ``2026-09-24T21:02:07Z``.

    Raises:
        ValueError: when `moment` is naive.
    """
    if moment.tzinfo is None:
        raise ValueError("a naive datetime has no time zone")
    return moment.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_time(text: str) -> dt.datetime:
    """Parse a record time (UTC RFC 3339 with ``Z``) into an aware datetime.

    Raises:
        ValueError: when `text` is not of that form.
    """
    return dt.datetime.fromisoformat(text.replace("Z", "+00:00")).astimezone(dt.UTC)


def decode_record(line: bytes) -> Record:
    """Decode one log line.

    Raises:
        ValueError: when the line is not JSON or not a valid record (the message says why), its
            time included (``2026-13-45T99:99:99Z`` has the form of a time but is none).
    """
    try:
        record: Record = _DECODER.decode(line)
        return _real_time(record)
    except msgspec.ValidationError as exc:
        raise ValueError(str(exc)) from None
    except msgspec.DecodeError:
        return _decode_slowly(line)  # maybe a lone surrogate escape msgspec refuses


def decode_records(lines: Sequence[bytes]) -> list[Record] | None:
    """`decode_record` of every line at once (one call into msgspec: faster for many lines); None
    when any line is not a valid record by itself, or not exactly one (decode them one by one then,
    to learn which and why)."""
    try:
        records: list[Record] = _MANY.decode(b"[" + b",".join(lines) + b"]")
        for record in records:
            _real_time(record)
    except (msgspec.ValidationError, msgspec.DecodeError, ValueError):
        return None
    return records if len(records) == len(lines) else None


def _decode_slowly(line: bytes) -> Record:
    """Decode with the standard library, which keeps a lone surrogate escape as it is."""
    try:
        value: Any = json.loads(line.decode("utf-8"))
        converted: Record = msgspec.convert(value, Record, strict=True)
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise ValueError(f"not a JSON record ({exc})") from None
    except msgspec.ValidationError as exc:
        raise ValueError(str(exc)) from None
    return _real_time(converted)


def _real_time(record: Record) -> Record:
    try:
        dt.datetime.fromisoformat(record.time[:19])
    except ValueError:
        raise ValueError(f"time {record.time!r} is not a real date and time - at `$.time`") from None
    return record


def encode_record(record: Record) -> bytes:
    """One log line for `record`, ASCII-only JSON without the newline."""
    return json.dumps(msgspec.to_builtins(record), ensure_ascii=True, separators=(",", ":")).encode("ascii")


def read_log(path: Path, offset: int = 0, first_line: int = 1) -> tuple[list[Record], int]:
    """Read the complete records of a log from byte `offset` (line `first_line` of the file).

    Returns:
        The records and the byte offset just past the last complete line (a torn tail is left for
        the next read).

    Raises:
        OSError: when the file cannot be read.
        RecordError: when a complete line is not a valid record.
    """
    fd = open_nofollow(path, os.O_RDONLY)
    with os.fdopen(fd, "rb") as handle:
        handle.seek(offset)
        data = handle.read()
    lines, tail = complete_lines(data)
    records: list[Record] = []
    for number, line in enumerate(lines, start=first_line):
        try:
            records.append(decode_record(line))
        except ValueError as exc:
            raise RecordError(str(path), number, str(exc)) from None
    return records, offset + len(data) - len(tail)
