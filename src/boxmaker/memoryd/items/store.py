"""The item store: an append-only event log whose fold gives every item (seed 003 sections 7.1-7.2, 9).

``memory/items.jsonl`` holds one event per line; nothing in it is ever rewritten, except by an
authorised erasure (seed 003 section 12.3), which replaces the erased items' text. Events::

    {"event": "capture", "id": "mem-2026-11-29-001", "time": "2026-11-29T18:30:00Z",
     "kind": "state", "subject": "host:public-ip", "scope": null, "confidence": "observed-once",
     "confidence_scheme": "epistemic-status-v1", "text": "...", "label": {"class": "private",
     "untrusted": false}, "source": "sessions/chat-…/0.jsonl#7", "session": "chat-…", "call": "c1",
     "corroborating_refs": [], "inspired_by": null, "note": "note/4/2026-11-29T18:30Z",
     "edit": "2026-11-29-0003"}
    {"event": "supersede", "time", "old", "new", "subject", "prior": {"date", "text"},
     "current": {"date", "text"}, "by", "edit"}
    {"event": "status", "time", "id", "status", "prior", "by", "edit"}
    {"event": "archive", "time", "file": "archive/2026-11-29.md", "ids": [...]}
    {"event": "erase", "time", "erasure": "memerase-…", "ids": [...]}
    {"event": "cool", "time", "id", "by", "edit"}          (autodream: a knowledge item demoted)
    {"event": "warm", "time", "id", "by", "edit"}          (the owner: the demotion undone)
    {"event": "merge", "time", "id", "members": [...], "sources": [...], "date", "by", "edit"}
    {"event": "assign", "time", "id", "topic", "triggers": [...], "by", "edit"}

The fold (`fold`) replays them in order: a capture makes an `active` item; a supersede makes the old
item `superseded` with `superseded_by` in the same step (one event, so two items of one subject are
never both active by a supersede: seed 7.2, atomic supersede); a status event sets `stale`,
`pending-cleanup` or `active`; an archive event gives items their `archive_ref`, the Source shown from
then on (seed 9: prefer anchoring into the append-only layer); an erase event empties the items' text
and marks them erased. Autodream's maintenance events (seed 003 section 14.3; `dream`): ``cool`` sets
`cooled` (the projections show the item under "Historical lessons", never in index.md's recent
activity) and ``warm`` clears it; ``merge`` follows, in the same journal line, the capture of the
consolidated knowledge item `id`: each member gets `merged_into` (it stays, as history), and the new item
gets `sources` (every member's Source), a Source string enumerating them (``merge: a; b``, kept when it
is archived) and the newest member's date; ``assign`` sets an item's `topic` and `triggers` (the
projections use them instead of the deterministic topic). An event that does not fit the fold (an
unknown id, a supersede of an item
that is not active) is skipped with a log line: the log is the record of what happened, and the writer
never appends such an event.

Ids are ``mem-YYYY-MM-DD-NNN``, NNN the day's ordinal from 001 (more digits past 999), assigned as the
highest of the day in the log plus one, so they survive restarts and are stable forever (seed 7.2).
"""

from __future__ import annotations

import datetime as dt
import logging
import re
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any, Literal, TypeAlias

import msgspec

from boxmaker.memoryd.files.journal import read_jsonl
from boxmaker.memoryd.files.notes import Note
from boxmaker.proto.labels import DataClass, Label

log = logging.getLogger("boxmaker.memoryd.items")


Kind: TypeAlias = Literal["state", "knowledge"]
Status: TypeAlias = Literal["active", "superseded", "pending-cleanup", "stale"]

KINDS: tuple[str, ...] = ("state", "knowledge")
#: The closed Status enum (seed 003 section 9).
STATUSES: tuple[str, ...] = ("active", "superseded", "pending-cleanup", "stale")
#: The confidence scheme and its values (seed 003 section 9, `epistemic-status-v1`).
CONFIDENCE_SCHEME = "epistemic-status-v1"
CONFIDENCES: tuple[str, ...] = ("confirmed", "observed-once", "inferred", "unknown")

ITEM_ID_PATTERN = r"^mem-([0-9]{4}-[0-9]{2}-[0-9]{2})-([0-9]{3,})\Z"
_ITEM_ID = re.compile(ITEM_ID_PATTERN)


class Item(msgspec.Struct, frozen=True, kw_only=True, gc=False):
    """One item as the fold leaves it (seed 003 section 9's fields).

    Attributes:
        id: ``mem-YYYY-MM-DD-NNN``.
        time: the capture time, ``YYYY-MM-DDTHH:MM:SSZ``; `date` is its day.
        kind: ``state`` or ``knowledge``.
        subject: the key a state item is the current value of (always set for state).
        scope, confidence, confidence_scheme: optional metadata (the scheme set when confidence is).
        text: the item's text ("" once erased).
        label: the label of the session that captured it.
        source: the Source shown: `archive_ref` once archived, else `captured_from`.
        captured_from: the smallest stable anchor memoryd knew at capture (see `boxmaker.memoryd.source`).
        session, call: the capturing session ("owner" for the owner's commands) and call id.
        corroborating_refs, inspired_by: as seed 003 section 9 defines them.
        note: the stable key of its notes.md entry (``note/<position>/<header time>``), "" if none.
        status: one of `STATUSES`; superseded_by: set when superseded.
        archive_ref: ``archive/YYYY-MM-DD.md#<id>`` once archived.
        erased: True once an authorised erasure removed it.
        imported: ``import:<bundle file name>`` for an item `bxctl memory import` brought in, else None.
        cooled: True while demoted by autodream (``cool``; ``warm`` undoes it).
        merged_into: the consolidated item a ``merge`` folded this one into (it stays as history).
        sources: a merged item's members' Sources (empty for other items).
        topic, triggers: set by ``assign`` (None and empty: the deterministic topic).
    """

    id: str
    time: str
    date: str
    kind: str
    subject: str | None
    scope: str | None
    confidence: str | None
    confidence_scheme: str | None
    text: str
    label: Label
    source: str
    captured_from: str
    session: str
    call: str
    corroborating_refs: tuple[str, ...]
    inspired_by: str | None
    note: str
    status: str = "active"
    superseded_by: str | None = None
    archive_ref: str | None = None
    erased: bool = False
    imported: str | None = None
    cooled: bool = False
    merged_into: str | None = None
    sources: tuple[str, ...] = ()
    topic: str | None = None
    triggers: tuple[str, ...] = ()

    @property
    def trusted(self) -> bool:
        """True when captured by a session that had not read untrusted content."""
        return not self.label.untrusted


def is_item_id(value: str) -> bool:
    """True when `value` has the form ``mem-YYYY-MM-DD-NNN`` with a real date."""
    match = _ITEM_ID.match(value)
    if match is None:
        return False
    try:
        dt.date.fromisoformat(match.group(1))
    except ValueError:
        return False
    return True


def item_id(day: dt.date, n: int) -> str:
    """The id of the `n`-th item (from 1) captured on `day`."""
    return f"mem-{day.isoformat()}-{n:03d}"


def item_id_of(note: Note) -> str | None:
    """The item id a notes.md header carries (``· mem-… · <kind>`` after the label), or None for
    M5a headers and entries that are not captures."""
    for value in note.extra:
        if is_item_id(value):
            return value
    return None


def read_events(path: Path) -> list[dict[str, Any]]:
    """The events of an item log, complete lines only (a torn tail is not yet an event); a line
    that is not an event is skipped with a log line.

    Raises:
        OSError: when the file exists but cannot be read.
    """
    return read_jsonl(path, ("event", "time"))


def fold(events: Iterable[dict[str, Any]]) -> dict[str, Item]:
    """Every item the events describe, in capture order (erased items included, with no text).

    Never raises on a bad event: it is skipped with a log line naming it.
    """
    items: dict[str, Item] = {}
    for number, event in enumerate(events, start=1):
        apply_logged(items, event, number)
    return items


def apply_logged(items: dict[str, Item], event: dict[str, Any], number: int) -> None:
    """`apply_event`, an event that does not fit skipped with a log line naming it (`number`, from 1)."""
    try:
        apply_event(items, event)
    except (KeyError, TypeError, ValueError, msgspec.ValidationError) as exc:
        log.warning("skipping event %d of the item log (%s): %s", number, event.get("event"), exc)


def apply_event(items: dict[str, Item], event: dict[str, Any]) -> list[str]:
    """Apply one event to `items`; returns the ids it changed.

    Raises:
        KeyError, TypeError, ValueError, msgspec.ValidationError: an event that does not fit the fold.
    """
    kind = event["event"]
    if kind == "capture":
        item = captured(event)
        if item.id in items:
            raise ValueError(f"{item.id} was already captured")
        items[item.id] = item
        return [item.id]
    if kind == "supersede":
        old, new = _known(items, event["old"]), _known(items, event["new"])
        if old.status != "active":
            raise ValueError(f"{old.id} is {old.status}, not active")
        items[old.id] = msgspec.structs.replace(old, status="superseded", superseded_by=new.id)
        return [old.id]
    if kind == "status":
        item = _known(items, event["id"])
        status = event["status"]
        if status not in ("active", "stale", "pending-cleanup"):
            raise ValueError(f"status {status!r} is not set by a status event")
        items[item.id] = msgspec.structs.replace(item, status=_interned(status))
        return [item.id]
    if kind == "archive":
        file = str(event["file"])
        found = [_known(items, wanted) for wanted in event["ids"]]
        for item in found:
            ref = f"{file}#{item.id}"
            shown = item.source if item.sources else ref  # a merged item's Source enumerates its members'
            items[item.id] = msgspec.structs.replace(item, archive_ref=ref, source=shown)
        return [item.id for item in found]
    if kind == "erase":
        found = [_known(items, wanted) for wanted in event["ids"]]
        for item in found:
            items[item.id] = msgspec.structs.replace(item, text="", erased=True)
        return [item.id for item in found]
    if kind in ("cool", "warm"):
        item = _known(items, event["id"])
        items[item.id] = msgspec.structs.replace(item, cooled=kind == "cool")
        return [item.id]
    if kind == "merge":
        return _merge(items, event)
    if kind == "assign":
        item = _known(items, event["id"])
        topic = event.get("topic")
        triggers = tuple(str(t) for t in event.get("triggers") or ())
        items[item.id] = msgspec.structs.replace(item, topic=_optional(topic), triggers=triggers)
        return [item.id]
    raise ValueError(f"unknown event {kind!r}")


def merge_source(sources: Sequence[str]) -> str:
    """The Source string of a merged item: ``merge: <each member's Source, "; " between>``."""
    return "merge: " + "; ".join(sources)


def _merge(items: dict[str, Item], event: dict[str, Any]) -> list[str]:
    merged = _known(items, event["id"])
    members = [_known(items, m) for m in event["members"]]
    if len(members) < 2 or merged.id in {m.id for m in members}:
        raise ValueError("a merge needs two or more members other than the merged item")
    for member in members:
        if member.merged_into is not None:
            raise ValueError(f"{member.id} was already merged into {member.merged_into}")
    sources = tuple(str(s) for s in event["sources"])
    for member in members:
        items[member.id] = msgspec.structs.replace(member, merged_into=merged.id)
    source = merge_source(sources)
    items[merged.id] = msgspec.structs.replace(
        merged, sources=sources, source=source, date=_interned(str(event["date"]))
    )
    return [merged.id, *(member.id for member in members)]


def _known(items: dict[str, Item], wanted: object) -> Item:
    if not isinstance(wanted, str) or wanted not in items:
        raise ValueError(f"no item {wanted!r}")
    return items[wanted]


def captured(event: dict[str, Any]) -> Item:
    """The item a capture event makes (status active).

    Raises:
        KeyError, ValueError, msgspec.ValidationError: when the event lacks a field or has a bad value.
    """
    ident = str(event["id"])
    if not is_item_id(ident):
        raise ValueError(f"{ident!r} is not an item id")
    kind = event["kind"]
    if kind not in KINDS:
        raise ValueError(f"kind {kind!r}")
    subject = event.get("subject")
    if kind == "state" and not subject:
        raise ValueError("a state item without a subject")
    time = str(event["time"])
    label = _label(event["label"])
    source = str(event["source"])
    return Item(
        id=ident,
        time=time,
        date=_interned(time[:10]),
        kind=_interned(kind),
        subject=_optional(subject),
        scope=_optional(event.get("scope")),
        confidence=_interned_or_none(event.get("confidence")),
        confidence_scheme=_interned_or_none(event.get("confidence_scheme")),
        text=str(event["text"]),
        label=label,
        source=source,
        captured_from=source,
        session=_interned(str(event.get("session", ""))),
        call=str(event.get("call", "")),
        corroborating_refs=tuple(str(r) for r in event.get("corroborating_refs") or ()),
        inspired_by=_optional(event.get("inspired_by")),
        note=str(event.get("note", "")),
        imported=_optional(event.get("imported")),
    )


#: Labels by their JSON form: a store holds few distinct labels, so items share them.
_LABELS: dict[tuple[object, object], Label] = {}


def _label(value: object) -> Label:
    """The `Label` of an event's ``label`` (one object per distinct label).

    Raises:
        msgspec.ValidationError: when it is not a label.
    """
    if isinstance(value, dict):
        key = (value.get("class"), value.get("untrusted"))
        if len(value) == 2 and isinstance(key[0], str) and isinstance(key[1], bool):
            found = _LABELS.get(key)
            if found is None:
                found = msgspec.convert(value, Label)
                _LABELS[key] = found
            return found
    return msgspec.convert(value, Label)


def _interned(value: str) -> str:
    """One string object for the values many items share (dates, kinds, sessions): a store of
    100,000 items keeps each once."""
    return sys.intern(value)


def _interned_or_none(value: object) -> str | None:
    return None if value is None else sys.intern(str(value))


def _optional(value: object) -> str | None:
    return None if value is None else str(value)


def capture_event(
    *,
    ident: str,
    time: str,
    kind: str,
    subject: str | None,
    scope: str | None,
    confidence: str | None,
    text: str,
    label: Label,
    source: str,
    session: str,
    call: str,
    corroborating_refs: Sequence[str] = (),
    inspired_by: str | None = None,
    note: str = "",
    edit: str = "",
) -> dict[str, Any]:
    """A capture event in the log's field order (the scheme is set exactly when confidence is)."""
    return {
        "event": "capture",
        "id": ident,
        "time": time,
        "kind": kind,
        "subject": subject,
        "scope": scope,
        "confidence": confidence,
        "confidence_scheme": CONFIDENCE_SCHEME if confidence is not None else None,
        "text": text,
        "label": {"class": label.data_class.value, "untrusted": label.untrusted},
        "source": source,
        "session": session,
        "call": call,
        "corroborating_refs": list(corroborating_refs),
        "inspired_by": inspired_by,
        "note": note,
        "edit": edit,
    }


def next_number(events: Iterable[dict[str, Any]], day: dt.date) -> int:
    """The ordinal the next item of `day` gets: the highest of that day in `events` plus one."""
    prefix = f"mem-{day.isoformat()}-"
    highest = 0
    for event in events:
        ident = event.get("id")
        if event.get("event") == "capture" and isinstance(ident, str) and ident.startswith(prefix):
            tail = ident[len(prefix) :]
            if tail.isascii() and tail.isdigit():
                highest = max(highest, int(tail))
    return highest + 1


def active_by_subject(items: Iterable[Item]) -> dict[str, list[Item]]:
    """The active, not erased state items grouped by subject (more than one means a conflict)."""
    found: dict[str, list[Item]] = {}
    for item in items:
        if item.kind == "state" and item.status == "active" and not item.erased and item.subject:
            found.setdefault(item.subject, []).append(item)
    return found


def label_of(items: Iterable[Item]) -> Label:
    """The strictest label of `items`, at least private (DESIGN 11: a read carries what it shows)."""
    label = Label(DataClass.PRIVATE, False)
    for item in items:
        label = label.stricter(item.label)
    return label
