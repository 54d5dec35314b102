"""memoryd as a real process: sockets, permissions, bad frames, one writer per home, signals.

M5a sections 7 and 13; DESIGN 7 and 10.1.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from boxmaker.proto import frame, messages, wire
from boxmaker.proto.errors import PeerError
from boxmaker.proto.labels import DataClass
from boxmaker.proto.messages import (
    Error,
    MemoryAdmin,
    MemoryAdminReply,
    MemoryBlock,
    MemoryBlockReply,
    MemoryCall,
    SessionUpdated,
    ToolRequest,
    ToolResponse,
)
from conftest import spawn_memoryd, stop, wait_until_answers


def sockets(home: Path) -> dict[str, Path]:
    run = home / "run"
    return {
        "loop": run / "loop-memory" / "memory.sock",
        "broker": run / "broker-memory" / "memory.sock",
        "admin": run / "owner-memory" / "admin.sock",
    }


def raw_exchange(path: Path, data: bytes) -> messages.Body:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
        conn.settimeout(10)
        conn.connect(str(path))
        conn.sendall(data)
        payload = frame.recv_frame(conn)
    return messages.decode(payload)[1]


@pytest.mark.usefixtures("daemon")
def test_three_sockets_with_their_permissions(home: Path) -> None:
    for path in sockets(home).values():
        assert path.is_socket()
        assert path.stat().st_mode & 0o777 == 0o600
        assert path.parent.stat().st_mode & 0o777 == 0o700
    for name in ("memory", "index", "run"):
        assert (home / name).stat().st_mode & 0o777 == 0o700
    for name in ("soul.md", "memory.md", "user.md", "notes.md"):
        assert (home / "memory" / name).stat().st_mode & 0o777 == 0o600
    assert (home / "index" / "memory.sqlite3").stat().st_mode & 0o777 == 0o600


@pytest.mark.usefixtures("daemon")
def test_each_socket_answers_its_kinds_only(home: Path) -> None:
    paths = sockets(home)
    block = wire.call(paths["loop"], MemoryBlock())
    assert isinstance(block, MemoryBlockReply)
    assert block.text.startswith("# soul.md\n\n")
    request = ToolRequest(
        session="chat-x", call_id="c1", tool="memory", arguments={"action": "note", "text": "hi"}
    )
    reply = wire.call(paths["broker"], MemoryCall(request=request, taint=DataClass.PRIVATE, untrusted=False))
    assert isinstance(reply, ToolResponse)
    assert reply.code == "noted"
    with pytest.raises(PeerError) as raised:
        wire.call(paths["broker"], MemoryBlock())
    assert raised.value.code == "unknown-kind"
    with pytest.raises(PeerError):
        wire.call(paths["loop"], MemoryAdmin(command="status"))


@pytest.mark.usefixtures("daemon")
def test_bad_frames_get_an_error_and_memoryd_keeps_serving(home: Path) -> None:
    admin = sockets(home)["admin"]
    reply = raw_exchange(admin, frame.pack(b"{not json"))
    assert isinstance(reply, Error)
    assert reply.code == "malformed-message"
    reply = raw_exchange(admin, (frame.MAX_FRAME + 1).to_bytes(4, "big"))
    assert isinstance(reply, Error)
    assert reply.code == "frame-too-large"
    bad = json.dumps({"kind": "memory_admin", "body": {"command": 5}}).encode()
    reply = raw_exchange(admin, frame.pack(bad))
    assert isinstance(reply, Error)
    assert reply.code == "invalid-body"
    assert "command" in reply.message
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:  # a peer that leaves mid-frame
        conn.connect(str(admin))
        conn.sendall(b"\x00\x00\x01\x00abc")
    reply = wire.call(admin, MemoryAdmin(command="status"))
    assert isinstance(reply, MemoryAdminReply)


@pytest.mark.usefixtures("daemon")
def test_unknown_admin_command_names_the_known_ones(home: Path) -> None:
    with pytest.raises(PeerError) as raised:
        wire.call(sockets(home)["admin"], MemoryAdmin(command="explode"))
    assert "unknown command 'explode'" in raised.value.message
    assert "undo" in raised.value.message


@pytest.mark.usefixtures("daemon")
def test_a_bad_session_id_never_becomes_a_path(home: Path) -> None:
    body = json.dumps({"kind": "session_updated", "body": {"session": "../../etc"}}).encode()
    reply = raw_exchange(sockets(home)["loop"], frame.pack(body))
    assert isinstance(reply, Error)
    assert reply.code == "invalid-body"
    assert isinstance(wire.call(sockets(home)["loop"], SessionUpdated(session="never-seen")), messages.Ok)


def test_a_second_memoryd_on_the_same_home_refuses_at_once(
    home: Path, daemon: subprocess.Popen[bytes]
) -> None:
    second = run_memoryd("serve", "--home", str(home))
    assert second.returncode == 1
    assert "one writer per home" in second.stderr
    assert f"pid {daemon.pid}" in second.stderr
    assert "memoryd-start-failed" in second.stderr
    assert isinstance(wire.call(sockets(home)["admin"], MemoryAdmin(command="status")), MemoryAdminReply)


def test_sigterm_removes_sockets_and_releases_the_lock(home: Path) -> None:
    process = spawn_memoryd(home)
    wait_until_answers(process, sockets(home)["admin"])
    assert stop(process, signal.SIGTERM) == 0
    for path in sockets(home).values():
        assert not path.exists()
    again = spawn_memoryd(home)
    try:
        wait_until_answers(again, sockets(home)["admin"])
    finally:
        assert stop(again, signal.SIGINT) == 0


def test_stale_sockets_are_removed(home: Path) -> None:
    for path in sockets(home).values():
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        stale = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        stale.bind(str(path))
        stale.close()  # the file stays, nobody listens
    process = spawn_memoryd(home)
    try:
        wait_until_answers(process, sockets(home)["admin"])
        assert all(path.is_socket() for path in sockets(home).values())
    finally:
        stop(process)


def test_a_killed_memoryd_restarts_over_its_own_stale_sockets(home: Path) -> None:
    process = spawn_memoryd(home)
    wait_until_answers(process, sockets(home)["admin"])
    stop(process, signal.SIGKILL)
    assert sockets(home)["admin"].exists()
    again = spawn_memoryd(home)
    try:
        wait_until_answers(again, sockets(home)["admin"])
    finally:
        stop(again)


def run_memoryd(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "boxmaker.memoryd", *args],
        capture_output=True,
        text=True,
        timeout=30,
        env=env or dict(os.environ),
        check=False,
    )


def test_unknown_config_key_is_a_start_up_error(home: Path) -> None:
    config = home.parent / "memoryd.toml"
    config.write_text("[memory]\nreveiw = true\n")
    result = run_memoryd("serve", "--config", str(config))
    assert result.returncode == 1
    assert "unknown key 'reveiw' in [memory]; remove it or fix its spelling" in result.stderr
    assert "Traceback" not in result.stderr


def test_missing_configured_starter_is_a_start_up_error(home: Path) -> None:
    config = home.parent / "memoryd.toml"
    config.write_text('[memory]\nsoul_starter = "nowhere.md"\n')
    result = run_memoryd("serve", "--config", str(config))
    assert result.returncode == 1
    assert "nowhere.md does not exist" in result.stderr


def test_starter_next_to_the_config_is_copied(home: Path) -> None:
    config = home.parent / "memoryd.toml"
    config.write_text(f'[paths]\nhome = "{home}"\n')
    (home.parent / "soul.md").write_text("A custom soul.\n")
    process = spawn_memoryd(home, "--config", str(config))
    try:
        wait_until_answers(process, sockets(home)["admin"])
        assert (home / "memory" / "soul.md").read_text() == "A custom soul.\n"
    finally:
        stop(process)


def test_too_long_socket_path_is_a_clear_error(home: Path) -> None:
    config = home.parent / "memoryd.toml"
    config.write_text(f'[sockets]\nadmin = "{home}/{"x" * 120}/admin.sock"\n')
    result = run_memoryd("serve", "--home", str(home), "--config", str(config))
    assert result.returncode == 1
    assert "over the platform's limit" in result.stderr
    assert not sockets(home)["loop"].exists()
    assert not (home / "memory").exists()  # refused before anything was created


def test_help_and_typos_never_print_a_traceback() -> None:
    assert run_memoryd("--help").returncode == 0
    result = run_memoryd("serv")
    assert result.returncode == 2
    assert "Traceback" not in result.stderr


@pytest.mark.usefixtures("daemon")
def test_a_burst_of_clients_is_queued_not_refused(home: Path) -> None:
    import threading

    broker = sockets(home)["broker"]
    request = ToolRequest(session="chat-burst", call_id="c1", tool="recall", arguments={"query": "anything"})
    results: list[str] = []

    def ask() -> None:
        try:
            reply = wire.call(broker, MemoryCall(request=request, taint=DataClass.PRIVATE, untrusted=False))
            results.append(reply.code if isinstance(reply, ToolResponse) else "bad")
        except PeerError as exc:
            results.append(exc.code)

    threads = [threading.Thread(target=ask) for _ in range(60)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert results == ["ok"] * 60


@pytest.mark.usefixtures("daemon")
def test_a_truncated_frame_is_answered_with_an_error(home: Path) -> None:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
        conn.settimeout(10)
        conn.connect(str(sockets(home)["admin"]))
        conn.sendall(b"\x00\x00\x00\x64" + b"x" * 10)
        conn.shutdown(socket.SHUT_WR)
        reply = messages.decode(frame.recv_frame(conn))[1]
    assert isinstance(reply, Error)
    assert reply.code == "frame-truncated"
