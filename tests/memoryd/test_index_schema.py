"""The index's schema version (issue 16): an index file of another version is built again at start."""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path

import pytest

from boxmaker.memoryd import tool as memory_tool
from boxmaker.memoryd.config import load
from boxmaker.memoryd.index.filecare import compact
from boxmaker.memoryd.index.schema import SCHEMA_VERSION, connect, migrate, optimize
from boxmaker.memoryd.service import Memoryd
from boxmaker.proto.labels import DataClass
from boxmaker.proto.messages import MemoryAdmin, MemoryCall, ToolRequest
from conftest import Clock, record, start, write_log


def recall(service: Memoryd, query: str) -> str:
    request = ToolRequest(session="chat-asker", call_id="c1", tool="recall", arguments={"query": query})
    return memory_tool.call(
        service.memory, MemoryCall(request=request, taint=DataClass.PRIVATE, untrusted=False)
    ).output


def opened(home: Path, clock: Clock) -> Memoryd:
    memory = Memoryd(load(None, str(home)), now=clock.now)
    memory.open()
    assert memory.memory.index.wait_ready(60)
    return memory


def version_of(path: Path) -> int:
    conn = sqlite3.connect(path)
    try:
        return int(conn.execute("PRAGMA user_version").fetchone()[0])
    finally:
        conn.close()


@pytest.mark.parametrize("version", [0, SCHEMA_VERSION + 7])
def test_an_index_of_another_version_is_built_again_at_start(
    home: Path, clock: Clock, caplog: pytest.LogCaptureFixture, version: int
) -> None:
    write_log(home, "chat-schema", [start(), record("user", content="the quokka moved to Perth")])
    first = opened(home, clock)
    path = first.memory.index.path
    first.close()
    assert version_of(path) == SCHEMA_VERSION
    conn = sqlite3.connect(path)
    conn.execute("DROP TABLE hits")  # what an older layout might lack: never read as it is
    conn.execute("CREATE TABLE hits(old TEXT)")
    conn.execute(f"PRAGMA user_version = {version}")
    conn.commit()
    conn.close()
    again = opened(home, clock)
    try:
        assert "quokka moved to Perth" in recall(again, "quokka")
        status = again.handle("memory_admin", MemoryAdmin(command="status"))
        assert status.data["index"]["records"] == 1
        assert status.data["index_rebuild"] is None
    finally:
        again.close()
    assert version_of(path) == SCHEMA_VERSION
    said = [r.getMessage() for r in caplog.records if "schema version" in r.getMessage()]
    assert said
    assert f"schema version {version}" in said[0]
    assert "building it again" in said[0]
    assert not list(path.parent.glob("*.damaged-*"))  # not damage: nothing moved aside


def test_a_new_index_gets_the_version(home: Path, clock: Clock) -> None:
    service = opened(home, clock)
    try:
        assert version_of(service.memory.index.path) == SCHEMA_VERSION
        assert service.memory.index.building() is None
    finally:
        service.close()


def test_a_hit_is_read_back_from_its_log_line(
    home: Path, clock: Clock, caplog: pytest.LogCaptureFixture
) -> None:
    """Session rows keep integers only: a hit's text comes from its log line; a log changed underneath
    (the row's line is no longer its record) gives no hit and a warning, and a reindex mends it."""
    path = write_log(
        home,
        "chat-readback",
        [
            start(),
            record("user", content="the wombat sleeps", speaker="Ann"),
            record(
                "assistant",
                content="",
                tool_calls=[
                    {"id": "t1", "name": "http_fetch", "arguments": '{"url":"https://wombat.example"}'}
                ],
            ),
        ],
    )
    service = opened(home, clock)
    try:
        out = recall(service, "wombat")
        assert (
            "[1] memory · session chat-read…, 2026-09-20 14:02 UTC, Ann said · private\nthe wombat sleeps"
            in out
        )
        assert 'the assistant called · private\nhttp_fetch {"url":"https://wombat.example"}' in out
        path.write_bytes(path.read_bytes().replace(b"wombat sleeps", b"koala naps!!!"))
        assert "wombat sleeps" not in recall(service, "wombat")
        assert "koala" not in recall(service, "wombat")
        assert any("memory-index-stale" in r.getMessage() for r in caplog.records)
        deadline = time.monotonic() + 30  # the stale row starts a rebuild in the background
        while "koala naps" not in recall(service, "koala") and time.monotonic() < deadline:
            time.sleep(0.05)
        assert "Ann said · private\nthe koala naps!!!" in recall(service, "koala")
        path.unlink()
        assert recall(service, "wombat") == '(no matches for "wombat")'
    finally:
        service.close()


def test_a_copy_that_fails_leaves_the_build_going_with_its_free_pages(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """`filecare.compact` of a built file: refused (a statement in progress), the build keeps its file
    and connection, free pages and all; once it runs, the copy (0600) replaces the file without them."""
    path = tmp_path / "index" / "memory.sqlite3.new"
    path.parent.mkdir()
    conn = connect(path, bulk=True)
    migrate(conn)
    conn.executemany(
        "INSERT INTO hits(rowid, text, ctx, time) VALUES (?, ?, '', '')",
        [(n, f"a quokka {n} " + "word " * 200) for n in range(1, 300)],
    )
    optimize(conn)
    assert conn.execute("PRAGMA freelist_count").fetchone()[0] > 0
    reading = conn.execute("SELECT rowid FROM hits WHERE hits MATCH 'quokka'")
    assert reading.fetchone()  # a statement still in progress: SQLite refuses to VACUUM meanwhile
    assert not compact(conn, path)
    assert any("copying it without them failed" in r.getMessage() for r in caplog.records)
    assert sorted(p.name for p in path.parent.iterdir()) == ["memory.sqlite3.new"]
    reading.close()
    assert len(conn.execute("SELECT rowid FROM hits WHERE hits MATCH 'quokka'").fetchall()) == 299
    assert compact(conn, path)  # and once nothing is in progress, it runs (closing `conn`)
    assert sorted(p.name for p in path.parent.iterdir()) == ["memory.sqlite3.new"]
    assert path.stat().st_mode & 0o777 == 0o600
    conn = connect(path)
    assert conn.execute("PRAGMA freelist_count").fetchone()[0] == 0
    assert len(conn.execute("SELECT rowid FROM hits WHERE hits MATCH 'quokka'").fetchall()) == 299
    conn.close()
