"""A real `brokerd serve` process, and bxctl's broker commands against a running broker (DESIGN 10.1,
10.5)."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from click.testing import CliRunner

from boxmaker.brokerd.server import Server
from boxmaker.bxctl.cli import cli
from boxmaker.proto import wire
from boxmaker.proto.errors import PeerError
from boxmaker.proto.messages import Status, StatusReply
from brokerd.brokerd_helpers import grant_text, request, write_grant


def spawn(home: Path, *args: str) -> subprocess.Popen[bytes]:
    command = [sys.executable, "-m", "boxmaker.brokerd", "serve", "--home", str(home), *args]
    return subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def wait_ready(process: subprocess.Popen[bytes], socket: Path) -> StatusReply:
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        assert process.poll() is None, process.communicate()
        try:
            reply = wire.call(socket, Status(), timeout=2)
            assert isinstance(reply, StatusReply)
            return reply
        except PeerError:
            time.sleep(0.05)
    raise AssertionError("brokerd did not answer")


def test_serve_binds_0600_sockets_refuses_a_second_instance_and_cleans_up(home: Path) -> None:
    admin = home / "run" / "owner-broker" / "admin.sock"
    loop = home / "run" / "loop-broker" / "broker.sock"
    first = spawn(home)
    try:
        status = wait_ready(first, admin)
        assert (status.role, status.pid) == ("brokerd", first.pid)
        for socket in (admin, loop):
            assert socket.stat().st_mode & 0o777 == 0o600
        assert (home / "broker").stat().st_mode & 0o777 == 0o700
        second = spawn(home)
        _, err = second.communicate(timeout=15)
        assert second.returncode == 1
        text = err.decode()
        assert f"another brokerd (pid {first.pid}) already runs for this home" in text
        assert "(runbook: brokerd-start-failed)" in text
        assert "Traceback" not in text
        assert admin.exists()
    finally:
        first.send_signal(signal.SIGTERM)
        first.communicate(timeout=15)
    assert first.returncode == 0
    assert not admin.exists()
    assert not loop.exists()


def test_a_bad_config_fails_in_one_sentence(home: Path) -> None:
    config = home.parent / "brokerd.toml"
    config.write_text("[approvals]\ntimeout_s = 5\ncolour = 1\n")
    process = spawn(home, "--config", str(config))
    _, err = process.communicate(timeout=15)
    assert process.returncode == 1
    text = err.decode()
    assert "unknown key 'colour' in [approvals]" in text
    assert "(runbook: brokerd-start-failed)" in text
    assert "Traceback" not in text


def bxctl(*args: str) -> Any:
    return CliRunner().invoke(cli, list(args), catch_exceptions=False)


def test_bxctl_approvals_approve_deny_and_grants(home: Path, serving: Callable[..., Server]) -> None:
    docs = home.parent / "docs"
    docs.mkdir()
    (docs / "a.txt").write_text("hello")
    write_grant(home, "read-docs", grant_text("read_file", "ask", paths=[str(docs)]))
    server = serving()
    socket = str(server.config.admin_socket)
    assert bxctl("approvals").output == "0 calls waiting for you\n"

    answers: list[Any] = []

    def call(call_id: str, path: str) -> None:
        body = request("read_file", {"path": path}, call=call_id)
        answers.append(wire.call(server.config.loop_socket, body, timeout=30))

    threads = [
        threading.Thread(target=call, args=("c1", str(docs / "a.txt"))),
        threading.Thread(target=call, args=("c2", str(docs / "a.txt\x1b[31m"))),
    ]
    for thread in threads:
        thread.start()
    deadline = time.monotonic() + 5
    waiting: list[dict[str, Any]] = []
    while len(waiting) < 2 and time.monotonic() < deadline:
        waiting = json.loads(bxctl("approvals", "--json", "--broker-socket", socket).output)["approvals"]
        time.sleep(0.02)
    assert len(waiting) == 2
    listing = bxctl("approvals").output
    assert "2 calls waiting for you" in listing
    assert "\x1b" not in listing
    assert "a.txt\\u001b[31m" in listing
    by_call = {w["call_id"]: w["id"] for w in waiting}
    assert bxctl("approve", by_call["c1"]).output.startswith(f"approved {by_call['c1']}: read_file")
    assert bxctl("deny", by_call["c2"]).output.startswith(f"denied {by_call['c2']}: read_file")
    for thread in threads:
        thread.join(10)
    codes = sorted((a.call_id, a.code) for a in answers)
    assert codes == [("c1", "ok"), ("c2", "refused:denied")]
    missing = bxctl("approve", "a-aaaaaaaa")
    assert missing.exit_code == 1
    assert "no call waits under the id 'a-aaaaaaaa'" in missing.output

    grants = json.loads(bxctl("grants", "--json").output)
    assert [g["id"] for g in grants["owner"]] == ["read-docs"]
    assert [g["id"] for g in grants["builtin"]][:2] == ["builtin-recall", "builtin-memory"]
    text = bxctl("grants").output
    assert "owner grants:\n  read-docs: read_file ask" in text
    assert "built in:\n  builtin-recall: recall auto" in text


def test_bxctl_reads_the_socket_from_brokerd_toml(home: Path, serving: Callable[..., Server]) -> None:
    other = home / "run" / "x" / "a.sock"
    (home / "config").mkdir(parents=True)
    (home / "config" / "brokerd.toml").write_text(f'[sockets]\nadmin = "{other}"\n')
    serving(admin_socket=other)
    assert bxctl("grants").exit_code == 0
    down = CliRunner().invoke(cli, ["grants", "--broker-socket", str(home / "nothing.sock")])
    assert down.exit_code == 1
    assert "brokerd does not answer" in down.output
