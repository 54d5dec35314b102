"""Helpers for the seed 003 tests: items committed through the journal as capture and other events
do it (one `Journal.commit` carrying ``events`` and appending the same lines to items.jsonl), and a
small withdrawal predicate read from controls.jsonl (the withdrawal module's stand-in)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from boxmaker.memoryd.files.journal import Append, Change, encode_line
from boxmaker.memoryd.items import store as items
from boxmaker.memoryd.items.archive import archive_now
from boxmaker.memoryd.review.tiering import listing_now
from boxmaker.memoryd.service import Memoryd
from boxmaker.memoryd.withdrawal.controls import Controls
from boxmaker.proto.labels import DataClass, Label


def stamp(memory: Memoryd) -> str:
    return memory.memory.now().strftime("%Y-%m-%dT%H:%M:%SZ")


def commit_events(memory: Memoryd, action: str, events: list[dict[str, Any]], session: str = "owner") -> str:
    """One journal commit carrying `events` and appending them to items.jsonl; the edit id."""
    entry = {
        "session": session,
        "call": "c1",
        "action": action,
        "file": "items.jsonl",
        "where": "items.jsonl",
        "before": [],
        "after": [],
        "untrusted": False,
        "events": events,
    }
    data = b"".join(encode_line(e) + b"\n" for e in events)
    with memory.memory.writer.lock:
        line = memory.memory.journal.commit(Change(entry, [Append("items.jsonl", data)]))
    return str(line["id"])


def capture(
    memory: Memoryd,
    text: str,
    *,
    kind: str = "knowledge",
    subject: str | None = None,
    scope: str | None = None,
    untrusted: bool = False,
    session: str = "chat-alpha",
    confidence: str | None = None,
    corroborating: tuple[str, ...] = (),
    inspired_by: str | None = None,
) -> str:
    """Capture one item as a session's note would; its id."""
    ident = memory.memory.items.next_id(memory.memory.now().date())
    event = items.capture_event(
        ident=ident,
        time=stamp(memory),
        kind=kind,
        subject=subject,
        scope=scope,
        confidence=confidence,
        text=text,
        label=Label(DataClass.PRIVATE, untrusted),
        source=f"sessions/{session}/0.jsonl#3",
        session=session,
        call="c1",
        corroborating_refs=corroborating,
        inspired_by=inspired_by,
    )
    commit_events(memory, "note", [event], session)
    return ident


def supersede(memory: Memoryd, old: str, new: str) -> str:
    items_now = memory.memory.items.items()
    before, after = items_now[old], items_now[new]
    event = {
        "event": "supersede",
        "time": stamp(memory),
        "old": old,
        "new": new,
        "subject": before.subject,
        "prior": {"date": before.date, "text": before.text},
        "current": {"date": after.date, "text": after.text},
        "by": "owner",
        "edit": "",
    }
    return commit_events(memory, "supersede", [event])


def set_status(memory: Memoryd, ident: str, status: str) -> str:
    prior = memory.memory.items.items()[ident].status
    event = {"event": "status", "time": stamp(memory), "id": ident, "status": status, "prior": prior}
    return commit_events(memory, "pending-cleanup" if status == "pending-cleanup" else "status", [event])


def withdraw(memory: Memoryd, ident: str, number: int = 1) -> dict[str, Any]:
    """Append a WithdrawalRecord (seed 12.2) for one item id through the journal."""
    record = {
        "withdrawal_id": f"memwd-{memory.memory.now():%Y-%m-%d}-{number:03d}",
        "record_type": "withdrawal-control-v1",
        "action": "withdraw",
        "scope": {"memory_item_ids": [ident], "archive_refs": [], "source_or_run_refs": []},
        "reason": "failed-exploration",
        "decided_by": "owner",
        "decided_at": stamp(memory),
        "effect": "exclude-from-influence",
        "supersedes": None,
    }
    entry = {
        "session": "owner",
        "call": "",
        "action": "withdraw",
        "file": "controls.jsonl",
        "where": "controls.jsonl",
        "before": [],
        "after": [],
        "untrusted": False,
        "controls": [record],
    }
    with memory.memory.writer.lock:
        memory.memory.journal.commit(Change(entry, [Append("controls.jsonl", encode_line(record) + b"\n")]))
    return record


def withdrawn_by_id(folder: Path) -> Any:
    """The real exclusion of a memory folder (`controls.Controls(folder).exclusion().item`)."""
    return Controls(folder).exclusion().item


def archive(service: Any, by: str = "owner") -> Any:
    """Run the archive now as `by` (the owner's ``bxctl memory archive``, or the timer)."""
    memory = service.memory
    return archive_now(memory.writer.lock, memory.items, memory.journal, memory.now, by)


def tiers_listing(service: Any, untrusted: bool) -> Any:
    """The tiering listing as the `memory` action ``tiers`` and ``bxctl memory tiers`` read it."""
    memory = service.memory
    return listing_now(memory.store, memory.journal, memory.controls, memory.recaller.recalls, untrusted)
