"""M5d-1's device check, end to end with real memoryd, brokerd and loopd processes and the fake
llama-server, with `[compact] threshold` lowered: a session writes a distinctive fact into memory.md,
continues until it compacts, and the next turn's baseline holds the fact; recall of a phrase from epoch 0
still hits; the session stays untrusted across the epoch change after a tainted recall.
"""

from __future__ import annotations

import json
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from boxmaker.proto.records import EpochEnd, Flush, ToolResult, User, read_log
from conftest import bxctl_down
from conftest import bxctl_ok as bxctl
from fakes.llama_server import FakeLlamaServer, FakeReply

FACT = "The heron nests by the old mill."


@pytest.fixture
def box() -> Iterator[tuple[Path, FakeLlamaServer]]:
    root = Path(tempfile.mkdtemp(prefix="bx-ep-", dir="/tmp"))
    home = root / "home"
    with FakeLlamaServer(n_ctx=4096, slots=2) as model:
        config = home / "config"
        config.mkdir(parents=True)
        (config / "loopd.toml").write_text(
            f'[model]\nurl = "{model.url}"\n[expect]\nn_ctx = 4096\n[compact]\nthreshold = 0.35\n',
            encoding="utf-8",
        )
        bxctl(home, "up")
        try:
            yield home, model
        finally:
            bxctl_down(home)


def epochs(home: Path, session: str) -> list[dict[str, object]]:
    data = json.loads(bxctl(home, "sessions", "show", session, "--json").stdout)
    found: list[dict[str, object]] = data["epochs"]
    return found


def test_a_long_session_goes_on_in_a_new_epoch_with_its_memory(box: tuple[Path, FakeLlamaServer]) -> None:
    home, model = box
    model.script(
        FakeReply(tool_calls=[("memory", {"action": "add", "file": "memory", "text": FACT})]),
        FakeReply(content="Noted."),
    )
    bxctl(home, "chat", "--session", "chat-long", "-m", "Remember: the heron nests by the old mill.")
    assert FACT in (home / "memory" / "memory.md").read_text()
    model.script(FakeReply(tool_calls=[("recall", {"query": "heron mill"})]), FakeReply(content="The mill."))
    bxctl(home, "chat", "--session", "chat-long", "-m", "Where does the heron nest?")
    n = 0
    while len(epochs(home, "chat-long")) < 2:
        n += 1
        assert n < 40, "the session never compacted"
        bxctl(home, "chat", "--session", "chat-long", "-m", f"message {n}: " + "lorem ipsum dolor sit " * 20)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and not (home / "sessions" / "chat-long" / "1.jsonl").exists():
        time.sleep(0.1)
    after = bxctl(home, "chat", "--session", "chat-long", "-m", "Are you still there?")
    assert "[the session was compacted: it goes on in epoch" in after.stderr
    baseline = json.loads((home / "sessions" / "chat-long" / "1.baseline.json").read_text())["system"]
    assert FACT in baseline
    zero = json.loads((home / "sessions" / "chat-long" / "0.baseline.json").read_text())["system"]
    assert FACT not in zero
    zero_log = read_log(home / "sessions" / "chat-long" / "0.jsonl")[0]
    end = zero_log[-1]
    assert isinstance(end, EpochEnd)
    assert end.summary  # the fake's own text, as the summary
    # the memory flush (issue 19, on by default) asked the model once more before the summary; the fake
    # answered without a tool call, so it saved nothing
    assert [r.speaker for r in zero_log if isinstance(r, User)].count("loopd") == 1
    assert [(r.outcome, r.why) for r in zero_log if isinstance(r, Flush)] == [("done", "")]
    shown = bxctl(home, "sessions", "show", "chat-long").stdout
    assert "summary carried into epoch 1" in shown
    # recall of a phrase from epoch 0 still hits, for the owner and for the agent; the new epoch is indexed
    assert "Where does the heron nest?" in bxctl(home, "memory", "search", "heron nest").stdout
    assert "Are you still there?" in bxctl(home, "memory", "search", "still there").stdout
    last_epoch = len(epochs(home, "chat-long")) - 1
    model.script(
        FakeReply(tool_calls=[("recall", {"query": "where heron nest"})]), FakeReply(content="By the mill.")
    )
    bxctl(home, "chat", "--session", "chat-long", "-m", "Where was that heron again?")
    records, _ = read_log(home / "sessions" / "chat-long" / f"{last_epoch}.jsonl")
    hit = [r for r in records if isinstance(r, ToolResult)][-1].content
    assert "Where does the heron nest?" in hit


def test_untrusted_stays_true_across_the_epoch_change(box: tuple[Path, FakeLlamaServer]) -> None:
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    class Page(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            body = b"The launch moved to March."
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:
            del format, args

    home, model = box
    page = ThreadingHTTPServer(("127.0.0.1", 0), Page)
    threading.Thread(target=page.serve_forever, daemon=True).start()
    try:
        (home / "grants").mkdir(mode=0o700, exist_ok=True)
        (home / "grants" / "web.toml").write_text(
            'tool = "http_fetch"\nmode = "auto"\nmax_taint = "secret"\nresult_class = "public"\n'
            'untrusted = true\nhosts = ["127.0.0.1"]\n',
            encoding="utf-8",
        )
        url = f"http://127.0.0.1:{page.server_address[1]}/news"
        model.script(
            FakeReply(tool_calls=[("call_tool", {"name": "http_fetch", "arguments": {"url": url}})]),
            FakeReply(content="March."),
        )
        fetched = bxctl(home, "chat", "--session", "chat-web", "-m", "What does the news page say?")
        assert "read untrusted content" in fetched.stderr
        n = 0
        while len(epochs(home, "chat-web")) < 2:
            n += 1
            assert n < 40, "the session never compacted"
            bxctl(home, "chat", "--session", "chat-web", "-m", f"filler {n} " + "lorem ipsum dolor " * 25)
        later = bxctl(home, "chat", "--session", "chat-web", "-m", "Anything else?")
        assert "read untrusted content" in later.stderr
        data = json.loads(bxctl(home, "sessions", "--json").stdout)
        web = next(s for s in data if s["session"] == "chat-web")
        assert web["untrusted"]
        assert not web["epochs"][-1]["untrusted"]  # the new epoch read nothing itself; the session did
        # and a memory add in the new epoch still becomes an untrusted note
        model.script(
            FakeReply(
                tool_calls=[("memory", {"action": "add", "file": "memory", "text": "Launch is in March."})]
            ),
            FakeReply(content="ok"),
        )
        bxctl(home, "chat", "--session", "chat-web", "-m", "Remember the launch month.")
        assert "Launch is in March." not in (home / "memory" / "memory.md").read_text()
        assert "Launch is in March." in (home / "memory" / "notes.md").read_text()
    finally:
        page.shutdown()
        page.server_close()
