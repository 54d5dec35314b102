"""Retrieval records: what recall logs, and the ids and turns it logs with (M5a section 6; seed 003
section 23.2).

Every recall memoryd logs IS a ``retrieval_record``: the recall log line (``memory/recalls/YYYY-MM.jsonl``,
`recall.Recaller`, read back by `read_log`) carries, beside M5a's fields,

- ``retrieval_id``: ``memret-YYYY-MM-DD-NNN``, NNN the day's ordinal from 001, the highest of the
  day in the month's log plus one, so the counter survives restarts (`RetrievalIds`);
- ``task_id``: ``<session>#<turn>``, the turn being the number of owner (``user``) records the
  session's logs hold across every epoch when the recall comes. loopd logs the owner's message
  as soon as the model first answers it, before any tool call runs, so a recall made during turn 3
  counts 3 (`Turns.turn_of`); ``owner`` for the owner's searches;
- ``memory_item_ids``: every item the answer shows, the hits' items first, then the live items of
  superseded hits and the rows of conflict blocks (`skeptic.Reading.ids`);
- ``use_role``: ``background`` (`DEFAULT_ROLE`: a recall does not know yet how its items will be used);
- ``retrieved_at``: the recall's time.
"""

from __future__ import annotations

import datetime as dt
import json
import re
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from boxmaker.memoryd.files.journal import read_jsonl
from boxmaker.proto import fsio
from boxmaker.proto.ids import OWNER_SESSION

DEFAULT_ROLE = "background"


RETRIEVAL_ID_PATTERN = r"^memret-(\d{4}-\d{2}-\d{2})-(\d{3,})\Z"


_RETRIEVAL = re.compile(RETRIEVAL_ID_PATTERN)


_EPOCH_LOG = re.compile(r"^(0|[1-9][0-9]{0,8})\.jsonl\Z")


def real_day(value: str) -> dt.date | None:
    try:
        return dt.date.fromisoformat(value)
    except ValueError:
        return None


def is_retrieval_id(value: str) -> bool:
    """True for ``memret-YYYY-MM-DD-NNN`` with a real date."""
    match = _RETRIEVAL.match(value)
    return match is not None and real_day(match.group(1)) is not None


def stamp(moment: dt.datetime) -> str:
    """``YYYY-MM-DDTHH:MM:SSZ`` in UTC."""
    return moment.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class RetrievalIds:
    """Hands out ``memret-YYYY-MM-DD-NNN`` ids; the first id of a day is the highest of that day in
    the month's recall log plus one. Thread-safe (the caller appends the line under `lock`).

    Args:
        recalls: the recall log folder (``memory/recalls``).
    """

    def __init__(self, recalls: Path) -> None:
        self.recalls = recalls
        self.lock = threading.Lock()
        self._last: tuple[dt.date, int] | None = None

    def next(self, day: dt.date) -> str:
        """The next id of `day` (call with `lock` held)."""
        if self._last is None or self._last[0] != day:
            self._last = (day, _highest(self.recalls / f"{day:%Y-%m}.jsonl", day))
        number = self._last[1] + 1
        self._last = (day, number)
        return f"memret-{day.isoformat()}-{number:03d}"


def _highest(path: Path, day: dt.date) -> int:
    prefix = f"memret-{day.isoformat()}-"
    highest = 0
    for line in read_jsonl(path, ("retrieval_id",)):
        value = line.get("retrieval_id")
        if isinstance(value, str) and value.startswith(prefix) and value[len(prefix) :].isdigit():
            highest = max(highest, int(value[len(prefix) :]))
    return highest


def find_retrieval(recalls: Path, ident: str) -> dict[str, Any] | None:
    """The recall log line of retrieval `ident` (in its month's file), or None.

    Raises:
        OSError: when the month's log exists but cannot be read.
    """
    if not is_retrieval_id(ident):
        return None
    day = ident[len("memret-") : len("memret-") + 10]
    path = recalls / f"{day[:7]}.jsonl"
    return next((line for line in read_jsonl(path, ("retrieval_id",)) if line["retrieval_id"] == ident), None)


class Turns:
    """The turn a session is in: its owner (``user``) records across every epoch log (module
    docstring). Counted incrementally, by each log's size; a log that shrank (an erasure rewrote it)
    is counted again.

    Args:
        sessions: the home's ``sessions/`` folder.
    """

    def __init__(self, sessions: Path) -> None:
        self.sessions = sessions
        self._lock = threading.Lock()
        self._seen: dict[Path, tuple[int, int]] = {}

    def turn_of(self, session: str) -> int:
        """The number of owner records `session` logged so far (0 when none or unreadable)."""
        folder = self.sessions / session
        try:
            logs = sorted(p for p in folder.iterdir() if _EPOCH_LOG.match(p.name))
        except OSError:
            return 0
        total = 0
        with self._lock:
            for path in logs:
                try:
                    total += self._count(path)
                except OSError:
                    continue
        return total

    def _count(self, path: Path) -> int:
        size = path.stat().st_size
        offset, count = self._seen.get(path, (0, 0))
        if size < offset:
            offset, count = 0, 0
        if size == offset:
            return count
        with path.open("rb") as handle:
            handle.seek(offset)
            data = handle.read(size - offset)
        lines, tail = fsio.complete_lines(data)
        for raw in lines:
            if b'"user"' not in raw:
                continue
            try:
                value = json.loads(raw)
            except ValueError:
                continue
            if isinstance(value, dict) and value.get("type") == "user":
                count += 1
        self._seen[path] = (offset + len(data) - len(tail), count)
        return count


def task_id(session: str, turn: int) -> str:
    """``<session>#<turn>``; the owner's own searches are task ``owner``."""
    return OWNER_SESSION if session == OWNER_SESSION else f"{session}#{turn}"


_LOG_NAME = re.compile(r"[0-9]{4}-[0-9]{2}\.jsonl")


def read_log(folder: Path) -> Iterator[str]:
    """Every complete line of the recall log, oldest month first (DESIGN 10.4).

    A torn last line (one being written) is not yet a line; a line that is not UTF-8 is yielded as
    "" (which does not parse). A missing folder has no lines.

    Raises:
        OSError: when a month's file exists but cannot be read.
    """
    if not folder.is_dir():
        return
    for path in sorted(p for p in folder.iterdir() if _LOG_NAME.fullmatch(p.name)):
        data = path.read_bytes()
        for line in data.split(b"\n")[:-1]:
            try:
                yield line.decode("utf-8")
            except UnicodeDecodeError:
                yield ""
