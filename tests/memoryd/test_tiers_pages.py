"""`tiers` in a home whose full listing is larger than a frame (issue 16): one page of notes per reply,
through a real memoryd's sockets and bxctl; and notes.md parsed once, then followed (`NotesView`)."""

from __future__ import annotations

import datetime as dt
import json
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import msgspec
import pytest

from boxmaker.memoryd.files.entries import normalise_newlines
from boxmaker.memoryd.files.notes import Note, parse, render
from boxmaker.memoryd.files.notesview import NotesView
from boxmaker.memoryd.review.tiers import DEFAULT_PAGE
from boxmaker.proto import wire
from boxmaker.proto.frame import MAX_FRAME
from boxmaker.proto.labels import DataClass, Label
from boxmaker.proto.messages import MemoryAdmin, MemoryAdminReply, MemoryCall, ToolRequest, ToolResponse
from conftest import bxctl_ok, spawn_memoryd, stop, wait_until_answers

ROOT = Path(__file__).resolve().parents[2]
#: More notes than a 4 MiB frame holds at about 600 characters each (text and data carry each text).
NOTES = 6_500
ADMIN = Path("run/owner-memory/admin.sock")
BROKER = Path("run/broker-memory/memory.sock")
START = dt.datetime(2026, 3, 2, 8, 0, tzinfo=dt.UTC)


def seed(home: Path, count: int) -> None:
    """`count` notes of about 600 characters, written as memoryd's writer writes them (bench/seed.py)."""
    sys.path.insert(0, str(ROOT / "bench"))
    from seed import note_lines

    memory = home / "memory"
    (memory / "edits").mkdir(parents=True, exist_ok=True)
    notes, events, journal = [], [], []
    notes_at = items_at = 0
    for position in range(count):
        moment = START + dt.timedelta(minutes=position)
        made = note_lines(
            position,
            moment,
            f"mem-{moment:%Y-%m-%d}-{position + 1:03d}",
            f"edit-{moment:%Y-%m-%d}-{position + 1:03d}",
            text=f"Note {position}: " + "the deploy window moved again, " * 19,
            kind="knowledge",
            subject=None,
            scope=None,
            session="chat-seeded",
            notes_at=notes_at,
            items_at=items_at,
        )
        notes.append(made[0])
        events.append(made[1])
        journal.append(made[2])
        notes_at, items_at = notes_at + len(made[0]), items_at + len(made[1])
    (memory / "notes.md").write_bytes(b"".join(notes))
    (memory / "items.jsonl").write_bytes(b"".join(events))
    (memory / "edits" / "2026-03.jsonl").write_bytes(b"".join(journal))


@pytest.fixture
def big(home: Path) -> Iterator[Path]:
    seed(home, NOTES)
    process = spawn_memoryd(home)
    try:
        wait_until_answers(process, home / ADMIN, timeout=60)
        yield home
    finally:
        stop(process)


def admin(home: Path, **args: object) -> MemoryAdminReply:
    reply = wire.call(home / ADMIN, MemoryAdmin(command="tiers", args=dict(args)), timeout=60)
    assert isinstance(reply, MemoryAdminReply)
    return reply


def test_a_listing_larger_than_a_frame_comes_one_page_at_a_time(big: Path) -> None:
    first = admin(big)  # no limit: the default page
    assert len(first.data["notes"]) == DEFAULT_PAGE
    assert first.data["notes_total"] == NOTES
    assert first.data["next_offset"] == DEFAULT_PAGE
    assert f"(notes not shown: {NOTES - DEFAULT_PAGE:,}," in first.text.splitlines()[-1]
    full = admin(big, limit=0)  # as many as one frame holds: cut by bytes, well under the frame
    shown = len(full.data["notes"])
    assert DEFAULT_PAGE < shown < NOTES
    assert full.data["next_offset"] == shown
    framed = msgspec.json.encode({"kind": "memory_admin_reply", "body": msgspec.to_builtins(full)})
    assert MAX_FRAME // 2 < len(framed) < MAX_FRAME
    keys: list[str] = []
    offset: int | None = 0
    while offset is not None:
        page = admin(big, limit=0, offset=offset)
        assert page.data["offset"] == offset
        keys += [row["key"] for row in page.data["notes"]]
        offset = page.data["next_offset"]
    assert len(keys) == len(set(keys)) == NOTES
    last = START + dt.timedelta(minutes=NOTES - 1)
    assert keys[0] == f"note/{NOTES - 1}/{last:%Y-%m-%dT%H:%MZ}"  # none found: newest first
    bxctl_lists_the_first_page_or_every_note(big)
    every = json.loads(bxctl_ok(big, "memory", "items", "--limit", "0", "--json").stdout)  # 10 MB of items
    assert [row["id"] for row in every][:2] == ["mem-2026-03-02-001", "mem-2026-03-02-002"]
    assert len({row["id"] for row in every}) == NOTES
    assert bxctl_ok(big, "memory", "items", "--limit", "0").stdout.count("\nmem-") == NOTES - 1
    newest = json.loads(bxctl_ok(big, "memory", "items", "--limit", "1200", "--json").stdout)  # over a page
    assert [row["id"] for row in newest] == [row["id"] for row in every][-1200:]
    shown = bxctl_ok(big, "memory", "items", "--limit", "1200").stdout
    assert shown.startswith(f"(older items not shown: {NOTES - 1200:,}; --limit 0 lists every one)\n")
    assert shown.count("\nmem-") == 1200
    the_agents_tiers_action_answers_one_page(big)
    bad_paging_arguments_are_refused_with_nothing_listed(big)


def bxctl_lists_the_first_page_or_every_note(big: Path) -> None:
    shown = bxctl_ok(big, "memory", "tiers").stdout
    assert shown.count("[note/") == DEFAULT_PAGE
    assert "--limit 0 lists every one" in shown
    every = json.loads(bxctl_ok(big, "memory", "tiers", "--limit", "0", "--json").stdout)
    assert len({row["key"] for row in every["notes"]}) == NOTES
    assert every["next_offset"] is None
    assert every["label"] == {"class": "private", "untrusted": False}
    assert bxctl_ok(big, "memory", "tiers", "--limit", "0").stdout.count("[note/") == NOTES
    later = json.loads(bxctl_ok(big, "memory", "tiers", "--offset", "6400", "--json").stdout)
    assert [row["key"] for row in later["notes"]][-1] == "note/0/2026-03-02T08:00Z"
    assert len(later["notes"]) == NOTES - 6400


def the_agents_tiers_action_answers_one_page(big: Path) -> None:
    request = ToolRequest(session="chat-tiers", call_id="c1", tool="memory", arguments={"action": "tiers"})
    call = MemoryCall(request=request, taint=DataClass.PRIVATE, untrusted=False)
    reply = wire.call(big / BROKER, call, timeout=60)
    assert isinstance(reply, ToolResponse)
    assert reply.code == "ok"
    assert reply.output.count("[note/") == DEFAULT_PAGE
    arguments = {"action": "tiers", "offset": NOTES - 3, "limit": 10}
    paged = ToolRequest(session="chat-tiers", call_id="c2", tool="memory", arguments=arguments)
    reply = wire.call(big / BROKER, MemoryCall(request=paged, taint=DataClass.PRIVATE, untrusted=False))
    assert isinstance(reply, ToolResponse)
    assert reply.output.count("[note/") == 3


def bad_paging_arguments_are_refused_with_nothing_listed(big: Path) -> None:
    for args in ({"offset": -1}, {"limit": "all"}, {"offset": True}):
        with pytest.raises(wire.PeerError, match="offset"):
            admin(big, **args)
    done = subprocess.run(
        [sys.executable, "-m", "boxmaker.bxctl", "--home", str(big), "memory", "tiers", "--limit", "x"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 2
    assert "Traceback" not in done.stderr


# NotesView -------------------------------------------------------------------------------------------

PRIVATE = Label(DataClass.PRIVATE, False)


def entry(n: int) -> bytes:
    return render(Note("noted", f"2026-03-02T08:{n:02d}Z", "chat-a", "", PRIVATE, f"Note {n}.")).encode()


def view_of(path: Path) -> NotesView:
    return NotesView(path, lambda: normalise_newlines(path.read_bytes().decode("utf-8")))


def test_the_view_parses_once_then_follows_appends(tmp_path: Path) -> None:
    path = tmp_path / "notes.md"
    path.write_bytes(b"Typed by hand.\n\n" + entry(0))
    view = view_of(path)
    assert list(view.notes()) == parse(path.read_text())
    with path.open("ab") as handle:
        handle.write(entry(1) + entry(2))
    assert list(view.notes()) == parse(path.read_text())
    assert [n.position for n in view.notes()] == [0, 1, 2, 3]
    assert view.parses == 1


@pytest.mark.parametrize(
    "change",
    [
        lambda data: data.replace(b"Note 0.", b"Note 9."),  # rewritten in place, same size
        lambda data: data[: len(data) // 2],  # shorter
        lambda data: data + b"more text, no header\n",  # an append that is no entry
        lambda data: data.replace(b"\n", b"\r\n") + entry(5),  # CRLF
        lambda data: b"\xef\xbb\xbf" + data,  # a BOM
    ],
)
def test_any_other_change_is_parsed_again(tmp_path: Path, change: object) -> None:
    path = tmp_path / "notes.md"
    path.write_bytes(entry(0) + entry(1))
    view = view_of(path)
    view.notes()
    assert callable(change)
    time.sleep(0.02)  # a file's mtime moves in clock ticks: a rewrite within one tick is not told apart
    path.write_bytes(change(path.read_bytes()))
    expected = parse(normalise_newlines(path.read_bytes().decode("utf-8")))
    assert list(view.notes()) == expected
