"""The memory flush before compaction (issue 19), end to end with real memoryd, brokerd and loopd
processes and the fake llama-server: a session nearing its threshold gets one turn to save, it writes a
fact into memory.md before epoch 1 and the fact is in epoch 1's baseline; a tainted session's flush
leaves identity unchanged (memoryd keeps its write as an untrusted note).

`[compact] threshold` is 0.6 of the fake's 4,096 tokens, so the flush (at 0.55) and the compaction come a
few turns into a session whose start (system.md, the memory block, the tool schemas) is about 1,900.
"""

from __future__ import annotations

import itertools
import json
import re
import tempfile
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from boxmaker.proto.records import EpochEnd, Flush, User, read_log
from boxmaker.proto.settings import packaged_starter
from conftest import bxctl_down
from conftest import bxctl_ok as bxctl
from fakes.llama_server import FakeLlamaServer, FakeReply, default_reply, text_of, tool_using_reply

FLUSH = packaged_starter("flush.md").read_text(encoding="utf-8").strip()
_NOTE = re.compile(r"Note for later: (?P<fact>[^.]+\.)")


def saving_model(body: dict[str, Any]) -> FakeReply:
    """The fake model: asked to flush, it saves the session's "Note for later" with the memory tool."""
    messages = body["messages"]
    users = [text_of(m.get("content")) for m in messages if m.get("role") == "user"]
    if not users or users[-1] != FLUSH:
        return default_reply(body)
    if messages[-1].get("role") == "tool":
        return FakeReply(content="Saved what the owner asked me to keep.")
    note = next((found for text in users if (found := _NOTE.search(text))), None)
    if note is None:
        return FakeReply(content="Nothing to save.")
    fact = note.group("fact")
    return FakeReply(
        tool_calls=[("memory", {"action": "add", "file": "memory", "text": fact[0].upper() + fact[1:]})]
    )


class Page(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        body = b"The launch moved to March."
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        del format, args


@pytest.fixture(scope="module")
def box() -> Iterator[tuple[Path, FakeLlamaServer, str]]:
    root = Path(tempfile.mkdtemp(prefix="bx-fl-", dir="/tmp"))
    home = root / "home"
    page = ThreadingHTTPServer(("127.0.0.1", 0), Page)
    threading.Thread(target=page.serve_forever, daemon=True).start()
    with FakeLlamaServer(n_ctx=4096, slots=2, default=saving_model) as model:
        config = home / "config"
        config.mkdir(parents=True)
        (config / "loopd.toml").write_text(
            f'[model]\nurl = "{model.url}"\n[expect]\nn_ctx = 4096\n[compact]\nthreshold = 0.6\n',
            encoding="utf-8",
        )
        (home / "grants").mkdir(mode=0o700)
        (home / "grants" / "web.toml").write_text(
            'tool = "http_fetch"\nmode = "auto"\nmax_taint = "secret"\nresult_class = "public"\n'
            'untrusted = true\nhosts = ["127.0.0.1"]\n',
            encoding="utf-8",
        )
        bxctl(home, "up")
        try:
            yield home, model, f"http://127.0.0.1:{page.server_address[1]}/news"
        finally:
            bxctl_down(home)
            page.shutdown()
            page.server_close()


def until_compacted(home: Path, session: str) -> None:
    """Chat in `session` until it goes on in epoch 1 (the flush and the compaction run after a turn,
    in the background; the next turn waits for them)."""
    n = 0
    while not (home / "sessions" / session / "1.jsonl").exists():
        n += 1
        assert n < 12, "the session never compacted"
        bxctl(home, "chat", "--session", session, "-m", f"filler {n}: " + "lorem ipsum dolor sit " * 20)


def epoch_zero(home: Path, session: str) -> list[Any]:
    records, _ = read_log(home / "sessions" / session / "0.jsonl")
    return records


def test_a_session_nearing_compaction_saves_a_fact_that_is_in_the_next_epochs_baseline(
    box: tuple[Path, FakeLlamaServer, str],
) -> None:
    home, model, _ = box
    fact = "The heron nests by the old mill."
    bxctl(home, "chat", "--session", "chat-heron", "-m", "Note for later: the heron nests by the old mill.")
    assert fact not in (home / "memory" / "memory.md").read_text()  # the turn itself saved nothing
    until_compacted(home, "chat-heron")
    assert fact in (home / "memory" / "memory.md").read_text()
    baseline = json.loads((home / "sessions" / "chat-heron" / "1.baseline.json").read_text())["system"]
    assert fact in baseline
    records = epoch_zero(home, "chat-heron")
    flushes = [r for r in records if isinstance(r, Flush)]
    assert [(f.outcome, f.why) for f in flushes] == [("done", "")]
    assert isinstance(records[-1], EpochEnd)
    said = next(r for r in records if isinstance(r, User) and r.speaker == "loopd")
    assert said.content == FLUSH
    assert records.index(said) < records.index(flushes[0]) < len(records) - 1
    # every request of epoch 0 on the live slot, the flush's among them, extends the one before it
    sent = [
        body["messages"]
        for path, body in model.requests
        if path == "/v1/chat/completions"
        and body.get("id_slot") == 0
        and body["messages"][1]["content"].startswith("Note for later: the heron")
    ]
    assert len(sent) >= 4
    assert sum(m[-1]["content"] == FLUSH for m in sent) == 1
    for before, after in itertools.pairwise(sent):
        assert after[: len(before)] == before
        assert after[len(before)]["role"] == "assistant"
    shown = bxctl(home, "sessions", "show", "chat-heron", "--json").stdout
    assert json.loads(shown)["epochs"][0]["flush"] == {"outcome": "done", "why": ""}
    journal = [
        json.loads(line)
        for path in sorted((home / "memory" / "edits").glob("*.jsonl"))
        for line in path.read_text().splitlines()
    ]
    [edit] = [e for e in journal if fact in e.get("after", [])]
    assert (edit["session"], edit["action"], edit["where"]) == ("chat-heron", "add", "memory.md")


def test_a_tainted_sessions_flush_leaves_identity_unchanged(box: tuple[Path, FakeLlamaServer, str]) -> None:
    home, model, url = box
    fact = "The kestrel hunts at dawn."
    bxctl(home, "chat", "--session", "chat-web", "-m", "Note for later: the kestrel hunts at dawn.")
    model.script(
        FakeReply(tool_calls=[("call_tool", {"name": "http_fetch", "arguments": {"url": url}})]),
        FakeReply(content="March."),
    )
    fetched = bxctl(home, "chat", "--session", "chat-web", "-m", "What does the news page say?")
    assert "read untrusted content" in fetched.stderr
    memory_before = (home / "memory" / "memory.md").read_text()
    until_compacted(home, "chat-web")
    assert [(f.outcome, f.why) for f in epoch_zero(home, "chat-web") if isinstance(f, Flush)] == [
        ("done", "")
    ]
    assert (home / "memory" / "memory.md").read_text() == memory_before
    assert (home / "memory" / "user.md").read_text().count(fact) == 0
    notes = (home / "memory" / "notes.md").read_text()
    header = notes[: notes.index(fact)].rsplit("§", 1)[1]
    assert "chat-web" in header
    assert "untrusted" in header
    baseline = json.loads((home / "sessions" / "chat-web" / "1.baseline.json").read_text())["system"]
    assert fact not in baseline


def test_the_demo_fakes_tool_mode_saves_notes_for_later_only_on_the_flush_turn() -> None:
    """README: with ``--tools`` the fake model saves "note for later: X" on the memory flush's turn, so
    a newcomer without a model can see the flush save something (and nothing on an ordinary turn)."""
    said = {"role": "user", "content": "Note for later: the heron nests by the old mill."}
    assert tool_using_reply({"messages": [said]}).tool_calls == []
    flush = {"messages": [said, {"role": "assistant", "content": "ok"}, {"role": "user", "content": FLUSH}]}
    assert tool_using_reply(flush).tool_calls == [
        ("memory", {"action": "add", "file": "memory", "text": "The heron nests by the old mill."})
    ]
    nothing = {"messages": [{"role": "user", "content": FLUSH}]}
    assert tool_using_reply(nothing).content == "Nothing to save."
