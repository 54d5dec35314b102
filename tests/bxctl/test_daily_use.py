"""Daily use of bxctl (issue 18): chat's standard input, commands, session notices and streaming; jobs
run; logs; sessions newest first and prune; status's checks."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from boxmaker.bxctl.cli import cli
from boxmaker.proto import wire
from boxmaker.proto.messages import Body, Chat, ChatDelta, ChatReply, LoopAdmin, LoopAdminReply
from boxmaker.proto.wire import FrameServer


class Loopd:
    """loopd's owner socket: streams `chat` replies in pieces when asked; records every request."""

    def __init__(self, path: Path) -> None:
        self.requests: list[Body] = []
        self.server = FrameServer(path, self.handle, frozenset({"chat", "status", "loop_admin"}))

    def handle(self, kind: str, body: Body) -> Body:
        self.requests.append(body)
        if isinstance(body, LoopAdmin):
            if body.command == "turns":
                return LoopAdminReply(text="", data=[])
            return LoopAdminReply(text=f"job {body.arg} started as session job-x-t1", data={"code": "ok"})
        assert isinstance(body, Chat)
        reply = f"you said: {body.text}"
        exchange = wire.exchange()
        if body.stream and exchange is not None:
            for piece in (reply[:4], reply[4:]):
                assert exchange.send(ChatDelta(text=piece))
        return ChatReply(session=body.session or "chat-x", turn=1, reply=reply, tools=[], untrusted=False)

    def chats(self) -> list[Chat]:
        return [r for r in self.requests if isinstance(r, Chat)]


@pytest.fixture
def loopd(home: Path) -> Iterator[Loopd]:
    fake = Loopd(home / "run" / "owner-loop" / "chat.sock")
    fake.server.start()
    yield fake
    fake.server.stop()


def test_dash_m_dash_reads_all_of_standard_input_as_one_message(loopd: Loopd) -> None:
    result = CliRunner().invoke(cli, ["chat", "-m", "-"], input="line one\nline two\n")
    assert result.exit_code == 0, result.output
    assert [c.text for c in loopd.chats()] == ["line one\nline two"]


def test_chat_commands_are_not_sent(loopd: Loopd) -> None:
    result = CliRunner().invoke(
        cli, ["chat", "--session", "chat-a"], input="/help\n/session\nhello\n/new\nagain\n"
    )
    assert result.exit_code == 0, result.output
    chats = loopd.chats()
    assert [c.text for c in chats] == ["hello", "again"]
    assert chats[0].session == "chat-a"
    assert chats[1].session != "chat-a"  # /new started another session
    assert "/new       start a new session" in result.stderr
    assert "[session chat-a: new]" in result.stderr


def test_a_named_session_says_whether_it_goes_on(home: Path, loopd: Loopd) -> None:
    log = home / "sessions" / "chat-notes" / "0.jsonl"
    log.parent.mkdir(parents=True)
    log.write_text('{"type":"user","time":"2026-12-01T00:00:00Z","content":"hi"}\n')
    result = CliRunner().invoke(cli, ["chat", "--session", "chat-notes", "-m", "again"])
    assert "[session chat-notes: goes on, 1 turn so far]" in result.stderr


def test_a_streamed_reply_is_printed_as_it_comes_and_once(loopd: Loopd) -> None:
    result = CliRunner().invoke(cli, ["chat", "--stream", "-m", "hi"])
    assert result.exit_code == 0, result.output
    assert result.stdout == "you said: hi\n"
    assert loopd.chats()[0].stream is True


def test_jobs_run_asks_loopd(loopd: Loopd) -> None:
    result = CliRunner().invoke(cli, ["jobs", "run", "morning"])
    assert result.exit_code == 0, result.output
    assert LoopAdmin(command="run", arg="morning") in loopd.requests
    assert "started as session job-x-t1" in result.stdout


def test_logs_prints_the_end_of_a_roles_log(home: Path) -> None:
    log = home / "run" / "loopd.log"
    log.parent.mkdir(parents=True)
    log.write_text("".join(f"line {n}\n" for n in range(100)))
    result = CliRunner().invoke(cli, ["logs", "loopd", "-n", "2"])
    assert result.stdout == "line 98\nline 99\n"
    missing = CliRunner().invoke(cli, ["logs", "memoryd"])
    assert missing.exit_code == 1
    assert "was not started by `bxctl up`" in missing.output


def _session(home: Path, name: str, age: float) -> None:
    log = home / "sessions" / name / "0.jsonl"
    log.parent.mkdir(parents=True)
    log.write_text('{"type":"user","time":"2026-12-01T00:00:00Z","content":"hi"}\n')
    then = time.time() - age
    os.utime(log, (then, then))


def test_sessions_are_listed_newest_first_and_old_job_runs_pruned(home: Path) -> None:
    for n, name in enumerate(["job-a-t1", "job-a-t2", "job-a-t3", "chat-old"]):
        _session(home, name, age=100 - n * 10 if name != "chat-old" else 1000)
    listed = CliRunner().invoke(cli, ["sessions"]).stdout.splitlines()
    assert [line.split()[0] for line in listed] == ["job-a-t3", "job-a-t2", "job-a-t1", "chat-old"]
    plan = CliRunner().invoke(cli, ["sessions", "prune", "--keep", "1"])
    assert "2 old job runs: job-a-t1, job-a-t2" in plan.stdout
    assert (home / "sessions" / "job-a-t1").exists()  # without --yes nothing changes
    as_json = json.loads(CliRunner().invoke(cli, ["sessions", "prune", "--keep", "1", "--json"]).stdout)
    assert as_json["scope_refs"] == ["job-a-t1", "job-a-t2"]
    assert as_json["changed"] is False
    nothing = CliRunner().invoke(cli, ["sessions", "prune", "--keep", "5", "--json"])
    assert nothing.exit_code == 0, nothing.output
    assert json.loads(nothing.stdout) == {"scope_refs": [], "changed": False}


def test_a_missing_home_is_said(tmp_path: Path) -> None:
    result = CliRunner().invoke(cli, ["--home", str(tmp_path / "no-such-home"), "sessions"])
    assert result.exit_code == 1
    assert "does not exist" in result.output


def test_up_says_when_the_chat_template_cannot_take_tools_and_what_answers() -> None:
    from boxmaker.bxctl import roles
    from boxmaker.bxctl.model import found_line
    from fakes.llama_server import FakeLlamaServer

    with FakeLlamaServer(supports_tools=False) as server:
        url = server.url
        line = found_line(roles.model_probe(url))
    assert line.startswith(f"model: llama-server at {url}; n_ctx 4,096 per slot; 2 slots")
    assert "its chat template cannot take tools" in line
    assert "--jinja" in line
    with FakeLlamaServer(degraded=True) as server:
        line = found_line(roles.model_probe(server.url))
    assert "an OpenAI-compatible server" in line
    assert "context not reported" in line
    assert "models: fake-model-q4_k_m.gguf" in line
    assert found_line(roles.model_probe("http://127.0.0.1:9")).endswith(
        "loopd starts and waits for it (chat works once it runs)"
    )


def test_status_is_degraded_while_grants_are_invalid_or_a_role_reports_damage(home: Path) -> None:
    """brokerd refuses every tool call while grants/ has a problem, and memoryd names damage in its own
    line and starts anyway; status must not also say "ready" and exit 0 (README: status tells the
    truth; "Reliability": damage is named, in the log and in `bxctl status`)."""
    import subprocess
    import sys

    from fakes.llama_server import FakeLlamaServer

    def bx(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "boxmaker.bxctl", *args],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )

    with FakeLlamaServer() as server:
        try:
            assert bx("up", "--model-url", server.url).returncode == 0
            assert bx("memory", "note", "A note before the damage.").returncode == 0
            clean = bx("status")
            assert clean.returncode == 0, clean.stdout
            assert "damage: ok - none found at start" in clean.stdout
            assert "grants: ok - valid" in clean.stdout
            broken = home / "grants" / "broken.toml"
            broken.write_text('tool = "read_file"\nmode = "sometimes"\n')
            invalid = bx("status")
            assert "grants: PROBLEM - grants invalid: grants/broken.toml" in invalid.stdout
            assert "recall and memory included" in invalid.stdout
            assert invalid.stdout.rstrip().endswith("degraded: grants")
            assert invalid.returncode == 2
            broken.unlink()
            assert bx("down").returncode == 0
            with (home / "memory" / "items.jsonl").open("ab") as items:
                items.write(b"garbage{{{\n")  # bytes after the journal's last append: damage
            assert bx("up").returncode == 0
            shown = bx("status")
            assert "DAMAGED: items.jsonl" in shown.stdout  # memoryd's own line
            assert "damage: PROBLEM - memoryd: items.jsonl" in shown.stdout
            assert shown.stdout.rstrip().endswith("degraded: damage")
            assert shown.returncode == 2
            checks = {c["name"]: c for c in json.loads(bx("status", "--json").stdout)["checks"]}
            assert checks["damage"]["ok"] is False
            assert "runbook: memory-damaged" in checks["damage"]["detail"]
            assert bx("memory", "repair", "--yes").returncode == 0
            assert bx("status").returncode == 0  # repaired: nothing stands
        finally:
            bx("down")


def test_a_web_server_that_is_not_a_model_server_is_said_and_status_is_not_ready(home: Path) -> None:
    """Something else on the model URL's port (a development web server) answers 404 everywhere:
    neither `bxctl up` nor `bxctl status` may call it an OpenAI-compatible server that answers."""
    import http.server
    import threading

    from boxmaker.bxctl import roles
    from boxmaker.bxctl.model import found_line
    from boxmaker.bxctl.status import model_check
    from boxmaker.proto.messages import StatusReply

    class NotFound(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_error(404)

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), NotFound)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}"
        probe = roles.model_probe(url)
        assert not probe.answered
        assert found_line(probe) == (
            f"model: something answers HTTP at {url}, but not as a model server (GET /v1/models: HTTP 404); "
            "check the URL (bxctl up --model-url URL)"
        )
        loopd = StatusReply(role="loopd", pid=1, detail="", data={"model_url": url})
        check = model_check(loopd)
        assert not check.ok
        assert "not as a model server" in check.detail
    finally:
        server.shutdown()
        server.server_close()


def test_status_names_the_pid_that_holds_a_silent_roles_lock(home: Path) -> None:
    """A memoryd that still holds its lock but does not answer (stopping, stuck) is not just "down":
    status names its pid, so the owner knows why `bxctl up` refuses to start another."""
    from boxmaker.bxctl import roles
    from boxmaker.proto.fsio import FileLock, ensure_dir
    from boxmaker.proto.home import Layout

    layout = Layout(home)
    ensure_dir(layout.memory_lock.parent)
    lock = FileLock(layout.memory_lock)  # held as a memoryd holds it, with this pid
    lock.acquire()
    try:
        row = roles.status(layout, roles.MEMORYD)
        assert not row.running
        assert row.pid == os.getpid()
        assert f"pid {os.getpid()} still holds {layout.memory_lock}" in row.detail
        result = CliRunner().invoke(cli, ["status", "--json"])
        assert result.exit_code == 1
        memoryd = next(r for r in json.loads(result.output)["roles"] if r["name"] == "memoryd")
        assert memoryd["pid"] == os.getpid()
        assert not memoryd["running"]
    finally:
        lock.release()
    assert roles.status(layout, roles.MEMORYD).pid is None  # nobody holds it: plain "down"
