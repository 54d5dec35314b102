"""The home, ids, session-log records, durable files and config reading (DESIGN 2, 4, 7, 10.1-10.4)."""

from __future__ import annotations

import datetime as dt
import json
import os
from pathlib import Path

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st

from boxmaker.proto import fsio, ids, records
from boxmaker.proto.errors import ConfigError, InvalidId
from boxmaker.proto.home import SYSTEM_HOME, Layout, ensure_home, resolve_home
from boxmaker.proto.labels import DataClass, Label
from boxmaker.proto.settings import convert_config, load_toml


def test_home_resolution_order(tmp_path: Path) -> None:
    env = {"BOXMAKER_HOME": "/env/home", "HOME": "/root-home"}
    assert resolve_home("/cli", "/config", env) == Path("/cli")
    assert resolve_home(None, "/config", env) == Path("/config")
    assert resolve_home(None, None, env) == Path("/env/home")
    fallback = resolve_home(None, None, {"HOME": str(tmp_path)})
    if os.geteuid() == 0 or os.access(SYSTEM_HOME, os.W_OK):
        assert fallback == SYSTEM_HOME
    else:
        assert fallback == tmp_path / ".local" / "share" / "boxmaker"


def test_home_is_created_0700(tmp_path: Path) -> None:
    home = ensure_home(tmp_path / "a" / "home")
    assert home.stat().st_mode & 0o777 == 0o700


def test_layout_socket_paths() -> None:
    layout = Layout(Path("/h"))
    assert layout.memory_loop_socket == Path("/h/run/loop-memory/memory.sock")
    assert layout.memory_broker_socket == Path("/h/run/broker-memory/memory.sock")
    assert layout.memory_admin_socket == Path("/h/run/owner-memory/admin.sock")


@pytest.mark.parametrize("good", ["a", "chat-abc", "heartbeat", "job-tier-t1790000000", "x" * 64, "0-"])
def test_session_ids_accepted(good: str) -> None:
    assert ids.session_id(good) == good


@pytest.mark.parametrize("bad", ["", "-a", "A", "a/b", "../x", "a b", "x" * 65, "ok\n", "é"])
def test_session_ids_refused(bad: str) -> None:
    with pytest.raises(InvalidId):
        ids.session_id(bad)


def test_new_chat_session_id() -> None:
    made = {ids.new_chat_session_id() for _ in range(50)}
    assert len(made) == 50
    for value in made:
        assert ids.is_session_id(value)
        assert len(value) == 25


def test_edit_and_pending_ids() -> None:
    day = dt.date(2026, 9, 24)
    assert ids.edit_id(day, 3) == "2026-09-24-0003"
    assert ids.pending_id(day, 12) == "p-2026-09-24-0012"
    assert ids.parse_edit_id("2026-09-24-0003") == (day, 3)
    assert ids.parse_pending_id("p-2026-09-24-0012") == (day, 12)
    for bad in ("2026-13-01-0001", "2026-09-24-01", "p-2026-09-24-0001", "x"):
        with pytest.raises(InvalidId):
            ids.parse_edit_id(bad)


def test_records_round_trip_and_wire_names() -> None:
    tool_result = records.ToolResult(
        time="2026-09-24T21:02:07Z",
        call="http_fetch",
        tool_call_id="t1",
        content="x",
        data_class=DataClass.PUBLIC,
        untrusted=True,
    )
    line = records.encode_record(tool_result)
    assert json.loads(line) == {
        "type": "tool_result",
        "time": "2026-09-24T21:02:07Z",
        "call": "http_fetch",
        "tool_call_id": "t1",
        "content": "x",
        "class": "public",
        "untrusted": True,
    }
    assert records.decode_record(line) == tool_result
    assert tool_result.label == Label(DataClass.PUBLIC, True)


@pytest.mark.parametrize(
    "line",
    [
        b'{"type":"user","content":"x"}',
        b'{"type":"user","time":"yesterday","content":"x"}',
        b'{"type":"user","time":"2026-09-24T21:02:07Z","content":3}',
        b'{"type":"mystery","time":"2026-09-24T21:02:07Z"}',
        b'{"type":"user","time":"2026-09-24T21:02:07Z","content":"x","extra":1}',
        b'{"type":"session_start","time":"2026-09-24T21:02:07Z","epoch":0,"slot":0,"baseline":"md5:x"}',
        b"not json",
    ],
)
def test_bad_records_are_refused(line: bytes) -> None:
    with pytest.raises(ValueError):  # noqa: PT011
        records.decode_record(line)


def test_a_record_with_a_lone_surrogate_escape_still_decodes() -> None:
    record = records.decode_record(b'{"type":"user","time":"2026-09-24T21:02:07Z","content":"a\\udc00"}')
    assert isinstance(record, records.User)
    assert record.content == "a\udc00"


def test_read_log_counts_only_complete_lines(tmp_path: Path) -> None:
    path = tmp_path / "0.jsonl"
    whole = b'{"type":"user","time":"2026-09-24T21:02:07Z","content":"a"}\n'
    path.write_bytes(whole + b'{"type":"user","ti')
    found, offset = records.read_log(path)
    assert len(found) == 1
    assert offset == len(whole)
    path.write_bytes(whole + b"garbage\n")
    with pytest.raises(records.RecordError) as raised:
        records.read_log(path)
    assert "line 2" in str(raised.value)


def test_time_format() -> None:
    moment = dt.datetime(2026, 9, 24, 23, 2, 7, tzinfo=dt.timezone(dt.timedelta(hours=2)))
    assert records.format_time(moment) == "2026-09-24T21:02:07Z"
    assert records.parse_time("2026-09-24T21:02:07Z") == moment


def test_atomic_write_and_modes(tmp_path: Path) -> None:
    path = tmp_path / "f"
    fsio.atomic_write(path, b"one")
    fsio.atomic_write(path, b"two")
    assert path.read_bytes() == b"two"
    assert path.stat().st_mode & 0o777 == 0o600
    assert [p.name for p in tmp_path.iterdir()] == ["f"]


def test_ensure_file_never_overwrites(tmp_path: Path) -> None:
    path = tmp_path / "f"
    assert fsio.ensure_file(path, b"first")
    assert not fsio.ensure_file(path, b"second")
    assert path.read_bytes() == b"first"


def test_torn_tail_is_set_aside(tmp_path: Path) -> None:
    path = tmp_path / "j.jsonl"
    fsio.append_line(path, b'{"a":1}')
    with path.open("ab") as handle:
        handle.write(b'{"a":')
    assert fsio.set_aside_torn_tail(path) == b'{"a":'
    assert path.read_bytes() == b'{"a":1}\n'
    assert (tmp_path / "j.jsonl.torn").read_bytes() == b'{"a":\n'
    assert fsio.set_aside_torn_tail(path) == b""


def test_append_line_refuses_newlines(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="newline"):
        fsio.append_line(tmp_path / "x", b"a\nb")


def test_lock_is_exclusive(tmp_path: Path) -> None:
    first = fsio.FileLock(tmp_path / ".lock")
    first.acquire()
    second = fsio.FileLock(tmp_path / ".lock")
    with pytest.raises(fsio.LockHeld) as raised:
        second.acquire()
    assert f"pid {os.getpid()}" in str(raised.value)
    first.release()
    second.acquire()
    second.release()


class _Inner(msgspec.Struct, forbid_unknown_fields=True):
    max_class: DataClass = DataClass.PRIVATE


class _Config(msgspec.Struct, forbid_unknown_fields=True):
    index: _Inner = msgspec.field(default_factory=_Inner)


def test_config_errors_name_the_key(tmp_path: Path) -> None:
    path = tmp_path / "c.toml"
    path.write_text("[index]\nmax_clas = 'private'\n")
    with pytest.raises(ConfigError) as raised:
        convert_config(load_toml(path), _Config, str(path))
    assert "unknown key 'max_clas' in [index]; remove it or fix its spelling" in str(raised.value)
    path.write_text("[index]\nmax_class = 'top'\n")
    with pytest.raises(ConfigError) as raised:
        convert_config(load_toml(path), _Config, str(path))
    assert "[index] max_class" in str(raised.value)
    path.write_text("[index\n")
    with pytest.raises(ConfigError, match="not valid TOML"):
        load_toml(path)
    with pytest.raises(ConfigError, match="cannot read"):
        load_toml(tmp_path / "missing.toml")


@given(st.lists(st.binary(max_size=30).filter(lambda b: b"\n" not in b), max_size=6), st.binary(max_size=10))
def test_complete_lines(lines: list[bytes], tail: bytes) -> None:
    data = b"".join(line + b"\n" for line in lines) + tail.replace(b"\n", b"")
    found, torn = fsio.complete_lines(data)
    assert found == lines
    assert torn == tail.replace(b"\n", b"")


def test_a_time_of_the_right_form_must_still_be_a_real_time() -> None:
    with pytest.raises(ValueError, match="not a real date and time"):
        records.decode_record(b'{"type":"user","time":"2026-13-45T99:99:99Z","content":"x"}')


def test_atomic_write_chunks_syncs_as_it_goes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    synced: list[int] = []
    real = os.fdatasync
    monkeypatch.setattr(os, "fdatasync", lambda fd: (synced.append(os.fstat(fd).st_size), real(fd)))
    path = tmp_path / "page.md"
    fsio.atomic_write_chunks(path, (b"x" * 400 for _ in range(7)), sync_every=1000)
    assert path.read_bytes() == b"x" * 2800
    assert synced == [1200, 2400]  # each time 1000 more bytes were written (the rest: the final fsync)
    assert [p.name for p in tmp_path.iterdir()] == ["page.md"]
