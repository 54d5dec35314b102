"""``loopd serve`` as a real process: config, the n_ctx check, the owner socket, signals (M5a section 9;
DESIGN 10.1)."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from boxmaker.proto import wire
from boxmaker.proto.errors import PeerError
from boxmaker.proto.messages import Chat, ChatReply, Status, StatusReply
from conftest import stop
from fakes.llama_server import FakeLlamaServer, FakeReply


@pytest.fixture
def model() -> Iterator[FakeLlamaServer]:
    with FakeLlamaServer(n_ctx=4096, slots=2) as server:
        yield server


def write_config(home: Path, url: str, extra: str = "") -> Path:
    path = home.parent / "loopd.toml"
    path.write_text(f'[paths]\nhome = "{home}"\n\n[model]\nurl = "{url}"\n{extra}', encoding="utf-8")
    return path


def spawn(config: Path) -> subprocess.Popen[bytes]:
    log = (config.parent / "loopd.log").open("ab")
    with log:
        return subprocess.Popen(
            [sys.executable, "-m", "boxmaker.loopd", "serve", "--config", str(config)],
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=log,
        )


def wait_ready(process: subprocess.Popen[bytes], socket: Path, timeout: float = 30.0) -> StatusReply:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise AssertionError(f"loopd exited with {process.returncode}")
        try:
            reply = wire.call(socket, Status(), timeout=5.0)
            assert isinstance(reply, StatusReply)
            return reply
        except PeerError:
            time.sleep(0.05)
    raise AssertionError("loopd did not answer in time")


def run_to_exit(config: Path) -> tuple[int, str]:
    done = subprocess.run(
        [sys.executable, "-m", "boxmaker.loopd", "serve", "--config", str(config)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    return done.returncode, done.stderr


def test_loopd_serves_chat_without_memoryd_running_sessions_only_fail_new(
    home: Path, model: FakeLlamaServer
) -> None:
    config = write_config(home, model.url, "\n[expect]\nn_ctx = 4096\n")
    process = spawn(config)
    try:
        socket = home / "run" / "owner-loop" / "chat.sock"
        status = wait_ready(process, socket)
        assert status.role == "loopd"
        assert status.pid == process.pid
        assert "n_ctx 4,096 per slot" in status.detail
        assert stat.S_IMODE(os.stat(socket).st_mode) == 0o600
        with pytest.raises(PeerError) as failed:
            wire.call(socket, Chat(text="hello"), timeout=30)
        assert failed.value.code == "memory-unavailable"
        assert failed.value.runbook == "memory-unavailable"
        assert not any((home / "sessions").glob("chat-*"))
        # loopd keeps running
        assert isinstance(wire.call(socket, Status(), timeout=5), StatusReply)
    finally:
        assert stop(process) == 0
    assert not (home / "run" / "owner-loop" / "chat.sock").exists()


def test_a_turn_through_the_socket_with_memoryd(
    home: Path, model: FakeLlamaServer, daemon: subprocess.Popen[bytes]
) -> None:
    config = write_config(home, model.url)
    process = spawn(config)
    try:
        socket = home / "run" / "owner-loop" / "chat.sock"
        wait_ready(process, socket)
        model.script(FakeReply(tool_calls=[("clock", {})]), FakeReply(content="It is noon."))
        reply = wire.call(socket, Chat(text="what time is it?", session="chat-clock"), timeout=60)
        assert isinstance(reply, ChatReply)
        assert reply.session == "chat-clock"
        assert reply.reply == "It is noon."
        # brokerd is not running: the call did not run, and the model was told so
        assert reply.tools[0].code == "refused:brokerd-unreachable"
        baseline = (home / "sessions" / "chat-clock" / "0.baseline.json").read_text(encoding="utf-8")
        assert "# soul.md" in baseline
        assert "# memory.md (0 of 2,200 characters)" in baseline
        second = wire.call(socket, Chat(text="thanks", session="chat-clock"), timeout=60)
        assert isinstance(second, ChatReply)
        assert second.turn == 2
    finally:
        assert stop(process) == 0


def test_a_disagreeing_expect_n_ctx_refuses_start_saying_which_to_fix(
    home: Path, model: FakeLlamaServer
) -> None:
    config = write_config(home, model.url, "\n[expect]\nn_ctx = 8192\n")
    code, stderr = run_to_exit(config)
    assert code == 1
    assert "4,096 tokens of context per slot" in stderr
    assert "[expect] n_ctx = 4096" in stderr
    assert "Traceback" not in stderr
    assert not (home / "run" / "owner-loop" / "chat.sock").exists()


@pytest.mark.parametrize(
    ("extra", "says"),
    [
        ("\n[limits]\ntool_calls = 3\n", "unknown key 'tool_calls' in [limits]"),
        ("\n[expect]\nn_ctx = 0\n", "[expect] n_ctx"),
        ("\n[slots]\nmain = -1\n", "[slots] main"),
        ("\n[prompt]\nsystem = 'missing.md'\n", "[prompt] system"),
        ("\nbogus = 1\n", "unknown key 'bogus'"),
    ],
)
def test_bad_config_is_refused_naming_the_key(home: Path, extra: str, says: str) -> None:
    config = write_config(home, "http://127.0.0.1:9", extra)
    code, stderr = run_to_exit(config)
    assert code == 1
    assert says in stderr
    assert "loopd-start-failed" in stderr
    assert "Traceback" not in stderr


def test_a_bad_model_url_is_refused(home: Path) -> None:
    code, stderr = run_to_exit(write_config(home, "ftp://example.org"))
    assert code == 1
    assert "not an http:// or https:// URL" in stderr


def test_a_second_loopd_on_the_same_home_fails_fast(home: Path, model: FakeLlamaServer) -> None:
    config = write_config(home, model.url)
    process = spawn(config)
    try:
        wait_ready(process, home / "run" / "owner-loop" / "chat.sock")
        code, stderr = run_to_exit(config)
        assert code == 1
        assert "one writer per home" in stderr or "already serving" in stderr
    finally:
        assert stop(process) == 0


def test_loopd_starts_before_the_model_server_and_says_so(home: Path) -> None:
    config = write_config(home, "http://127.0.0.1:9")
    process = spawn(config)
    try:
        socket = home / "run" / "owner-loop" / "chat.sock"
        status = wait_ready(process, socket)
        assert status.detail == "model: not reachable at http://127.0.0.1:9; chat works once it runs"
        with pytest.raises(PeerError) as failed:
            wire.call(socket, Chat(text="hi", session="chat-x"), timeout=60)
        assert failed.value.code in {"model-unreachable", "memory-unavailable"}
    finally:
        assert stop(process) == 0


def test_a_slot_the_server_does_not_have_refuses_start(home: Path, model: FakeLlamaServer) -> None:
    code, stderr = run_to_exit(write_config(home, model.url, "\n[slots]\nmain = 5\n"))
    assert code == 1
    assert "disagrees with loopd.toml: [slots] main = 5 but it has 2 slots (0 to 1" in stderr


def test_every_disagreement_is_said_at_once_and_status_says_not_ready(home: Path) -> None:
    import socket as sockets

    with sockets.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    url = f"http://127.0.0.1:{port}"
    config = write_config(home, url, "\n[expect]\nn_ctx = 8192\n[slots]\nmain = 3\n")
    process = spawn(config)
    try:
        socket = home / "run" / "owner-loop" / "chat.sock"
        wait_ready(process, socket)
        with FakeLlamaServer(n_ctx=4096, slots=1, port=port) as _:
            with pytest.raises(PeerError) as failed:
                wire.call(socket, Chat(text="hi", session="chat-x"), timeout=60)
            assert failed.value.code == "model-mismatch"
            assert "4,096 tokens of context per slot but [expect] n_ctx says 8,192" in failed.value.message
            assert "[slots] main = 3 but it has 1 slot (0 to 0" in failed.value.message
            status = wire.call(socket, Status(), timeout=5)
            assert isinstance(status, StatusReply)
            assert status.detail.startswith(f"NOT READY: the model server at {url} disagrees")
            assert isinstance(status.data, dict)
            assert "[expect] n_ctx says 8,192" in status.data["model_problem"]
            shown = subprocess.run(
                [sys.executable, "-m", "boxmaker.bxctl", "--home", str(home), "status"],
                capture_output=True,
                text=True,
                timeout=60,
                check=False,
            )
            assert f"model: PROBLEM - the model server at {url} disagrees with loopd.toml" in shown.stdout
    finally:
        assert stop(process) == 0


def test_a_one_slot_server_shares_its_slot_with_background_work(home: Path) -> None:
    with FakeLlamaServer(n_ctx=4096, slots=1) as server:
        process = spawn(write_config(home, server.url))
        try:
            status = wait_ready(process, home / "run" / "owner-loop" / "chat.sock")
            assert status.detail.startswith("ready;")
        finally:
            assert stop(process) == 0
    assert "background work shares slot 0" in (home.parent / "loopd.log").read_text()


@pytest.mark.parametrize(
    ("url", "says"),
    [
        ("http://127.0.0.1:bad", "is not a valid URL"),
        ("http://", "has no host"),
        ("http://h:8080/?x=1", "plain base URL"),
    ],
)
def test_a_url_that_cannot_work_is_one_sentence(home: Path, url: str, says: str) -> None:
    code, stderr = run_to_exit(write_config(home, url))
    assert code == 1
    assert says in stderr
    assert "Traceback" not in stderr
