"""The item store kept in memory (issue 16): folded once, then followed; never ahead of the disk, never
behind it; the same fold as reading the whole log (`items.store.fold`) after any change."""

from __future__ import annotations

import datetime as dt
import json
import os
from pathlib import Path

import pytest
from item_helpers import capture, set_status, supersede

from boxmaker.memoryd.files.journal import Append, Change, encode_line
from boxmaker.memoryd.files.names import INTENT
from boxmaker.memoryd.files.notes import count, parse
from boxmaker.memoryd.files.store import Store
from boxmaker.memoryd.items.live import ItemStore
from boxmaker.memoryd.items.store import capture_event, fold, read_events
from boxmaker.memoryd.service import Memoryd
from boxmaker.proto.labels import DataClass, Label
from conftest import Clock


def event(ident: str, text: str = "t", kind: str = "knowledge", subject: str | None = None) -> bytes:
    made = capture_event(
        ident=ident,
        time=f"{ident[4:14]}T10:00:00Z",
        kind=kind,
        subject=subject,
        scope=None,
        confidence=None,
        text=text,
        label=Label(DataClass.PRIVATE, False),
        source="s",
        session="chat-a",
        call="c",
        note=f"note/{int(ident[15:])}/2026-09-24T10:00Z",
    )
    return encode_line(made) + b"\n"


def same_as_disk(store: ItemStore) -> None:
    assert dict(store.items()) == fold(read_events(store.path))


def test_appends_are_followed_without_reading_the_log_again(tmp_path: Path) -> None:
    store = ItemStore(tmp_path)
    assert store.items() == {}
    path = tmp_path / "items.jsonl"
    for n in range(1, 6):
        with path.open("ab") as handle:
            handle.write(event(f"mem-2026-09-24-{n:03d}"))
        same_as_disk(store)
    assert store.refolds == 1
    assert store.next_id(dt.date(2026, 9, 24)) == "mem-2026-09-24-006"
    assert store.next_id(dt.date(2026, 9, 25)) == "mem-2026-09-25-001"
    found = store.current().by_note("note/3/2026-09-24T10:00Z")
    assert found is not None
    assert found.id == "mem-2026-09-24-003"


def test_a_torn_tail_is_not_an_event_until_its_newline_arrives(tmp_path: Path) -> None:
    store = ItemStore(tmp_path)
    line = event("mem-2026-09-24-001")
    (tmp_path / "items.jsonl").write_bytes(line[:20])
    assert store.items() == {}
    with (tmp_path / "items.jsonl").open("ab") as handle:
        handle.write(line[20:])
    assert list(store.items()) == ["mem-2026-09-24-001"]


@pytest.mark.parametrize("how", ["replaced", "shrunk", "rewritten in place"])
def test_a_log_changed_underneath_is_folded_again(tmp_path: Path, how: str) -> None:
    store = ItemStore(tmp_path)
    path = tmp_path / "items.jsonl"
    path.write_bytes(event("mem-2026-09-24-001", "one") + event("mem-2026-09-24-002", "two"))
    same_as_disk(store)
    if how == "replaced":
        path.with_name("new").write_bytes(event("mem-2026-09-24-001", "erased") + event("mem-2026-09-24-002"))
        os.replace(path.with_name("new"), path)
    elif how == "shrunk":
        path.write_bytes(event("mem-2026-09-24-001", "one"))
    else:
        with path.open("r+b") as handle:  # same inode, same size, other bytes, a later mtime
            data = handle.read().replace(b'"one"', b'"uno"')
            handle.seek(0)
            handle.write(data)
        os.utime(path, ns=(path.stat().st_atime_ns, path.stat().st_mtime_ns + 10**9))
    same_as_disk(store)
    assert store.refolds == 2


def test_readers_keep_the_fold_while_a_commit_is_under_way(tmp_path: Path) -> None:
    store = ItemStore(tmp_path)
    path = tmp_path / "items.jsonl"
    path.write_bytes(event("mem-2026-09-24-001"))
    same_as_disk(store)
    (tmp_path / INTENT).write_text("{}")  # a commit has begun: its appends are not an answer yet
    with path.open("ab") as handle:
        handle.write(event("mem-2026-09-24-002"))
    assert list(store.items()) == ["mem-2026-09-24-001"]
    assert store.next_id(dt.date(2026, 9, 24)) == "mem-2026-09-24-003"  # the writer counts it
    (tmp_path / INTENT).unlink()
    same_as_disk(store)


def test_a_failed_commit_leaves_the_fold_equal_to_the_disk(
    service: Memoryd, clock: Clock, monkeypatch: pytest.MonkeyPatch
) -> None:
    memory = service.memory
    kept = capture(service, "Kept.")
    entry = {"session": "owner", "call": "c", "action": "status", "file": "items.jsonl"}
    entry |= {"where": "items.jsonl", "before": [], "after": [], "untrusted": False}
    status = {"event": "status", "time": "2026-09-24T10:00:00Z", "id": kept, "status": "stale"}
    real = os.fsync

    def full(fd: int) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "fsync", full)
    with memory.writer.lock, pytest.raises(OSError, match="No space"):
        memory.journal.commit(Change(entry, [Append("items.jsonl", encode_line(status) + b"\n")]))
    monkeypatch.setattr(os, "fsync", real)
    assert memory.items.items()[kept].status == "active"
    (memory.store.dir / INTENT).unlink(missing_ok=True)  # as the next start leaves it
    same_as_disk(memory.items)


def test_item_operations_and_the_service_keep_the_fold_equal_to_the_disk(
    service: Memoryd, clock: Clock
) -> None:
    refolds = service.memory.items.refolds
    old = capture(service, "NAS at 10.0.0.7.", kind="state", subject="nas:ip")
    clock.advance(hours=1)
    new = capture(service, "NAS at 10.0.0.8.", kind="state", subject="nas:ip")
    assert [i.id for i in service.memory.items.current().active_of("nas:ip")] == [old, new]
    supersede(service, old, new)
    assert [i.id for i in service.memory.items.current().active_of("nas:ip")] == [new]
    set_status(service, new, "pending-cleanup")
    assert service.memory.items.current().active_of("nas:ip") == []
    same_as_disk(service.memory.items)
    assert service.memory.items.refolds == refolds
    assert json.loads((service.memory.store.dir / ".projections.json").read_text())["items"][2] > 0


@pytest.mark.parametrize(
    "text",
    [
        "",
        "typed before any header\n",
        "§ noted 2026-09-24T21:02Z in session chat-a · private\nbody\n\n§ not a header\n",
        "x\n§ moved 2026-09-24T21:02Z from memory.md in session s\nb\n"
        "§ noted 2026-09-24T21:02Z in session c\n",
        "\n\n§ noted 2026-09-24T21:02Z in session chat-a · private · mem-2026-09-24-001 · knowledge\n",
    ],
)
def test_notes_are_counted_as_parsed(text: str, tmp_path: Path) -> None:
    assert count(text) == len(parse(text))
    store = Store(tmp_path, tmp_path / "soul.md")
    store.notes_path.write_text(text)
    assert store.count_notes() == len(parse(text))
    store.notes_path.write_bytes(text.replace("\n", "\r\n").encode())
    if "\n" in text:
        assert store.count_notes() is None  # left to Store.read_notes


def test_the_owners_listing_shows_the_newest_items_when_limited(service: Memoryd, clock: Clock) -> None:
    from boxmaker.proto.messages import MemoryAdmin

    ids = [capture(service, f"Item {n}.") for n in range(5)]
    reply = service.handle("memory_admin", MemoryAdmin(command="items", args={"limit": 2}))
    assert reply.text.splitlines()[0] == "(older items not shown: 3; --limit 0 lists every one)"
    assert [row["id"] for row in reply.data] == ids[-2:]
    every = service.handle("memory_admin", MemoryAdmin(command="items", args={"limit": 0}))
    assert [row["id"] for row in every.data] == ids


def test_reindex_folds_the_log_again(service: Memoryd, clock: Clock) -> None:
    from boxmaker.proto.messages import Reindex

    ident = capture(service, "Before the edit.")
    path = service.memory.items.path
    info = path.stat()
    path.write_bytes(path.read_bytes().replace(b"Before the edit.", b"Edited by hand!!"))
    os.utime(path, ns=(info.st_atime_ns, info.st_mtime_ns))  # an edit no stat can see
    assert service.memory.items.items()[ident].text == "Before the edit."
    service.handle("reindex", Reindex())
    assert service.memory.items.items()[ident].text == "Edited by hand!!"
    assert "Edited by hand" in (service.config.layout.memory / "topics" / "lessons.md").read_text()
