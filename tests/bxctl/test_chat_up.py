"""bxctl chat against a fake loopd socket, and `bxctl up`'s reading of the model server (DESIGN 10.5)."""

from __future__ import annotations

import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from boxmaker.bxctl import roles
from boxmaker.bxctl.cli import cli
from boxmaker.proto.labels import DataClass, Label
from boxmaker.proto.messages import Body, Chat, ChatReply, Error, LoopAdmin, LoopAdminReply, ToolRun
from boxmaker.proto.wire import FrameServer
from fakes.llama_server import FakeLlamaServer


class FakeLoopd:
    """loopd's owner socket: answers `chat` with `reply` (or `error`), recording the requests."""

    def __init__(self, path: Path) -> None:
        self.requests: list[Chat] = []
        self.error: Error | None = None
        self.tools: list[ToolRun] = []
        self.untrusted = False
        self.compacting: list[str] = []
        self.server = FrameServer(path, self.handle, frozenset({"chat", "status", "loop_admin"}))

    def handle(self, kind: str, body: Body) -> Body:
        if isinstance(body, LoopAdmin):
            return LoopAdminReply(text="", data=self.compacting)
        assert isinstance(body, Chat)
        self.requests.append(body)
        if self.error is not None:
            return self.error
        session = body.session or "chat-new0000000000000000"
        return ChatReply(
            session=session,
            turn=len(self.requests),
            reply=f"you said {body.text}\x1b[31m",
            tools=self.tools,
            untrusted=self.untrusted,
        )


@pytest.fixture
def loopd(home: Path) -> Iterator[FakeLoopd]:
    fake = FakeLoopd(home / "run" / "owner-loop" / "chat.sock")
    fake.server.start()
    yield fake
    fake.server.stop()


def test_one_message_prints_the_reply_escaped_and_notices_on_stderr(loopd: FakeLoopd) -> None:
    loopd.tools = [
        ToolRun(name="recall", code="ok", label=Label(DataClass.PRIVATE, False)),
        ToolRun(name="http_fetch", code="ok", label=Label(DataClass.PUBLIC, True)),
        ToolRun(name="memory", code="refused:tainted", label=None),
    ]
    loopd.untrusted = True
    result = CliRunner().invoke(cli, ["chat", "-m", "hello"])
    assert result.exit_code == 0
    assert result.stdout == "you said hello\\x1b[31m\n"
    session = loopd.requests[0].session
    assert session is not None
    assert re.fullmatch(r"chat-[a-z2-7]{20}", session)
    assert f"[session {session}]" in result.stderr
    assert "[tools: recall, http_fetch (untrusted), memory (refused:tainted)]" in result.stderr
    assert "read untrusted content" in result.stderr
    assert loopd.requests == [Chat(text="hello", session=session)]


def test_interactive_lines_go_on_with_the_same_session(loopd: FakeLoopd) -> None:
    result = CliRunner().invoke(cli, ["chat"], input="first\n\nsecond\n/quit\nnever\n")
    assert result.exit_code == 0
    assert [r.text for r in loopd.requests] == ["first", "second"]
    assert loopd.requests[1].session == loopd.requests[0].session


def test_session_option_is_sent(loopd: FakeLoopd) -> None:
    CliRunner().invoke(cli, ["chat", "--session", "chat-work", "-m", "hi"])
    assert loopd.requests == [Chat(text="hi", session="chat-work")]


@pytest.mark.parametrize("bad", ["Chat", "-x", "a/b", "x" * 65, "owner/../x"])
def test_a_bad_session_id_is_a_usage_error(loopd: FakeLoopd, bad: str) -> None:
    result = CliRunner().invoke(cli, ["chat", "--session", bad, "-m", "hi"])
    assert result.exit_code == 2
    assert "session id" in result.output
    assert loopd.requests == []


def test_an_empty_message_is_a_usage_error(loopd: FakeLoopd) -> None:
    result = CliRunner().invoke(cli, ["chat", "-m", "  "])
    assert result.exit_code == 2
    assert loopd.requests == []


def test_a_failed_turn_exits_1_with_the_runbook_pointer(loopd: FakeLoopd) -> None:
    loopd.error = Error(code="session_full", message="session chat-x is full", runbook="session-full")
    result = CliRunner().invoke(cli, ["chat", "-m", "hi"])
    assert result.exit_code == 1
    assert "session chat-x is full" in result.stderr
    assert "runbook: session-full" in result.stderr


def test_chat_with_loopd_down_says_how_to_start(home: Path) -> None:
    result = CliRunner().invoke(cli, ["chat", "-m", "hi"])
    assert result.exit_code == 1
    assert "loopd does not answer" in result.stderr
    assert "bxctl up" in result.stderr


def test_the_model_probe_reads_props_and_slots() -> None:
    with FakeLlamaServer(n_ctx=2048, slots=3) as server:
        probe = roles.model_probe(server.url)
    assert (probe.answered, probe.llama, probe.n_ctx, probe.slots) == (True, True, 2048, 3)
    with FakeLlamaServer(degraded=True) as server:
        probe = roles.model_probe(server.url)
    assert (probe.answered, probe.llama, probe.n_ctx, probe.slots) == (True, False, None, None)
    probe = roles.model_probe("http://127.0.0.1:9")
    assert not probe.answered
    assert "no model server answers at http://127.0.0.1:9" in probe.detail


def test_loopd_config_text_with_one_slot_shares_it() -> None:
    text = roles.loopd_config_text("http://h:1", 4096, 1)
    assert 'url = "http://h:1"' in text
    assert "n_ctx = 4096" in text
    assert "background = 0" in text
    assert "background = 1" in roles.loopd_config_text("http://h:1", 4096, 2)


def up(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "boxmaker.bxctl", "up", *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_up_without_a_model_server_starts_every_role_and_loopd_waits_for_it(home: Path) -> None:
    result = up("--model-url", "http://127.0.0.1:9")
    try:
        assert result.returncode == 0, result.stderr
        assert "model: no model server answers at http://127.0.0.1:9" in result.stdout
        assert "loopd starts and waits for it (chat works once it runs)" in result.stdout
        config = (home / "config" / "loopd.toml").read_text()
        assert "# n_ctx = 4096" in config
        assert "loopd started" in result.stdout
        status = subprocess.run(
            [sys.executable, "-m", "boxmaker.bxctl", "status"],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert "model: not reachable at http://127.0.0.1:9; chat works once it runs" in status.stdout
        assert status.returncode == 2  # degraded: memory works, the model does not answer yet
    finally:
        subprocess.run([sys.executable, "-m", "boxmaker.bxctl", "down"], timeout=60, check=False)


def test_up_on_a_home_with_loopd_toml_changes_the_model_keys_in_place(home: Path) -> None:
    config = home / "config" / "loopd.toml"
    config.parent.mkdir(parents=True)
    config.write_text(
        '# mine\n[model]\nurl = "http://127.0.0.1:9"   # the old one\n\n[limits]\nmax_tokens = 99  # keep\n'
    )
    with FakeLlamaServer(model_required=True) as server:
        result = up("--model-url", server.url, "--model", "fake-model-q4_k_m.gguf", "--api-key-env", "BX_KEY")
        try:
            assert result.returncode == 0, result.stderr
            text = config.read_text()
            assert text.startswith("# mine\n[model]\n")
            assert "max_tokens = 99  # keep" in text
            assert f'url = "{server.url}"' in text
            assert 'name = "fake-model-q4_k_m.gguf"' in text
            assert 'api_key_env = "BX_KEY"' in text
            assert f'[model] url: "http://127.0.0.1:9" -> "{server.url}"' in result.stdout
            assert "[model] name: (not set) -> " in result.stdout
            shown = subprocess.run(
                [sys.executable, "-m", "boxmaker.bxctl", "model", "--json"],
                check=False,
                capture_output=True,
                text=True,
                timeout=60,
            )
            assert '"name": "fake-model-q4_k_m.gguf"' in shown.stdout
            chat = subprocess.run(
                [sys.executable, "-m", "boxmaker.bxctl", "chat", "-m", "hi"],
                check=False,
                capture_output=True,
                text=True,
                timeout=120,
            )
            assert chat.returncode == 0, chat.stderr  # the server needs the name, and it is sent
            assert chat.stdout == "ok: hi\n"
        finally:
            subprocess.run([sys.executable, "-m", "boxmaker.bxctl", "down"], timeout=60, check=False)


def test_up_refuses_an_n_ctx_the_server_contradicts(home: Path) -> None:
    with FakeLlamaServer(n_ctx=4096) as server:
        result = up("--model-url", server.url, "--n-ctx", "8192")
    assert result.returncode == 1
    assert "4,096 tokens of context per slot but --n-ctx says 8,192" in result.stderr


def test_up_refuses_a_url_that_is_not_http(home: Path) -> None:
    result = up("--model-url", "localhost:8080")
    assert result.returncode == 2
    assert "not an http:// or https:// URL" in result.stderr


def test_up_with_an_openai_server_needs_n_ctx(home: Path) -> None:
    with FakeLlamaServer(degraded=True) as server:
        result = up("--model-url", server.url)
    assert result.returncode == 1
    assert "does not report its context size" in result.stderr


def test_an_unknown_command_is_not_a_traceback() -> None:
    result = CliRunner().invoke(cli, ["chatt"])
    assert result.exit_code == 2
    assert "No such command 'chatt'" in result.output


def test_tool_names_from_the_model_are_escaped(loopd: FakeLoopd) -> None:
    loopd.tools = [ToolRun(name="\x1b]0;pwned\x07\x1b[31mRED", code="refused:\x1b[2J", label=None)]
    result = CliRunner().invoke(cli, ["chat", "-m", "hello"])
    assert "\x1b" not in result.stderr
    assert "\\x1b]0;pwned\\x07\\x1b[31mRED (refused:\\x1b[2J)" in result.stderr


def test_text_that_is_not_utf8_or_too_long_is_refused_before_sending(loopd: FakeLoopd) -> None:
    bad = CliRunner().invoke(cli, ["chat", "-m", "bad \udcff arg"])
    assert bad.exit_code == 2
    assert "not UTF-8" in bad.output
    long = CliRunner().invoke(cli, ["chat", "-m", "x" * 100_001])
    assert long.exit_code == 2
    assert "100,001 characters; at most 100,000" in long.output
    assert loopd.requests == []


def test_piped_lines_go_on_after_a_bad_line_and_exit_1(loopd: FakeLoopd) -> None:
    result = CliRunner().invoke(cli, ["chat"], input=b"bad \xff\xfe bytes\nok line\n")
    assert result.exit_code == 1
    assert "line 1 is not UTF-8 (byte 5); not sent" in result.stderr
    assert [r.text for r in loopd.requests] == ["ok line"]


def test_piped_lines_go_on_after_a_failed_turn_with_one_error_each(loopd: FakeLoopd) -> None:
    loopd.error = Error(code="session_full", message="session chat-x is full", runbook="session-full")
    result = CliRunner().invoke(cli, ["chat"], input="a\nb\n")
    assert result.exit_code == 1
    assert result.stderr.count("session chat-x is full") == 2
    assert [r.text for r in loopd.requests] == ["a", "b"]


def test_a_cut_reply_is_flagged(loopd: FakeLoopd) -> None:
    original = loopd.handle

    def cut(kind: str, body: Body) -> Body:
        reply = original(kind, body)
        assert isinstance(reply, ChatReply)
        return ChatReply(reply.session, reply.turn, reply.reply, reply.tools, reply.untrusted, cut=True)

    loopd.server.handler = cut
    result = CliRunner().invoke(cli, ["chat", "-m", "hello"])
    assert "the reply was cut short" in result.stderr


@pytest.mark.parametrize(
    ("url", "says"),
    [
        ("http://127.0.0.1:notaport", "is not a valid URL"),
        ("http://[::1", "is not a valid URL"),
        ("http://", "no host"),
    ],
)
def test_up_refuses_a_broken_url_in_one_sentence(home: Path, url: str, says: str) -> None:
    result = up("--model-url", url)
    assert result.returncode == 2
    assert says in result.stderr
    assert "Traceback" not in result.stderr


def test_up_takes_a_url_ending_in_v1(home: Path) -> None:
    with FakeLlamaServer(n_ctx=4096) as server:
        result = up("--model-url", server.url + "/v1/", "--n-ctx", "4096")
        try:
            assert result.returncode == 0, result.stderr
            assert f'url = "{server.url}"' in (home / "config" / "loopd.toml").read_text()
        finally:
            subprocess.run([sys.executable, "-m", "boxmaker.bxctl", "down"], timeout=60, check=False)


def test_up_shows_only_this_starts_errors(home: Path) -> None:
    config = home / "config" / "loopd.toml"
    config.parent.mkdir(parents=True)
    config.write_text("[limits]\nmax_tokens = 0\n")
    try:
        first = up("--n-ctx", "4096")
        assert "[limits] max_tokens" in first.stderr
        config.write_text("[limits]\ntool_calls_per_turn = -1\n")
        second = up("--n-ctx", "4096")
        assert "tool_calls_per_turn" in second.stderr
        assert "max_tokens" not in second.stderr
    finally:
        subprocess.run([sys.executable, "-m", "boxmaker.bxctl", "down"], timeout=60, check=False)


def test_chat_says_when_a_call_waits_for_approval(home: Path, loopd: FakeLoopd) -> None:
    import time

    from boxmaker.proto.messages import BrokerAdmin, BrokerAdminReply

    def approvals(kind: str, body: Body) -> Body:
        assert isinstance(body, BrokerAdmin)
        waiting = [
            {"id": "a-other", "session": "chat-someone-else", "tool": "read_file"},
            {"id": "a-k3v9q2xw", "session": "chat-ask", "tool": "http_fetch"},
        ]
        return BrokerAdminReply(text="", data={"approvals": waiting})

    broker = FrameServer(home / "run" / "owner-broker" / "admin.sock", approvals, frozenset({"broker_admin"}))
    broker.start()
    original = loopd.handle

    def slow(kind: str, body: Body) -> Body:
        time.sleep(1.6)
        return original(kind, body)

    loopd.server.handler = slow
    try:
        result = CliRunner().invoke(cli, ["chat", "--session", "chat-ask", "-m", "fetch it"])
    finally:
        broker.stop()
    assert result.exit_code == 0
    assert result.stderr.count("[waiting for your approval of http_fetch: bxctl approve a-k3v9q2xw") == 1
    assert "a-other" not in result.stderr


def test_an_endless_piped_line_is_skipped_without_holding_it(loopd: FakeLoopd) -> None:
    data = b"x" * 1_000_000 + b"\nshort\n"
    result = CliRunner().invoke(cli, ["chat"], input=data)
    assert result.exit_code == 1
    assert "line 1 is over 100,000 characters; not sent" in result.stderr
    assert [r.text for r in loopd.requests] == ["short"]


def test_a_url_with_a_password_is_refused(home: Path) -> None:
    result = up("--model-url", "http://user:pw@127.0.0.1:8080")
    assert result.returncode == 2
    assert "cannot hold a user name or password" in result.stderr
    assert "user:pw" not in result.stderr  # a secret given by mistake is not echoed


@pytest.mark.parametrize(("n_ctx", "slots"), [(4096, 2), (8192, 1), (None, None)])
def test_the_loopd_config_up_writes_is_one_loopd_reads(
    home: Path, n_ctx: int | None, slots: int | None
) -> None:
    from boxmaker.loopd import config as loopd_config

    path = home.parent / "loopd.toml"
    path.write_text(roles.loopd_config_text("http://127.0.0.1:8080", n_ctx, slots, "from --n-ctx"))
    loaded = loopd_config.load(path, str(home))
    assert loaded.expect_n_ctx == n_ctx
    assert loaded.background_slot == (0 if slots == 1 else 1)
    assert loaded.heartbeat_every_s == 0
    assert loaded.summarise == frozenset({"http_fetch"})


def test_chat_says_when_the_session_is_being_compacted(loopd: FakeLoopd) -> None:
    import time

    loopd.compacting = ["chat-long"]
    original = loopd.handle

    def slow(kind: str, body: Body) -> Body:
        if isinstance(body, Chat):
            time.sleep(1.6)
        return original(kind, body)

    loopd.server.handler = slow
    result = CliRunner().invoke(cli, ["chat", "--session", "chat-long", "-m", "go on"])
    assert result.exit_code == 0
    assert result.stderr.count("[the session is being compacted") == 1
