"""The live index's merges and checkpoints in the gaps between requests (issue 16, `index.upkeep`)."""

from __future__ import annotations

import os
import signal
import sqlite3
import time
from pathlib import Path
from typing import Any

import pytest

from boxmaker.memoryd import tool as memory_tool
from boxmaker.memoryd.config import load
from boxmaker.memoryd.index.schema import LIVE_AUTOMERGE, WAL_CAP, connect, migrate
from boxmaker.memoryd.service import Memoryd
from boxmaker.proto import wire
from boxmaker.proto.labels import DataClass
from boxmaker.proto.messages import MemoryCall, SessionUpdated, ToolRequest, ToolResponse
from conftest import Clock, record, spawn_memoryd, start, stop, wait_until_answers, write_log


def call(service: Memoryd, arguments: dict[str, Any], tool: str = "memory") -> ToolResponse:
    request = ToolRequest(session="chat-upkeep", call_id="c1", tool=tool, arguments=arguments)
    return memory_tool.call(
        service.memory, MemoryCall(request=request, taint=DataClass.PRIVATE, untrusted=False)
    )


def opened(home: Path, clock: Clock) -> Memoryd:
    service = Memoryd(load(None, str(home)), now=clock.now)
    service.open()
    assert service.memory.index.wait_ready(60)
    return service


def settle(service: Memoryd, timeout: float = 20.0) -> None:
    """Wait until the upkeep has done what was due."""
    deadline = time.monotonic() + timeout
    while not service.memory.index.upkeep.idle():
        assert time.monotonic() < deadline, "the upkeep never caught up"
        time.sleep(0.01)


def fts5_check(path: Path) -> tuple[int, str]:
    """The notes the file holds, and its FTS5 integrity check (raises when the table is damaged)."""
    conn = sqlite3.connect(path)
    try:
        conn.execute("INSERT INTO hits(hits) VALUES ('integrity-check')")
        notes = int(conn.execute("SELECT count(*) FROM notes").fetchone()[0])
        return notes, str(conn.execute("PRAGMA quick_check").fetchone()[0])
    finally:
        conn.close()


def test_merges_and_checkpoints_wait_for_a_gap_between_requests(home: Path, clock: Clock) -> None:
    service = opened(home, clock)
    upkeep = service.memory.index.upkeep
    try:
        settle(service)
        merges, checkpoints = upkeep.merges, upkeep.checkpoints
        with service.memory.pages.requests.serving():  # a request is being answered throughout
            for n in range(40):  # 40 segments' worth of notes: FTS5 would merge inside some of them
                assert (
                    call(service, {"action": "note", "text": f"Heron count {n} at the lake."}).code == "noted"
                )
            time.sleep(0.3)
            assert (upkeep.merges, upkeep.checkpoints) == (merges, checkpoints)
            assert not upkeep.idle()
        settle(service)
        assert upkeep.merges > merges
        assert upkeep.checkpoints > checkpoints
        out = call(service, {"query": "heron 39", "k": 5}, tool="recall").output
        assert "Heron count 39 at the lake." in out
    finally:
        service.close()
    assert fts5_check(service.memory.index.path) == (40, "ok")


def test_close_does_not_wait_for_a_gap_that_never_comes(home: Path, clock: Clock) -> None:
    service = opened(home, clock)
    with service.memory.pages.requests.serving():
        assert (
            call(service, {"action": "note", "text": "Written while a request never ends."}).code == "noted"
        )
        began = time.monotonic()
        service.close()
        assert time.monotonic() - began < 5


def test_a_live_file_never_merges_or_checkpoints_far_inside_a_write(home: Path, clock: Clock) -> None:
    index_dir = home / "index"
    index_dir.mkdir(parents=True, mode=0o700)
    old = connect(index_dir / "memory.sqlite3")
    migrate(old)
    old.execute("INSERT INTO hits(hits, rank) VALUES ('automerge', 4)")  # a file made before upkeep
    old.close()
    service = opened(home, clock)
    try:
        conn = service.memory.index.db.conn
        row = conn.execute("SELECT v FROM hits_config WHERE k = 'automerge'").fetchone()
        assert row[0] == LIVE_AUTOMERGE == 0
        assert conn.execute("PRAGMA wal_autocheckpoint").fetchone()[0] == WAL_CAP
    finally:
        service.close()


@pytest.mark.parametrize("folder", ["odd?name#x%20y&z", os.fsdecode(b"not-utf8-\xfe\xff")])
def test_a_home_whose_path_has_uri_characters_or_is_not_utf8(
    tmp_path: Path, clock: Clock, folder: str
) -> None:
    home = tmp_path / folder / "home"
    write_log(home, "chat-odd", [start(), record("user", content="The heron fishes at dawn.")])
    service = opened(home, clock)
    try:
        assert call(service, {"action": "note", "text": "The kestrel nests on the tower."}).code == "noted"
        write_log(home, "chat-odd", [record("user", content="The heron came back at dusk.")])
        service.handle("session_updated", SessionUpdated(session="chat-odd"))  # a catch-up of the log
        settle(service)
        assert service.memory.index.upkeep.checkpoints > 0
        assert "kestrel nests" in call(service, {"query": "kestrel", "k": 5}, tool="recall").output
        found = call(service, {"query": "heron", "k": 5}, tool="recall").output
        assert "fishes at dawn" in found
        assert "back at dusk" in found
        service.memory.index.rebuild()  # a build from nothing, its copy without free pages made there too
        assert "back at dusk" in call(service, {"query": "heron", "k": 5}, tool="recall").output
    finally:
        service.close()


def note_over_socket(home: Path, n: int) -> bool:
    request = ToolRequest(
        session="chat-upkeep",
        call_id=f"c{n}",
        tool="memory",
        arguments={"action": "note", "text": f"Plover sighting {n} on the beach."},
    )
    try:
        reply = wire.call(
            home / "run" / "broker-memory" / "memory.sock",
            MemoryCall(request=request, taint=DataClass.PRIVATE, untrusted=False),
            timeout=10,
        )
    except wire.PeerError:
        return False
    return isinstance(reply, ToolResponse) and reply.code == "noted"


def test_kill_9_while_the_upkeep_works_leaves_an_index_of_every_note(home: Path) -> None:
    admin = home / "run" / "owner-memory" / "admin.sock"
    written = 0
    for pause in (0.0, 0.01, 0.05):  # killed in a run of writes, and in the gaps after some
        process = spawn_memoryd(home)
        wait_until_answers(process, admin)
        for _ in range(30):
            written += note_over_socket(home, written)
            time.sleep(pause)
        stop(process, signal.SIGKILL)
    process = spawn_memoryd(home)
    try:
        wait_until_answers(process, admin)
        deadline = time.monotonic() + 30
        while True:  # the restarted index catches up with notes.md in the background
            conn = sqlite3.connect(home / "index" / "memory.sqlite3")
            try:
                held = conn.execute("SELECT count(*) FROM notes").fetchone()[0]
            finally:
                conn.close()
            if held >= written or time.monotonic() > deadline:
                break
            time.sleep(0.05)
    finally:
        stop(process)
    assert written == 90
    assert fts5_check(home / "index" / "memory.sqlite3") == (written, "ok")
    assert not list((home / "index").glob("*.damaged-*"))
