"""Starting, and being stopped while starting (issue 14, defects 6 and 7).

- Every role installs its SIGTERM handler before it takes its lock and binds its sockets: a stop that
  arrives right after the lock is taken (the sockets may appear any moment) ends the role cleanly (exit
  0, sockets removed, lock released), never with the signal's default death (exit -15).
- loopd's start is not held by a model server that accepts connections and never answers: the probe of
  ``/props`` and ``/slots`` waits a few seconds, not the model timeout, and loopd serves (its status
  says the server is not answering).
"""

from __future__ import annotations

import signal
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from boxmaker.proto.messages import StatusReply
from faultkit import LOOPD, MEMORYD, ROLES, Role, log_of, spawn, stop, wait_answers

LOCKS = {"memoryd": "memory/.lock", "brokerd": "broker/.lock", "loopd": "sessions/.lock"}


@pytest.fixture
def silent_server() -> Iterator[str]:
    """A TCP server that accepts connections (the kernel does, from its backlog) and never answers."""
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(64)
        yield f"http://127.0.0.1:{server.getsockname()[1]}"


def wait_for_lock(process_pid: int, home: Path, role: Role, timeout: float = 30.0) -> None:
    path = home / LOCKS[role.name]
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if path.read_text(encoding="ascii").strip() == str(process_pid):
                return
        except (FileNotFoundError, UnicodeDecodeError):
            pass
        time.sleep(0.001)
    raise AssertionError(f"{role.name} did not take its lock: {log_of(role, home)}")


@pytest.mark.parametrize("role", ROLES, ids=lambda r: r.name)
def test_a_stop_right_after_the_lock_is_taken_ends_the_role_cleanly(
    home: Path, role: Role, silent_server: str
) -> None:
    config = f'[model]\nurl = "{silent_server}"\n' if role is LOOPD else ""
    process = spawn(role, home, config)
    try:
        wait_for_lock(process.pid, home, role)
        process.send_signal(signal.SIGTERM)
        process.wait(timeout=30)
    finally:
        stop(process)
    assert process.returncode == 0, log_of(role, home)
    assert not any((home / name).exists() for name in role.sockets)
    assert (home / LOCKS[role.name]).read_text(encoding="ascii") == ""  # released
    assert "Traceback" not in log_of(role, home)


def test_loopd_serves_within_seconds_when_the_model_server_never_answers(
    home: Path, silent_server: str
) -> None:
    process = spawn(LOOPD, home, f'[model]\nurl = "{silent_server}"\n')
    try:
        started = time.monotonic()
        status = wait_answers(process, LOOPD, home, timeout=25)
        assert time.monotonic() - started < 20
        assert isinstance(status, StatusReply)
        assert "model: not reachable at" in status.detail
    finally:
        assert stop(process) == 0
    assert "did not answer within 5 s" in log_of(LOOPD, home)


def test_memoryd_stopped_while_it_starts_leaves_nothing_behind(home: Path) -> None:
    """Stopped at once after its lock: no socket, no intent, and the next start is clean."""
    for _ in range(3):
        process = spawn(MEMORYD, home)
        wait_for_lock(process.pid, home, MEMORYD)
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=30) == 0
    process = spawn(MEMORYD, home)
    try:
        status = wait_answers(process, MEMORYD, home)
        assert status.data["damage"] == []  # type: ignore[union-attr]
    finally:
        assert stop(process) == 0
