"""A write that meets a full disk (issue 14, defects 2 and 3), in process: the disk is made full for one
file at a time by failing its write with ENOSPC after half of the bytes went through.

- before the journal commit is durable: the answer is ``refused:disk-full`` ("nothing was written"),
  never an error, and every file under memory/ is byte for byte what it was (the half append cut back,
  no intent left);
- after it (the index, the projections): the answer is the write's own, the note is indexed again
  before the next recall, and status says the index is behind meanwhile.

The real thing, a full tmpfs under a running memoryd, is in tests/faults/test_fault_disk_full.py.
"""

from __future__ import annotations

import errno
import os
import sqlite3
from pathlib import Path

import pytest

from boxmaker.memoryd.index.db import IndexDB
from boxmaker.memoryd.service import Memoryd
from boxmaker.proto import fsio
from boxmaker.proto.labels import DataClass
from boxmaker.proto.messages import MemoryAdmin, MemoryAdminReply, MemoryCall, ToolRequest, ToolResponse

FULL = "refused (disk-full): the disk that holds memory is full; nothing was written."


def call(service: Memoryd, arguments: dict[str, object], tool: str = "memory") -> ToolResponse:
    request = ToolRequest(session="chat-full", call_id="c1", tool=tool, arguments=arguments)
    reply = service.handle(
        "memory_call", MemoryCall(request=request, taint=DataClass.PRIVATE, untrusted=False)
    )
    assert isinstance(reply, ToolResponse)
    return reply


def status(service: Memoryd) -> MemoryAdminReply:
    reply = service.handle("memory_admin", MemoryAdmin(command="status"))
    assert isinstance(reply, MemoryAdminReply)
    return reply


def files(home: Path) -> dict[str, bytes]:
    memory = home / "memory"
    return {
        str(p.relative_to(memory)): p.read_bytes()
        for p in sorted(memory.rglob("*"))
        if p.is_file() and p.name != ".lock" and "recalls" not in p.parts
    }


@pytest.fixture
def full(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Parts of file paths whose next write fails with ENOSPC after half its bytes (append one)."""
    names: list[str] = []
    real = fsio._write_all

    def write_all(fd: int, data: bytes) -> None:
        target = os.readlink(f"/proc/self/fd/{fd}")
        hit = next((n for n in names if n in target), None)
        if hit is None:
            real(fd, data)
            return
        names.remove(hit)
        real(fd, data[: len(data) // 2])
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), target)

    monkeypatch.setattr(fsio, "_write_all", write_all)
    return names


@pytest.mark.parametrize(
    ("arguments", "failing"),
    [
        ({"action": "note", "text": "the ferry leaves at nine"}, ".intent.json.tmp-"),
        ({"action": "note", "text": "the ferry leaves at nine"}, ".jsonl"),
        ({"action": "note", "text": "the ferry leaves at nine"}, "notes.md"),
        ({"action": "note", "text": "the ferry leaves at nine"}, "items.jsonl"),
        ({"action": "add", "file": "memory", "text": "likes ferries"}, ".memory.md.tmp-"),
        ({"action": "add", "file": "user", "text": "lives by the quay"}, "user.md.tmp-"),
    ],
    ids=["intent", "journal", "notes.md", "items.jsonl", "memory.md", "user.md"],
)
def test_a_write_on_a_full_disk_is_refused_and_every_file_stays_as_it_was(
    home: Path, service: Memoryd, full: list[str], arguments: dict[str, object], failing: str
) -> None:
    assert call(service, {"action": "note", "text": "a first note"}).code == "noted"
    before = files(home)
    full.append(failing)
    reply = call(service, arguments)
    assert full == []  # the write did reach the file that failed
    assert reply.code == "refused:disk-full", reply
    assert reply.output.startswith(FULL)
    assert files(home) == before
    again = call(service, arguments)  # space came back: the same call succeeds, once
    assert again.code in ("ok", "noted"), again
    service.close()
    reopened = Memoryd(service.config)
    reopened.open()
    try:
        assert reopened.memory.checkpoints.findings == []
    finally:
        reopened.close()


def test_an_owner_write_on_a_full_disk_is_refused_too(home: Path, service: Memoryd, full: list[str]) -> None:
    before = files(home)
    full.append("notes.md")
    reply = service.handle("memory_admin", MemoryAdmin(command="note", arg="the owner's note"))
    assert isinstance(reply, MemoryAdminReply)
    assert reply.data["code"] == "refused:disk-full", reply
    assert files(home) == before


def test_an_index_that_cannot_take_a_committed_note_does_not_fail_the_write(
    home: Path, service: Memoryd, monkeypatch: pytest.MonkeyPatch
) -> None:
    def no_room(self: IndexDB, *args: object, **kwargs: object) -> None:
        raise sqlite3.OperationalError("database or disk is full")

    monkeypatch.setattr(IndexDB, "add_notes", no_room)
    reply = call(service, {"action": "note", "text": "the lighthouse keeper is called Ada"})
    assert reply.code == "noted", reply  # committed: the write's own answer
    shown = status(service)
    assert shown.data["index_behind"] == "database or disk is full"
    assert "INDEX BEHIND" in shown.text
    assert call(service, {"action": "note", "text": "a second note while the index is full"}).code == "noted"
    monkeypatch.undo()
    recalled = call(service, {"query": "lighthouse keeper"}, tool="recall")
    assert recalled.code == "ok"
    assert "Ada" in recalled.output  # indexed again before the recall answered
    assert status(service).data["index_behind"] is None


def test_a_recall_on_a_full_disk_still_answers(home: Path, service: Memoryd, full: list[str]) -> None:
    assert call(service, {"action": "note", "text": "the tide turns at noon"}).code == "noted"
    full.append("/recalls/")  # the recall log (recalls/YYYY-MM.jsonl)
    reply = call(service, {"query": "tide"}, tool="recall")
    assert reply.code == "ok", reply
    assert "tide turns at noon" in reply.output
    assert "(retrieval " not in reply.output  # no record could be written
