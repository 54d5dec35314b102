"""pending.jsonl: identity writes waiting for the owner when review is on (M5a section 5, Review).

One line per event: ``{"event": "staged", "id": "p-YYYY-MM-DD-NNNN", "time", "session", "call",
"arguments", "taint", "untrusted"}`` when a write is staged, and ``{"event": "accepted" | "rejected",
"id", "time"}`` when the owner decides. A write is pending while it has no decision line. Pending ids
count per day and survive restarts (they are read back from the file).
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

from boxmaker.memoryd.files.journal import read_jsonl
from boxmaker.proto.errors import InvalidId
from boxmaker.proto.ids import parse_pending_id, pending_id


def read_events(path: Path) -> list[dict[str, Any]]:
    """Every event of pending.jsonl, in order (a missing file has none; a line that is not an event
    is skipped with a log line)."""
    events = read_jsonl(path, ("event", "id"))
    return [e for e in events if e["event"] != "staged" or isinstance(e.get("arguments"), dict)]


def pending(path: Path) -> list[dict[str, Any]]:
    """The staged writes with no decision yet, oldest first."""
    events = read_events(path)
    decided = {e["id"] for e in events if e.get("event") in ("accepted", "rejected")}
    return [e for e in events if e.get("event") == "staged" and e["id"] not in decided]


def find(path: Path, wanted: str) -> tuple[dict[str, Any] | None, str]:
    """The staged event of `wanted` and its state: "pending", "accepted", "rejected" or "unknown"."""
    staged: dict[str, Any] | None = None
    state = "unknown"
    for event in read_events(path):
        if event.get("id") != wanted:
            continue
        if event.get("event") == "staged":
            staged, state = event, "pending"
        elif staged is not None:
            state = str(event.get("event"))
    return staged, state


def next_id(path: Path, day: dt.date) -> str:
    """The next pending id of `day`."""
    last = 0
    for event in read_events(path):
        if event.get("event") == "staged":
            try:
                when, n = parse_pending_id(str(event["id"]))
            except InvalidId:
                continue
            if when == day:
                last = max(last, n)
    return pending_id(day, last + 1)
