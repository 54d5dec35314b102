"""kill -9 of brokerd and of loopd in the middle of their work (issue 14): brokerd's state (each session's
label, the audit log) and loopd's session logs open after a restart with no half record, every label
that reached loopd is on disk, every session goes on, and the start-up checks find nothing.
"""

from __future__ import annotations

import json
import random
import signal
import threading
from pathlib import Path

from boxmaker.proto import wire
from boxmaker.proto.errors import PeerError
from boxmaker.proto.messages import Chat, ChatReply, StatusReply, ToolRequest, ToolResponse
from boxmaker.proto.records import read_log
from fakes.llama_server import FakeLlamaServer
from faultkit import BROKERD, LOOPD, MEMORYD, spawn, stop, wait_answers


def complete_lines(path: Path) -> list[bytes]:
    return path.read_bytes().split(b"\n")[:-1]


def test_brokerd_killed_while_deciding_keeps_every_label_it_answered_with(home: Path) -> None:
    secrets = home.parent / "secrets"
    secrets.mkdir()
    (secrets / "key.txt").write_text("the secret word is heron", encoding="utf-8")
    grants = home / "grants"
    grants.mkdir(parents=True)
    (grants / "secrets.toml").write_text(
        'tool = "read_file"\nmode = "auto"\nmax_taint = "secret"\nresult_class = "secret"\n'
        f'untrusted = false\npaths = ["{secrets}"]\n',
        encoding="utf-8",
    )
    rng = random.Random(7)
    answered: list[str] = []
    n = 0
    for _ in range(5):
        process = spawn(BROKERD, home)
        wait_answers(process, BROKERD, home)
        done = threading.Event()

        def client(done: threading.Event = done) -> None:
            nonlocal n
            while not done.is_set():
                n += 1
                session = f"chat-k{n}"
                request = ToolRequest(
                    session=session,
                    call_id="c1",
                    tool="read_file",
                    arguments={"path": str(secrets / "key.txt")},
                )
                try:
                    reply = wire.call(home / BROKERD.sockets[0], request, timeout=10)
                except PeerError:
                    return
                assert isinstance(reply, ToolResponse)
                if reply.code == "ok":
                    answered.append(session)

        thread = threading.Thread(target=client)
        thread.start()
        threading.Event().wait(rng.uniform(0.2, 0.6))
        stop(process, signal.SIGKILL)
        done.set()
        thread.join(timeout=30)
    process = spawn(BROKERD, home)
    try:
        status = wait_answers(process, BROKERD, home)
        assert isinstance(status, StatusReply)
        assert status.data["damage"] == [], status.data
    finally:
        assert stop(process) == 0
    assert len(answered) > 10
    for session in answered:  # a label that reached loopd is on disk
        label = json.loads((home / "broker" / "sessions" / f"{session}.json").read_bytes())
        assert label["class"] == "secret", session
    for path in (home / "broker" / "audit").glob("*.jsonl"):
        for line in complete_lines(path):
            assert isinstance(json.loads(line), dict)


def test_loopd_killed_mid_turn_leaves_logs_that_open_and_sessions_that_go_on(home: Path) -> None:
    rng = random.Random(11)
    sessions: set[str] = set()
    with FakeLlamaServer(n_ctx=4096, slots=2, delay=0.15) as model:
        memoryd = spawn(MEMORYD, home)
        try:
            wait_answers(memoryd, MEMORYD, home)
            config = f'[model]\nurl = "{model.url}"\n'
            for round_ in range(4):
                process = spawn(LOOPD, home, config)
                wait_answers(process, LOOPD, home)
                done = threading.Event()

                def client(done: threading.Event = done, round_: int = round_) -> None:
                    k = 0
                    while not done.is_set():
                        k += 1
                        session = f"chat-r{round_}-{k % 3}"
                        sessions.add(session)
                        try:
                            wire.call(home / LOOPD.sockets[0], Chat(text=f"turn {k}", session=session), 30)
                        except PeerError:
                            return

                thread = threading.Thread(target=client)
                thread.start()
                threading.Event().wait(rng.uniform(0.4, 1.2))
                stop(process, signal.SIGKILL)
                done.set()
                thread.join(timeout=30)
            process = spawn(LOOPD, home, config)
            try:
                status = wait_answers(process, LOOPD, home)
                assert isinstance(status, StatusReply)
                assert status.data["damage"] == [], status.data
                for session in sorted(sessions):
                    if not (home / "sessions" / session).exists():
                        continue
                    reply = wire.call(home / LOOPD.sockets[0], Chat(text="still there?", session=session), 60)
                    assert isinstance(reply, ChatReply), session
                    for log in (home / "sessions" / session).glob("*.jsonl"):
                        records, end = read_log(log)
                        assert end == log.stat().st_size  # no half record left in the log
                        assert records
            finally:
                assert stop(process) == 0
        finally:
            assert stop(memoryd) == 0
