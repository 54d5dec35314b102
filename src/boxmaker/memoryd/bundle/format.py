"""``bxctl memory export`` and ``import``: a memory bundle that keeps its withdrawal controls (seed 003
section 12.2, the anti-resurrection rule, and checklist item 20).

A bundle is one JSON object, written by memoryd atomically, mode 0600, never over an existing file::

    {"format": "boxmaker-memory-export-v1", "exported_at": "2026-09-24T21:02:07Z",
     "items": [capture events, then the supersede and status events about them, in log order],
     "withdrawn": [ids of exported items under an active withdrawal],
     "controls": [every WithdrawalRecord (seed 12.2) whose scope selects an exported item, and the
                  records those supersede]}

- Erased items are never exported. Withdrawn items are exported with the controls that withdraw
  them, so the target applies them before anything is exposed; ``--omit-withdrawn`` leaves them out
  instead. Archive events are not exported: the target archives imported items in its own archive.
- Export journals a line (action ``export``, ``file`` the bundle's path, ``ids`` the items in it) so
  an erasure knows which exports hold which items.
- Import validates the whole bundle before writing anything: the format, every event (the same rules
  as a capture: ids, kinds, subjects, labels, the write check on the text), every control, that
  withdrawn items come with controls covering each of them. An item whose id is already present is
  skipped when its text is the same and refuses the import when it differs; a control already present
  likewise. A new control that supersedes a record this memory already holds is refused: reinstating
  this home's withdrawal is done here (``bxctl memory reinstate``), never by a bundle. The capture
  fields (subject, scope, references, inspired_by) pass the write check like the text. Then one
  journal commit (action ``import``) appends, in this order: the controls to
  controls.jsonl (`controls_change`, kept separate so the withdrawal module's validation can be wired
  in), the notes.md entries, the capture events (Source and session kept; ``note`` is the new notes.md
  key; ``imported`` names the bundle, ``import:<file name>``; every item untrusted unless the owner
  passed ``--trusted``: a bundle's labels are only its file's word) with their later events, and the
  archive of the imported items in the target's own archive (so their Source and the archive-ref
  selectors of their controls hold from the first moment).
"""

from __future__ import annotations

import datetime as dt
import json
import os
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import msgspec

from boxmaker.memoryd.check.rules import check_text
from boxmaker.memoryd.check.secrets import redact
from boxmaker.memoryd.files import names
from boxmaker.memoryd.files.edits import vet_note
from boxmaker.memoryd.files.journal import Append, encode_line, read_jsonl
from boxmaker.memoryd.files.names import CONTROLS_FILE, ITEMS_FILE
from boxmaker.memoryd.files.notes import Note, render, render_header
from boxmaker.memoryd.items import archive
from boxmaker.memoryd.items.store import Item, capture_event, captured, fold
from boxmaker.memoryd.sentences import Refusal
from boxmaker.memoryd.sentences import files as files_sentences
from boxmaker.memoryd.withdrawal import records
from boxmaker.proto import fsio
from boxmaker.proto.labels import DataClass, Label

FORMAT = "boxmaker-memory-export-v1"
#: The largest bundle import reads, in bytes.
MAX_BUNDLE = 64 * 1024 * 1024

_SESSION = re.compile(r"^[a-z0-9][a-z0-9-]{0,63}\Z")
#: The fields of a WithdrawalRecord (seed 003 section 12.2), in order.
CONTROL_KEYS = (
    "withdrawal_id",
    "record_type",
    "action",
    "scope",
    "reason",
    "decided_by",
    "decided_at",
    "effect",
    "supersedes",
)
_TIME = re.compile(r"^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}Z\Z")


def read_controls(memory_dir: Path) -> list[dict[str, Any]]:
    """The WithdrawalRecords of controls.jsonl, oldest first (complete lines only)."""
    return read_jsonl(memory_dir / CONTROLS_FILE, ("withdrawal_id", "record_type"))


def selects(record: dict[str, Any], item: Item) -> bool:
    """True when a WithdrawalRecord's scope names `item`: its id, its archive file or anchor (the
    one it has, else the one archiving gives it), its session or its capture anchor."""
    scope = record.get("scope")
    if not isinstance(scope, dict):
        return False

    def listed(key: str) -> list[Any]:
        value = scope.get(key)
        return value if isinstance(value, list) else []

    ref = item.archive_ref or f"{archive.archive_file(item.date)}#{item.id}"
    return (
        item.id in listed("memory_item_ids")
        or bool({ref, ref.split("#", 1)[0]} & set(map(str, listed("archive_refs"))))
        or bool({item.session, item.captured_from} & set(map(str, listed("source_or_run_refs"))))
    )


def _applicable(controls: Sequence[dict[str, Any]], items: Iterable[Item]) -> list[dict[str, Any]]:
    """The records selecting any of `items`, with the records they supersede (log order)."""
    wanted = list(items)
    chosen = {id(c) for c in controls if any(selects(c, item) for item in wanted)}
    by_id = {str(c.get("withdrawal_id")): c for c in controls}
    pending = [c for c in controls if id(c) in chosen]
    while pending:
        prior = by_id.get(str(pending.pop().get("supersedes")))
        if prior is not None and id(prior) not in chosen:
            chosen.add(id(prior))
            pending.append(prior)
    return [c for c in controls if id(c) in chosen]


@dataclass(frozen=True, slots=True)
class Export:
    """A bundle and what it holds."""

    bundle: dict[str, Any]
    ids: list[str]
    withdrawn: list[str]
    omitted: list[str]
    controls: list[str]


def build_export(
    events: Sequence[dict[str, Any]],
    controls: Sequence[dict[str, Any]],
    excluded: Callable[[Item], bool],
    omit_withdrawn: bool,
    moment: dt.datetime,
) -> Export:
    """The bundle of every item not erased (withdrawn ones too unless `omit_withdrawn`). Pure."""
    items = fold(events)
    withdrawn: set[str] = {i for i, item in items.items() if not item.erased and excluded(item)}
    omitted = sorted(withdrawn) if omit_withdrawn else []
    kept = {i for i, item in items.items() if not item.erased and i not in omitted}
    chosen: list[dict[str, Any]] = []
    for event in events:
        kind = event.get("event")
        if (
            (kind == "capture" and event.get("id") in kept)
            or (kind == "supersede" and {event.get("old"), event.get("new")} <= kept)
            or (kind == "status" and event.get("id") in kept)
        ):
            chosen.append(_redacted(event))
    ids = [i for i in items if i in kept]
    applicable = _applicable(controls, (items[i] for i in ids))
    listed = [i for i in ids if i in withdrawn]
    bundle = {
        "format": FORMAT,
        "exported_at": archive.stamp(moment),
        "items": chosen,
        "withdrawn": listed,
        "controls": applicable,
    }
    return Export(
        bundle,
        ids,
        listed,
        omitted,
        [str(c.get("withdrawal_id")) for c in applicable],
    )


def _redacted(event: dict[str, Any]) -> dict[str, Any]:
    """An item event with credentials in its texts replaced (`check.secrets.redact`): an export never
    carries one, however the text got into the store (issue 15 item 5)."""
    out = dict(event)
    if isinstance(out.get("text"), str):
        out["text"] = redact(out["text"])
    for key in ("prior", "current"):
        value = out.get(key)
        if isinstance(value, dict) and isinstance(value.get("text"), str):
            out[key] = {**value, "text": redact(value["text"])}
    return out


def write_new(path: Path, data: bytes) -> None:
    """Write `path` durably (0600) only if it does not exist: a temp file in the same folder, fsync,
    then a hard link (which never replaces a file), fsync of the folder.

    Raises:
        FileExistsError: when `path` exists (nothing is written).
        OSError: when a step fails (the temp file is removed).
    """
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            os.fsync(fd)
        finally:
            os.close(fd)
        os.link(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
    fsio.fsync_dir(path.parent)


# Import ---------------------------------------------------------------------------------------


def read_bundle(path: Path) -> dict[str, Any] | Refusal:
    """The bundle's JSON object, or a refusal saying why it cannot be read."""
    try:
        size = path.stat().st_size
        if size > MAX_BUNDLE:
            return files_sentences.bundle_refused(f"it is {size:,} bytes, over the limit of {MAX_BUNDLE:,}")
        value = json.loads(path.read_bytes())
    except FileNotFoundError:
        return files_sentences.no_bundle(str(path))
    except OSError as exc:
        return files_sentences.bundle_refused(f"it cannot be read ({exc.strerror or exc})")
    except ValueError as exc:
        return files_sentences.bundle_refused(f"it is not JSON ({exc})")
    if not isinstance(value, dict) or value.get("format") != FORMAT:
        return files_sentences.bundle_refused(f'it is not a "{FORMAT}" bundle')
    return value


def _check_control(number: int, record: object) -> str | None:
    """Why a control record is not a WithdrawalRecord (seed 12.2, `records.shape_problem`), or None."""
    if not isinstance(record, dict):
        return f"control {number} is not an object"
    try:
        decoded = records.decode(record)
    except msgspec.ValidationError as exc:
        return f"control {number} is not a withdrawal-control-v1 record ({exc})"
    problem = records.shape_problem(decoded)
    if problem is not None:
        return f"control {number} ({decoded.withdrawal_id}): " + problem.sentence.split("; nothing was")[0]
    return None


def _check_event(number: int, event: object, seen: dict[str, Item]) -> str | None:
    """Why an item event of the bundle cannot be imported, or None (`seen` grows with captures)."""
    if not isinstance(event, dict):
        return f"item event {number} is not an object"
    kind = event.get("event")
    if kind == "capture":
        try:
            item = captured(event)
        except (KeyError, TypeError, ValueError, msgspec.ValidationError) as exc:
            return f"item event {number} is not a valid capture ({exc})"
        if item.id in seen:
            return f"{item.id} is captured twice"
        if not _TIME.match(item.time) or not item.id.startswith(f"mem-{item.date}-"):
            return f"{item.id} has no capture time YYYY-MM-DDTHH:MM:SSZ of its own day"
        if not _SESSION.match(item.session):
            return f"{item.id} has no valid session"
        vetted = vet_note(item.text)
        if isinstance(vetted, Refusal) or vetted.text != item.text:
            why = vetted.code if isinstance(vetted, Refusal) else "text not in its stored form"
            return f"the text of {item.id} fails the write check ({why})"
        for key, value in _fields(item):
            refusal = check_text(value)
            if refusal is not None or value != value.strip() or not value:
                why = refusal.code if refusal is not None else "blank or not stripped"
                return f"the {key} of {item.id} fails the write check ({why})"
        seen[item.id] = item
        return None
    if kind in ("supersede", "status") and (
        not _TIME.match(str(event.get("time")))
        or not all(isinstance(event.get(k, ""), str) for k in ("by", "edit"))
    ):
        return f"item event {number} has no time YYYY-MM-DDTHH:MM:SSZ, or a by or edit that is not text"
    if kind == "supersede":
        old, new = seen.get(str(event.get("old"))), seen.get(str(event.get("new")))
        if old is None or new is None or old.id == new.id:
            return f"item event {number} supersedes an item the bundle does not capture before it"
        if old.status != "active":
            return f"item event {number} supersedes {old.id}, which is {old.status} by then"
        if not (old.kind == new.kind == "state" and old.subject == new.subject == event.get("subject")):
            return f"item event {number} supersedes across kinds or subjects"
        if new.label.untrusted and not old.label.untrusted:
            return f"item event {number} supersedes a trusted item by an untrusted one"
        if event.get("prior") != {"date": old.date, "text": old.text} or event.get("current") != {
            "date": new.date,
            "text": new.text,
        }:
            return f"item event {number} records a prior or current value that is not its items'"
        seen[old.id] = msgspec.structs.replace(old, status="superseded", superseded_by=new.id)
        return None
    if kind == "status":
        if str(event.get("id")) not in seen or event.get("status") not in (
            "active",
            "stale",
            "pending-cleanup",
        ):
            return f"item event {number} is not a status event of an item the bundle captures"
        return None
    return f"item event {number} is a {kind!r} event, which a bundle does not carry"


def _fields(item: Item) -> list[tuple[str, str]]:
    """The capture fields of an item that pass the write check like its text."""
    found = [(key, getattr(item, key)) for key in ("subject", "scope", "inspired_by")]
    found += [("corroborating_refs", ref) for ref in item.corroborating_refs]
    return [(key, value) for key, value in found if value is not None]


@dataclass(frozen=True, slots=True)
class ImportPlan:
    """What an import appends (validated)."""

    captures: list[dict[str, Any]]
    later: list[dict[str, Any]]
    controls: list[dict[str, Any]]
    skipped: list[str]
    skipped_controls: list[str]


def plan_import(
    bundle: dict[str, Any],
    present: Mapping[str, Item],
    present_controls: Sequence[dict[str, Any]],
    trusted: bool = False,
) -> ImportPlan | Refusal:
    """Validate the whole bundle against the target's items and controls. Pure.

    Every imported item is marked untrusted, and its class at least private, unless `trusted` (the
    owner says the bundle is theirs and unmodified): a bundle's labels are only its file's word. A new
    control may not supersede a record this memory already holds: a reinstatement of this home's
    withdrawal is made here (``bxctl memory reinstate``), never by a bundle."""
    events, controls = bundle.get("items"), bundle.get("controls")
    withdrawn = bundle.get("withdrawn", [])
    if not isinstance(events, list):
        return files_sentences.bundle_refused('it has no "items" list')
    if not isinstance(withdrawn, list) or not all(isinstance(i, str) for i in withdrawn):
        return files_sentences.bundle_refused('its "withdrawn" is not a list of item ids')
    if withdrawn and controls is None:
        return files_sentences.bundle_refused(
            f"it holds {len(withdrawn):,} withdrawn item(s) but no controls; export it again with its "
            "controls, or with --omit-withdrawn"
        )
    if controls is not None and not isinstance(controls, list):
        return files_sentences.bundle_refused('its "controls" is not a list')
    seen: dict[str, Item] = {}
    for number, event in enumerate(events, start=1):
        why = _check_event(number, event, seen)
        if why:
            return files_sentences.bundle_refused(why)
    records: list[dict[str, Any]] = []
    for number, record in enumerate(controls or [], start=1):
        why = _check_control(number, record)
        if why:
            return files_sentences.bundle_refused(why)
        records.append(record)
    for ident in withdrawn:
        item = seen.get(ident)
        if item is None:
            return files_sentences.bundle_refused(f"it lists {ident} as withdrawn but does not hold it")
        if not any(r["action"] == "withdraw" and selects(r, item) for r in records):
            return files_sentences.bundle_refused(f"its controls do not cover the withdrawn item {ident}")
    skipped: list[str] = []
    for ident, item in seen.items():
        there = present.get(ident)
        if there is None:
            continue
        if there.text != item.text or there.erased:
            return files_sentences.import_conflict(ident, "text")
        skipped.append(ident)
    known = {str(c.get("withdrawal_id")): c for c in present_controls}
    new_controls, skipped_controls = [], []
    for record in records:
        ident = str(record["withdrawal_id"])
        if ident in known:
            if known[ident] != record:
                return files_sentences.import_conflict(ident, "content")
            skipped_controls.append(ident)
        else:
            new_controls.append(record)
    for record in new_controls:
        if record.get("supersedes") in known:
            return files_sentences.bundle_refused(
                f"control {record['withdrawal_id']} supersedes {record['supersedes']}, which this memory "
                "already holds; a withdrawal of this memory is reinstated or replaced here, with bxctl "
                "memory reinstate or withdraw --supersedes"
            )
    new = set(seen) - set(skipped)
    captures = [_capture(e, trusted) for e in events if e.get("event") == "capture" and e["id"] in new]
    later = [
        _later(e)
        for e in events
        if (e.get("event") == "supersede" and {e["old"], e["new"]} <= new)
        or (e.get("event") == "status" and e["id"] in new)
    ]
    return ImportPlan(
        captures, later, [{k: c[k] for k in CONTROL_KEYS} for c in new_controls], skipped, skipped_controls
    )


def _capture(event: dict[str, Any], trusted: bool) -> dict[str, Any]:
    """A validated capture event with exactly the fields of the item log (nothing else carried),
    untrusted and at least private unless `trusted` (a tampered bundle cannot lower the class)."""
    item = captured(event)
    floor = max(item.label.data_class, DataClass.PRIVATE)
    label = item.label if trusted else Label(floor, True)
    return capture_event(
        ident=item.id,
        time=item.time,
        kind=item.kind,
        subject=item.subject,
        scope=item.scope,
        confidence=item.confidence,
        text=item.text,
        label=label,
        source=item.source,
        session=item.session,
        call=item.call,
        corroborating_refs=item.corroborating_refs,
        inspired_by=item.inspired_by,
        note=item.note,
        edit=str(event.get("edit", "")),
    )


def _later(event: dict[str, Any]) -> dict[str, Any]:
    """A validated supersede or status event with only its own fields."""
    keys = (
        ("event", "time", "old", "new", "subject", "prior", "current", "by", "edit")
        if event["event"] == "supersede"
        else ("event", "time", "id", "status", "prior", "by", "edit")
    )
    return {k: event[k] for k in keys if k in event}


def controls_change(controls: Sequence[dict[str, Any]]) -> tuple[dict[str, Any], list[Append]]:
    """The journal fields and the append that add WithdrawalRecords to controls.jsonl (the one place
    import writes controls; the withdrawal module's own validation belongs here)."""
    if not controls:
        return {}, []
    data = b"".join(encode_line(dict(c)) + b"\n" for c in controls)
    return {"controls": list(controls)}, [Append(CONTROLS_FILE, data)]


def import_appends(
    memory_dir: Path,
    *,
    plan: ImportPlan,
    events: Sequence[dict[str, Any]],
    first_position: int,
    notes_need_newline: bool,
    bundle_name: str,
    moment: dt.datetime,
) -> tuple[dict[str, Any], list[Append], list[Note]]:
    """The journal fields, the appends (controls, notes.md, items.jsonl, archive files) and the
    notes of an import, from a validated plan and the target's item events."""
    fields, appends = controls_change(plan.controls)
    notes: list[Note] = []
    captures: list[dict[str, Any]] = []
    for offset, event in enumerate(plan.captures):
        item = captured(event)
        note = Note(
            "noted",
            item.time[:16] + "Z",
            item.session,
            "",
            item.label,
            item.text,
            first_position + offset,
            (item.id, item.kind),
        )
        notes.append(note)
        captures.append({**event, "note": note.key, "imported": f"import:{bundle_name}"})
    new_events: list[dict[str, Any]] = captures + list(plan.later)
    if notes:
        data = "".join(render(n) for n in notes).encode("utf-8")
        appends.append(Append("notes.md", (b"\n" if notes_need_newline else b"") + data))
        fields["notes"] = [{"header": render_header(n), "text": n.text} for n in notes]
    after = fold([*events, *new_events])
    plan_files = archive.unarchived(after[c["id"]] for c in captures)
    archive_events = [
        {"event": "archive", "time": archive.stamp(moment), "file": file, "ids": [i.id for i in found]}
        for file, found in plan_files.items()
    ]
    new_events += archive_events
    if new_events:
        appends.append(Append(ITEMS_FILE, b"".join(encode_line(e) + b"\n" for e in new_events)))
        fields["events"] = new_events
    if plan_files:
        fsio.ensure_dir(memory_dir / names.ARCHIVE_DIR)
    appends += [Append(f, archive.render_append(memory_dir, f, found)) for f, found in plan_files.items()]
    return fields, appends, notes
