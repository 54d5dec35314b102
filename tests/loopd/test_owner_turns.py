"""The owner's turns on a real loopd (issue 18): a streamed chat's `chat_delta` frames, `loop_admin turns`
and `cancel`, a cancel by closing the connection, and a session that goes on after it."""

from __future__ import annotations

import socket as sockets
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from test_loopd_daemon import spawn, wait_ready, write_config

from boxmaker.proto import frame, messages, wire
from boxmaker.proto.errors import PeerError
from boxmaker.proto.messages import Body, Chat, ChatDelta, ChatReply, LoopAdmin, LoopAdminReply
from conftest import stop
from fakes.llama_server import FakeLlamaServer, FakeReply


@pytest.fixture
def slow() -> Iterator[FakeLlamaServer]:
    with FakeLlamaServer(n_ctx=4096, slots=2, stream_delay=0.02) as server:
        yield server


@pytest.fixture
def loopd(home: Path, slow: FakeLlamaServer, daemon: subprocess.Popen[bytes]) -> Iterator[Path]:
    process = spawn(write_config(home, slow.url))
    socket = home / "run" / "owner-loop" / "chat.sock"
    try:
        wait_ready(process, socket)
        yield socket
    finally:
        assert stop(process) == 0


def test_a_streamed_chat_sends_its_text_in_pieces_before_the_reply(
    loopd: Path, slow: FakeLlamaServer
) -> None:
    slow.script(FakeReply(content="One two three four five six seven eight nine ten.", reasoning="hmm"))
    pieces: list[Body] = []
    reply = wire.call(
        loopd, Chat(text="count", session="chat-s", stream=True), timeout=60, on_interim=pieces.append
    )
    assert isinstance(reply, ChatReply)
    texts = [p.text for p in pieces if isinstance(p, ChatDelta)]
    assert len(texts) > 1
    assert "".join(texts) == reply.reply == "One two three four five six seven eight nine ten."


def test_loop_admin_cancel_stops_a_turn_and_says_what_it_had_run(loopd: Path, slow: FakeLlamaServer) -> None:
    slow.delay = 3.0
    outcome: list[BaseException | Body] = []

    def chat() -> None:
        try:
            outcome.append(wire.call(loopd, Chat(text="slow one", session="chat-c"), timeout=60))
        except PeerError as exc:
            outcome.append(exc)

    thread = threading.Thread(target=chat)
    thread.start()
    deadline = time.monotonic() + 10
    turns: list[dict[str, object]] = []
    while time.monotonic() < deadline and not turns:
        reply = wire.call(loopd, LoopAdmin(command="turns"), timeout=10)
        assert isinstance(reply, LoopAdminReply)
        turns = reply.data
        time.sleep(0.05)
    assert turns[0]["session"] == "chat-c"
    started = time.monotonic()
    said = wire.call(loopd, LoopAdmin(command="cancel", arg="chat-c"), timeout=40)
    assert isinstance(said, LoopAdminReply)
    assert time.monotonic() - started < 2.5
    assert said.text == "cancelled the turn in session chat-c; it had run no tool call, which is kept"
    thread.join(10)
    assert isinstance(outcome[0], PeerError)
    assert outcome[0].code == "cancelled"
    slow.delay = 0.0
    assert isinstance(wire.call(loopd, Chat(text="again", session="chat-c"), timeout=60), ChatReply)


def test_closing_the_connection_cancels_the_turn(loopd: Path, slow: FakeLlamaServer) -> None:
    slow.delay = 0.5
    slow.script(
        FakeReply(tool_calls=[("clock", {})]), FakeReply(tool_calls=[("clock", {})]), FakeReply(content="x")
    )
    conn = sockets.socket(sockets.AF_UNIX, sockets.SOCK_STREAM)
    conn.connect(str(loopd))
    frame.send_frame(conn, messages.encode(Chat(text="go", session="chat-h")))
    time.sleep(0.8)  # the first request answered, its call routed: the turn is logged
    conn.close()
    log = loopd.parents[2] / "sessions" / "chat-h" / "0.jsonl"
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and b'"turn_end"' not in log.read_bytes():
        time.sleep(0.1)
    assert b'"type":"turn_end","time"' in log.read_bytes()
    assert b'"reason":"cancelled"' in log.read_bytes()


def test_loopd_started_before_its_model_server_learns_the_context_when_it_answers(
    home: Path, daemon: subprocess.Popen[bytes]
) -> None:
    with sockets.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    process = spawn(write_config(home, f"http://127.0.0.1:{port}"))
    socket = home / "run" / "owner-loop" / "chat.sock"
    try:
        status = wait_ready(process, socket)
        assert status.detail == f"model: not reachable at http://127.0.0.1:{port}; chat works once it runs"
        assert status.data["n_ctx"] is None
        with FakeLlamaServer(n_ctx=2048, slots=2, port=port):
            reply = wire.call(socket, Chat(text="hello", session="chat-late"), timeout=60)
            assert isinstance(reply, ChatReply)
            later = wait_ready(process, socket)
            assert later.data["n_ctx"] == 2048
            assert "n_ctx 2,048 per slot" in later.detail
    finally:
        assert stop(process) == 0
