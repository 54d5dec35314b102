"""Connection storms on every socket of every role (issue 14, defect 4): a cap on connections answered
``busy`` past it, idle connections dropped on a deadline, a burst of connects that all connect (the
listen backlog is the system's), closing thousands at once without a stall, a stop within 5 seconds
whatever is open, and clients that retry ``busy`` so a cap never fails a turn or a memory block.
"""

from __future__ import annotations

import contextlib
import errno
import signal
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from boxmaker.proto import wire
from boxmaker.proto.messages import Chat, ChatReply, MemoryBlock, MemoryBlockReply
from conftest import bxctl_ok
from fakes.llama_server import FakeLlamaServer, FakeReply
from faultkit import (
    BROKERD,
    LOOPD,
    MEMORYD,
    ROLES,
    Role,
    exchange,
    log_of,
    reply_kind,
    spawn,
    stop,
    wait_answers,
)

LIMITS = "[limits]\nconnections = 8\nidle_s = 1\n"
DEAD_MODEL = '[model]\nurl = "http://127.0.0.1:9"\n'


def config_for(role: Role, limits: str = LIMITS) -> str:
    return limits + (DEAD_MODEL if role is LOOPD else "")


@contextlib.contextmanager
def held(path: Path, count: int) -> Iterator[list[socket.socket]]:
    """`count` connections to `path` that send nothing."""
    socks = []
    try:
        for _ in range(count):
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            sock.connect(str(path))
            socks.append(sock)
        yield socks
    finally:
        for sock in socks:
            sock.close()


@pytest.mark.parametrize("role", ROLES, ids=lambda r: r.name)
def test_past_the_cap_a_socket_answers_busy_drops_idle_ones_and_clients_retry(home: Path, role: Role) -> None:
    process = spawn(role, home, config_for(role))
    try:
        wait_answers(process, role, home)
        for name in role.sockets:
            path = home / name
            with held(path, 8) as idle:
                time.sleep(0.3)  # the server has accepted them all
                reply = exchange(path, b"", shut=False, timeout=5)
                assert reply is not None, name
                kind, body = reply_kind(reply)
                assert (kind, body["code"], body["runbook"]) == ("error", "busy", "socket-busy"), body
                assert "[limits] connections" in body["message"]
                started = time.monotonic()
                answer = wire.call(role.socket(home), role.status(), timeout=20)  # retried until free
                assert answer is not None
                if name == role.status_socket:
                    assert 0.5 < time.monotonic() - started < 10  # the idle ones were dropped after 1 s
                for sock in idle:  # dropped by the server: end of file, no reply
                    sock.settimeout(5)
                    assert sock.recv(100) == b""
        assert process.poll() is None
    finally:
        assert stop(process) == 0
    assert "Traceback" not in log_of(role, home)


def test_a_burst_of_connects_all_connect_and_closing_them_stalls_nothing(home: Path) -> None:
    """2,000 connects at once, none retried (non-blocking: a full backlog would be EAGAIN), held, then
    all closed at once. While 64 of them hold the cap, a client is answered once the idle deadline
    (2 s here) drops them; after the close, at once."""
    process = spawn(MEMORYD, home, "[limits]\nidle_s = 2\n")
    try:
        wait_answers(process, MEMORYD, home)
        path = MEMORYD.socket(home)
        socks, refused = [], 0
        try:
            for _ in range(2000):
                sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                sock.setblocking(False)
                if sock.connect_ex(str(path)) == errno.EAGAIN:
                    refused += 1
                    sock.close()
                    continue
                socks.append(sock)
            assert refused == 0
            started = time.monotonic()
            wire.call(path, MEMORYD.status(), timeout=30)
            assert time.monotonic() - started < 8
        finally:
            for sock in socks:
                sock.close()
        started = time.monotonic()
        wire.call(path, MEMORYD.status(), timeout=20)
        assert time.monotonic() - started < 3
    finally:
        assert stop(process) == 0


@pytest.mark.parametrize("role", ROLES, ids=lambda r: r.name)
def test_a_stop_takes_under_5_s_whatever_is_open(home: Path, role: Role) -> None:
    process = spawn(role, home, config_for(role, ""))
    try:
        wait_answers(process, role, home)
        with held(home / role.sockets[0], 64), held(home / role.sockets[-1], 300):
            time.sleep(0.5)
            started = time.monotonic()
            process.send_signal(signal.SIGTERM)
            process.wait(timeout=15)
            took = time.monotonic() - started
    finally:
        stop(process)
    assert process.returncode == 0, log_of(role, home)
    assert took < 5, took
    assert not any((home / name).exists() for name in role.sockets)


def test_a_cap_of_one_never_fails_a_turn_or_a_memory_block(home: Path) -> None:
    """Every role at one connection per socket, with a client holding one idle connection on each of
    memoryd's and brokerd's sockets: loopd's memory block, its tool call through brokerd and brokerd's
    memory_call all wait for their turn (busy, asked again) and the turn succeeds."""
    one = "[limits]\nconnections = 1\nidle_s = 1\n"
    with FakeLlamaServer(n_ctx=4096, slots=2) as model:
        model.script(FakeReply(tool_calls=[("recall", {"query": "harbour"})]), FakeReply(content="Done."))
        processes = [spawn(MEMORYD, home, one), spawn(BROKERD, home, one)]
        processes.append(spawn(LOOPD, home, one + f'[model]\nurl = "{model.url}"\n'))
        try:
            for process, role in zip(processes, ROLES, strict=True):
                wait_answers(process, role, home)
            holders = [*MEMORYD.sockets[:2], BROKERD.sockets[0]]
            with contextlib.ExitStack() as stack:
                for name in holders:
                    stack.enter_context(held(home / name, 1))
                block = wire.call(home / MEMORYD.sockets[0], MemoryBlock(), timeout=30)
                assert isinstance(block, MemoryBlockReply)
            with contextlib.ExitStack() as stack:
                for name in holders:
                    stack.enter_context(held(home / name, 1))
                reply = wire.call(
                    home / LOOPD.sockets[0], Chat(text="recall the harbour", session="chat-cap"), 60
                )
            assert isinstance(reply, ChatReply)
            assert reply.reply == "Done."
            assert [t.code for t in reply.tools] == ["ok"], reply.tools
        finally:
            for process in reversed(processes):
                assert stop(process) == 0


def test_bxctl_waits_its_turn_at_a_busy_socket(home: Path) -> None:
    """memoryd at one connection per socket, one held idle: bxctl's command is answered `busy`, asks
    again, and succeeds once the idle one is dropped."""
    process = spawn(MEMORYD, home, "[limits]\nconnections = 1\nidle_s = 1\n")
    try:
        wait_answers(process, MEMORYD, home)
        with held(home / MEMORYD.sockets[2], 1):
            time.sleep(0.2)
            done = bxctl_ok(home, "memory", "files", "--memory-socket", str(home / MEMORYD.sockets[2]))
        assert "memory.md" in done.stdout
    finally:
        assert stop(process) == 0
