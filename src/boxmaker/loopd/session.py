"""A session on disk: its baseline, its log, and the chat messages replayed from them (M5a section 9;
M5d section 3.1; DESIGN 4 and 10.4).

Layout, ready for M5d's epochs::

    sessions/<session-id>/0.baseline.json   {"system": string, "tools": [...]}, written once, UTF-8
    sessions/<session-id>/0.jsonl           session_start {epoch, slot, baseline: "sha256:<hex>"}, then
                                            user, assistant, tool_result, usage records

After a compaction (M5d section 3.5) the old log ends with ``epoch_end {next, summary}`` and the session
goes on in ``N.baseline.json`` and ``N.jsonl``; the old files are kept. The replay of epoch N > 0 is
the new system message, one user-role message holding a fixed heading and the carried summary (not a
`user` record, not a turn), then the epoch's records.

The baseline is saved once and replayed byte for byte: `open` reads the file and checks its hash
against the epoch's `session_start`, so whatever the memory files say later, a session keeps the bytes
it started with (inference contract 2, "strict extension"). `open` loads the highest epoch that has
both files, with the carry from the previous epoch's `epoch_end`. Records are appended one write each,
on an O_APPEND descriptor, and fsynced; a torn last line (a crash in the middle of a write) is set
aside into ``N.jsonl.torn`` when the session opens.

A crash between the steps of a compaction leaves one of: the old log without `epoch_end` (the old
epoch, as if nothing happened); the old log ending in `epoch_end` with the new files missing, partly
written or holding no complete record (`open` returns the old epoch with `pending` set to the summary,
and the caller finishes the compaction before the next turn); or both new files whole (the new epoch).
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import os
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from boxmaker.proto import fsio
from boxmaker.proto.errors import BoxmakerError
from boxmaker.proto.ids import OWNER_SESSION, is_session_id
from boxmaker.proto.inert import inert_tags
from boxmaker.proto.labels import DataClass, Label
from boxmaker.proto.records import (
    Assistant,
    EpochEnd,
    Record,
    RecordError,
    SessionStart,
    ToolResult,
    Usage,
    User,
    encode_record,
    format_time,
    read_log,
)

Now = Callable[[], dt.datetime]


class SessionError(BoxmakerError):
    """Raised when a session's files are missing, damaged, or disagree with each other."""

    code = "session-damaged"
    runbook = "session-damaged"

    def __init__(self, session: str, why: str) -> None:
        super().__init__(f"session {session}: {why}")
        self.session = session
        self.why = why


@dataclass(frozen=True, slots=True)
class Baseline:
    """What every request of an epoch starts with: the system text and the tool schemas."""

    system: str
    tools: list[dict[str, Any]]

    def to_bytes(self) -> bytes:
        """The baseline file's bytes: UTF-8 JSON, keys in a fixed order, one final newline."""
        text = json.dumps({"system": self.system, "tools": self.tools}, ensure_ascii=False, indent=1)
        return (text + "\n").encode("utf-8")

    @staticmethod
    def from_bytes(session: str, data: bytes) -> Baseline:
        """Parse a baseline file.

        Raises:
            SessionError: when it is not UTF-8 JSON of the form {"system": string, "tools": [...]}.
        """
        try:
            value = json.loads(data.decode("utf-8"))
        except (UnicodeDecodeError, ValueError) as exc:
            raise SessionError(session, f"the baseline is not UTF-8 JSON ({exc})") from None
        if (
            not isinstance(value, dict)
            or not isinstance(value.get("system"), str)
            or not isinstance(value.get("tools"), list)
        ):
            raise SessionError(session, 'the baseline is not {"system": string, "tools": [...]}')
        return Baseline(value["system"], value["tools"])


def digest(data: bytes) -> str:
    """``sha256:<hex>`` of a baseline file's bytes."""
    return "sha256:" + hashlib.sha256(data).hexdigest()


def check_session_id(value: str) -> str:
    """A session id loopd accepts: DESIGN 10.2's form, and not the owner's reserved name.

    Raises:
        SessionError: naming the id and the form.
    """
    if not is_session_id(value) or value == OWNER_SESSION:
        raise SessionError(
            value[:80], "not a session id: 1 to 64 characters of a-z, 0-9 and '-', not 'owner'"
        )
    return value


def tool_call_message(record: Assistant) -> dict[str, Any]:
    """The chat message replaying an assistant record: its content and tool calls, never its
    reasoning (DESIGN 4: `reasoning_content` is kept in the log, not replayed as content).

    A record without content (a reply that only called tools) replays with ``"content": ""``, never
    null: llama-cpp-python's server refuses a null content with HTTP 500, and llama.cpp works around
    templates that need a string; every OpenAI-compatible server takes ``""``."""
    message: dict[str, Any] = {"role": "assistant", "content": record.content or ""}
    if record.tool_calls:
        message["tool_calls"] = [
            {"id": call.id, "type": "function", "function": {"name": call.name, "arguments": call.arguments}}
            for call in record.tool_calls
        ]
    return message


#: The heading of the carried summary, in words: it says what the message is and who did not write it.
CARRY_HEADING = " ".join(
    (
        "[Summary of this session so far.",
        "The earlier part of this conversation was compacted to save room;",
        "this summary was written from it and is not a new message from the owner.]",
    )
)


def carry_message(summary: str) -> dict[str, Any]:
    """The user-role message that opens an epoch after the first: the heading, then the summary."""
    return {"role": "user", "content": f"{CARRY_HEADING}\n\n{summary}"}


def message_of(record: Record) -> dict[str, Any] | None:
    """The chat message a record replays as, or None for records that are not messages."""
    if isinstance(record, User):
        return {"role": "user", "content": record.content}
    if isinstance(record, Assistant):
        return tool_call_message(record)
    if isinstance(record, ToolResult):
        # A tool's text (a fetched page, a file, a recall hit) never opens or closes a turn of the chat
        # template (proto.inert); the same at every replay, so each request still extends the last.
        return {"role": "tool", "tool_call_id": record.tool_call_id, "content": inert_tags(record.content)}
    return None


class Session:
    """One session's current epoch, open for appending.

    Attributes:
        id: the session id.
        epoch: the current epoch's number.
        baseline: the epoch's baseline, exactly as saved.
        slot: the model slot the epoch runs on (None without slots).
        records: every record of the current epoch, in order.
        carry: the summary carried from the previous epoch (None in epoch 0).
        pending: the summary of a compaction that a crash interrupted after `epoch_end` was written
            (the caller finishes it with `start_epoch` before the next turn); else None.
        turns: `User` records across every epoch: the first is turn 1 for the session's life.
        label: the stricter of every tool result's label in every epoch (starting public, trusted).
    """

    def __init__(
        self,
        folder: Path,
        epoch: int,
        baseline: Baseline,
        slot: int | None,
        records: list[Record],
        *,
        earlier: Iterable[Record] = (),
        carry: str | None = None,
    ) -> None:
        self.folder = folder
        self.id = folder.name
        self.epoch = epoch
        self.baseline = baseline
        self.slot = slot
        self.records = records
        self.carry = carry
        last = records[-1] if records else None
        self.pending = last.summary if isinstance(last, EpochEnd) and last.next == epoch + 1 else None
        self.turns = 0
        self.compacted = False  # a new epoch began since the last reply (the owner is told once)
        self.warning = ""  # what the owner should hear with the next reply (a compaction that failed)
        self.compact_failed_at = float("-inf")  # time.monotonic() of the last failed compaction
        self.flushed_in: int | None = None  # the epoch whose memory flush was tried (issue 19; `flush`)
        self.label = Label(DataClass.PUBLIC, False)
        for record in (*earlier, *records):
            self._count(record)
        self._messages: list[dict[str, Any]] = []
        self._append_lock = threading.Lock()  # a turn and a tool summary may append at once
        self.reread = False  # set by an erasure that rewrote the files: read them again before reuse
        self._replay()
        self._seen = self._stat()

    def _replay(self) -> None:
        self._messages = [{"role": "system", "content": self.baseline.system}]
        if self.carry is not None:
            self._messages.append(carry_message(self.carry))
        self._messages.extend(m for r in self.records if (m := message_of(r)) is not None)

    # Creating and opening ------------------------------------------------------------------------

    @classmethod
    def create(
        cls, sessions: Path, session_id: str, baseline: Baseline, slot: int | None, now: Now
    ) -> Session:
        """Start a session: write ``0.baseline.json`` once, then ``0.jsonl`` with `session_start`.

        A folder without ``0.jsonl`` (a crash between the two writes) is started again; the baseline
        it may hold was never used by a request.

        Raises:
            SessionError: the id is not a session id, or the session already exists.
            OSError: the files cannot be written.
        """
        check_session_id(session_id)
        fsio.ensure_dir(sessions)
        folder = sessions / session_id
        try:
            folder.mkdir(mode=0o700)
        except FileExistsError:
            # a folder left by a crash before the first record is not a session yet: start it again
            if (folder / "0.jsonl").exists() or not folder.is_dir():
                raise SessionError(session_id, "already exists") from None
        data = baseline.to_bytes()
        fsio.atomic_write(folder / "0.baseline.json", data)
        start = SessionStart(time=format_time(now()), epoch=0, slot=slot, baseline=digest(data))
        fsio.append_line(folder / "0.jsonl", encode_record(start))
        return cls(folder, 0, Baseline.from_bytes(session_id, data), slot, [start])

    @staticmethod
    def started(sessions: Path, session_id: str) -> bool:
        """True when the session has a first log (``0.jsonl``): it exists and is opened, not created."""
        return (sessions / session_id / "0.jsonl").exists()

    @classmethod
    def open(cls, sessions: Path, session_id: str) -> Session:
        """Open a session at its highest whole epoch, with the carry from the epoch before.

        A torn last line is set aside first (``N.jsonl.torn``). See the module docstring for what a
        crash in the middle of a compaction leaves and how it opens.

        Raises:
            SessionError: no such session, or its files are damaged: a log whose first record is
                not `session_start` of that epoch, a baseline whose hash differs from the one
                `session_start` recorded, a missing baseline, an epoch after the first whose previous
                log does not end with its `epoch_end` (no carry), an unreadable record (naming the
                file and line).
        """
        check_session_id(session_id)
        folder = sessions / session_id
        logs = _log_epochs(folder)
        if not logs:
            raise SessionError(session_id, "no such session")
        epoch = logs[-1]
        try:
            fsio.set_aside_torn_tail(folder / f"{epoch}.jsonl")
        except OSError as exc:
            raise SessionError(session_id, f"cannot read {epoch}.jsonl ({exc.strerror or exc})") from None
        records = _read(session_id, folder / f"{epoch}.jsonl")
        if epoch > 0 and not records:
            # only a crash during step 3 leaves a log without a complete record (the baseline is
            # written before it); a log with records but no baseline is damage, refused below
            half_made = _read(session_id, folder / f"{epoch - 1}.jsonl")
            last = half_made[-1] if half_made else None
            if isinstance(last, EpochEnd) and last.next == epoch:
                epoch, records = epoch - 1, half_made  # a compaction a crash cut short: finish it
        earlier: list[Record] = []
        for number in logs:
            if number < epoch:
                earlier.extend(_read(session_id, folder / f"{number}.jsonl"))
        try:
            data = (folder / f"{epoch}.baseline.json").read_bytes()
        except FileNotFoundError:
            raise SessionError(
                session_id, f"{epoch}.baseline.json is missing (a session keeps its baseline)"
            ) from None
        except OSError as exc:
            raise SessionError(
                session_id, f"cannot read {epoch}.baseline.json ({exc.strerror or exc})"
            ) from None
        first = records[0] if records else None
        if not isinstance(first, SessionStart) or first.epoch != epoch:
            raise SessionError(
                session_id, f"{epoch}.jsonl does not start with session_start of epoch {epoch}"
            )
        if first.baseline != digest(data):
            raise SessionError(
                session_id,
                f"{epoch}.baseline.json changed since the session started (its hash is not the one "
                "session_start recorded); a baseline is replayed byte for byte and never edited",
            )
        carry = None
        if epoch > 0:
            previous = earlier[-1] if earlier else None
            if not isinstance(previous, EpochEnd) or previous.next != epoch:
                raise SessionError(
                    session_id,
                    f"epoch {epoch} has no carry: {epoch - 1}.jsonl does not end with epoch_end "
                    f"(next {epoch})",
                )
            carry = previous.summary
        baseline = Baseline.from_bytes(session_id, data)
        return cls(folder, epoch, baseline, first.slot, records, earlier=earlier, carry=carry)

    def start_epoch(self, summary: str, baseline: Baseline, now: Now) -> None:
        """Compact: end this epoch and go on in the next one (M5d section 3.5), each step durable.

        1. append ``epoch_end {next, summary}`` to this log (unless a crash already did);
        2. write ``N+1.baseline.json`` (temp file, fsync, rename);
        3. create ``N+1.jsonl`` with ``session_start {epoch: N+1, slot, baseline: its hash}``;
        4. switch to the new epoch in memory: its baseline, its one record, `carry` = the summary.

        Raises:
            OSError: a write failed; the files are then in one of the states `open` handles.
            SessionError: the next epoch's log already holds records (never overwritten).
        """
        following = self.epoch + 1
        if self.pending is None:
            self.append(EpochEnd(time=format_time(now()), next=following, summary=summary))
            self.pending = summary  # from here on the epoch has ended, whatever fails next
        else:
            summary = self.pending
        data = baseline.to_bytes()
        fsio.atomic_write(self.folder / f"{following}.baseline.json", data)
        log_path = self.folder / f"{following}.jsonl"
        if log_path.exists():  # a crash may have left it without a complete record: only then remove it
            if _read(self.id, log_path):
                raise SessionError(self.id, f"{following}.jsonl already holds records; it is not replaced")
            log_path.unlink()
        start = SessionStart(time=format_time(now()), epoch=following, slot=self.slot, baseline=digest(data))
        fsio.append_line(log_path, encode_record(start))
        self.epoch = following
        self.baseline = Baseline.from_bytes(self.id, data)
        self.records = [start]
        self.carry = summary
        self.pending = None
        self._replay()
        self._seen = self._stat()

    # Appending -------------------------------------------------------------------------------------

    @property
    def log_path(self) -> Path:
        """The current epoch's log."""
        return self.folder / f"{self.epoch}.jsonl"

    def append(self, record: Record) -> None:
        """Append one record (one write, fsynced) and keep it in memory.

        Raises:
            OSError: the write failed; the record is then not kept.
            SessionError: the epoch has ended (`pending`): finish the compaction first.
        """
        with self._append_lock:
            if self.pending is not None:
                raise SessionError(self.id, f"epoch {self.epoch} has ended; finish its compaction first")
            fsio.append_line(self.log_path, encode_record(record))
            self._seen = self._stat()
            self.records.append(record)
            self._count(record)
            message = message_of(record)
            if message is not None:
                self._messages.append(message)

    def _stat(self) -> tuple[int, int, int, int] | None:
        """(log size, log mtime, baseline size, baseline mtime) in bytes and ns; None when missing."""
        try:
            log = os.stat(self.log_path)
            base = os.stat(self.folder / f"{self.epoch}.baseline.json")
        except OSError:
            return None
        return log.st_size, log.st_mtime_ns, base.st_size, base.st_mtime_ns

    def unchanged(self) -> bool:
        """True when nobody but this session touched its log or baseline since its last write."""
        return not self.reread and self._seen is not None and self._stat() == self._seen

    @property
    def append_lock(self) -> threading.Lock:
        """Held while a record is appended; an erasure holds it while it rewrites the files."""
        return self._append_lock

    def _count(self, record: Record) -> None:
        if isinstance(record, User):
            self.turns += 1
        elif isinstance(record, ToolResult):
            self.label = self.label.stricter(record.label)

    # Reading -----------------------------------------------------------------------------------------

    @property
    def untrusted(self) -> bool:
        """True when any tool result in any epoch was labelled untrusted (M5d 3.1)."""
        return self.label.untrusted

    def depth(self) -> int | None:
        """Tokens the slot holds after this epoch's last request: ``cache_n + prompt_n + predicted_n``
        of its last `usage` (DESIGN 11; the next request contains the reply); None before any."""
        for record in reversed(self.records):
            if isinstance(record, Usage):
                return record.cache_n + record.prompt_n + record.predicted_n
        return None

    def user_texts(self) -> list[str]:
        """The owner's messages of this epoch, oldest first."""
        return [r.content for r in self.records if isinstance(r, User)]

    def messages(self) -> list[dict[str, Any]]:
        """The chat messages of the current epoch: the baseline's system text, the carried summary
        (epochs after the first), then every user, assistant and tool record in log order (a new list;
        the dicts are shared, do not edit)."""
        return list(self._messages)


def _log_epochs(folder: Path) -> list[int]:
    """Epoch numbers of the ``N.jsonl`` files in `folder`, ascending ([] for no folder)."""
    try:
        names = os.listdir(folder)
    except (FileNotFoundError, NotADirectoryError):
        return []
    return sorted(
        int(stem) for name in names if (stem := name.removesuffix(".jsonl")) != name and _is_epoch(stem)
    )


def _is_epoch(stem: str) -> bool:
    return stem.isdigit() and stem.isascii() and (stem == "0" or not stem.startswith("0"))


def _read(session_id: str, path: Path) -> list[Record]:
    try:
        records, _ = read_log(path)
    except RecordError as exc:
        raise SessionError(session_id, f"{exc.path}: line {exc.line}: {exc.why}") from None
    except OSError as exc:
        raise SessionError(session_id, f"cannot read {path.name} ({exc.strerror or exc})") from None
    return records
