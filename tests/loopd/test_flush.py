"""The memory flush before compaction (issue 19), against the fake llama-server and a fake memoryd whose
memory block takes what the flush writes: the flush runs once per epoch at threshold - flush_margin,
on the session's own slot and tools, before compaction; its write is in the next epoch's baseline; a
failing or slow flush does not stop compaction and is said once; the epoch's requests stay strict
extensions of each other; `flush = false` sends nothing more. The identity-write rule for a tainted
session's flush is checked with the real daemons in tests/test_flush_e2e.py.
"""

from __future__ import annotations

import itertools
import json
import logging
import math
import re
import time
from fractions import Fraction
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from test_loop import FakeBroker, FakeMemory, Rig

from boxmaker.loopd.compact import fallback_summary
from boxmaker.loopd.flush import (
    FLUSH_SPEAKER,
    Budget,
    budget,
    outside_sentence,
    reply_room,
    room_sentence,
    timeout_sentence,
)
from boxmaker.loopd.loop import LoopSettings
from boxmaker.loopd.model import Completion, ModelError
from boxmaker.loopd.session import Session
from boxmaker.loopd.tools import core_tools
from boxmaker.loopd.trigger import flush_due
from boxmaker.proto.messages import ToolRequest, ToolResponse
from boxmaker.proto.records import Assistant, EpochEnd, Flush, ToolResult, Usage, User
from boxmaker.proto.settings import packaged_starter
from fakes.llama_server import FakeLlamaServer, FakeReply, default_reply, text_of

FLUSH = packaged_starter("flush.md").read_text(encoding="utf-8").strip()
NOTE = "Note for later: the boat is called Marigold."
FACT = "The boat is called Marigold."
SUMMARY = "The owner named the boat; a long text followed."


def saving_model(body: dict[str, Any]) -> FakeReply:
    """The fake model: asked to flush, it saves the owner's note with the memory tool and says so."""
    messages = body["messages"]
    users = [m for m in messages if m.get("role") == "user"]
    if not users or text_of(users[-1].get("content")) != FLUSH:
        return default_reply(body)
    if messages[-1].get("role") == "tool":
        return FakeReply(content="Saved the boat's name.")
    return FakeReply(tool_calls=[("memory", {"action": "add", "file": "memory", "text": FACT})])


class MemoryBroker(FakeBroker):
    """A broker whose memory tool's `add` reaches the fake memoryd's block (as memoryd's would)."""

    def __init__(self, memory: FakeMemory) -> None:
        super().__init__()
        self.memory = memory

    def call(self, request: ToolRequest) -> ToolResponse:
        if request.tool == "memory" and request.arguments.get("action") == "add":
            self.memory.text += "\n§\n" + str(request.arguments["text"])
        return super().call(request)


def deep(home: Path, at: float, session: str = "chat-one", **changes: Any) -> Rig:
    """A rig whose `session` is `at` x n_ctx deep after its first turn (which holds the note); a
    ``heartbeat`` session runs on the background slot."""
    rig = Rig(home, server=FakeLlamaServer(n_ctx=1_000_000, slots=2))
    rig.server.default = saving_model
    rig.broker = MemoryBroker(rig.memory)
    rig.loop.broker = rig.broker
    rig.loop.turn(session, NOTE + " " + "word " * 20000, background=session == "heartbeat")
    depth = Session.open(rig.sessions, session).depth()
    assert depth is not None
    base = {"main_slot": 0, "tool_calls_per_turn": 16, "max_tokens": 256, "background_slot": 1}
    rig.loop.settings = LoopSettings(**{**base, "n_ctx": math.ceil(depth / at), **changes})
    return rig


def is_flush(request: dict[str, Any]) -> bool:
    users = [m for m in request["messages"] if m["role"] == "user"]
    return bool(users) and users[-1]["content"] == FLUSH


def flush_records(rig: Rig, epoch: int = 0) -> list[Flush]:
    return [r for r in rig.records("chat-one", epoch) if isinstance(r, Flush)]


def test_a_session_nearing_the_threshold_flushes_a_fact_that_is_in_the_next_epochs_baseline(
    home: Path,
) -> None:
    rig = deep(home, at=0.81)  # past 0.80 (0.85 - 0.05), short of 0.85
    before = len(rig.chat_requests())
    second = rig.loop.turn("chat-one", "second")
    assert second.epoch == 0  # flushed, not compacted
    sent = rig.chat_requests()[before:]
    assert [is_flush(r) for r in sent] == [True, True, False]  # the call, its answer, then the turn
    for request in sent[:2]:  # the session's own slot and tools
        assert request["id_slot"] == 0
        assert request["tools"] == core_tools()
        assert request["max_tokens"] <= 256
    assert [(r.session, r.tool) for r in rig.broker.requests] == [("chat-one", "memory")]
    records = rig.records("chat-one")
    flush_user = [r for r in records if isinstance(r, User) and r.speaker == FLUSH_SPEAKER]
    assert [u.content for u in flush_user] == [FLUSH]
    assert [(f.outcome, f.why) for f in flush_records(rig)] == [("done", "")]
    assert records.index(flush_user[0]) < records.index(flush_records(rig)[0])
    # once per epoch: the next turn at the same depth does not flush again
    rig.loop.turn("chat-one", "third")
    assert sum(is_flush(r) for r in rig.chat_requests()) == 2
    # a new loopd process reads the epoch's flush from the log and does not run it again
    fresh = Rig(home, server=rig.server)
    fresh.loop.settings, fresh.loop.memory = rig.loop.settings, rig.memory
    fresh.loop.turn("chat-one", "fourth")
    assert sum(is_flush(r) for r in rig.chat_requests()) == 2
    # then the session reaches the threshold: compaction, with no second flush, into epoch 1
    rig.loop.turn("chat-one", "fifth " + "more " * 3000)
    rig.server.script(FakeReply(content=SUMMARY))
    compacted = rig.loop.turn("chat-one", "sixth")
    assert compacted.epoch == 1
    assert sum(is_flush(r) for r in rig.chat_requests()) == 2
    assert isinstance(rig.records("chat-one", 0)[-1], EpochEnd)
    one = json.loads((rig.sessions / "chat-one" / "1.baseline.json").read_text())["system"]
    zero = json.loads((rig.sessions / "chat-one" / "0.baseline.json").read_text())["system"]
    assert FACT in one
    assert FACT not in zero


def test_the_requests_of_an_epoch_strictly_extend_each_other_across_the_flush(home: Path) -> None:
    rig = deep(home, at=0.81)
    for text in ("second", "third"):
        rig.loop.turn("chat-one", text)
    main = [r for r in rig.chat_requests() if r.get("id_slot") == 0]
    assert sum(is_flush(r) for r in main) == 2
    for previous, following in itertools.pairwise(main):
        assert following["messages"][: len(previous["messages"])] == previous["messages"]
        assert following["messages"][len(previous["messages"])]["role"] == "assistant"  # its reply
    # and the server reused the whole of each previous prompt and reply (the fake counts tokens)
    usages = [r for r in rig.records("chat-one") if isinstance(r, Usage)]
    assert len(usages) == len(main)
    for previous, following in itertools.pairwise(usages):
        assert following.cache_n == previous.cache_n + previous.prompt_n + previous.predicted_n - 1


def test_a_flush_due_with_the_compaction_runs_first_and_the_summary_sees_it(home: Path) -> None:
    rig = deep(home, at=0.9)  # a turn that jumped past both
    rig.server.script(FakeReply(tool_calls=[("memory", {"action": "add", "file": "memory", "text": FACT})]))
    rig.server.script(FakeReply(content="Saved."), FakeReply(content=SUMMARY))
    before = len(rig.chat_requests())
    result = rig.loop.turn("chat-one", "second")
    assert result.epoch == 1
    sent = rig.chat_requests()[before:]
    assert [("tools" in r, r["id_slot"]) for r in sent] == [(True, 0), (True, 0), (False, 1), (True, 0)]
    assert sent[2]["messages"][-2] == {"role": "assistant", "content": "Saved."}  # the summary saw it
    assert FACT in json.loads((rig.sessions / "chat-one" / "1.baseline.json").read_text())["system"]
    summary_fallback = fallback_summary(Session.open(rig.sessions, "chat-one"), 4000)
    assert FLUSH not in summary_fallback  # loopd's prompt is not one of the owner's messages


def test_a_session_on_the_background_slot_flushes_there(home: Path) -> None:
    rig = deep(home, at=0.81, session="heartbeat")
    before = len(rig.chat_requests())
    rig.loop.turn("heartbeat", "It is time.", background=True, speaker="scheduler")
    sent = rig.chat_requests()[before:]
    assert [(is_flush(r), r["id_slot"], "tools" in r) for r in sent] == [(True, 1, True)] * 2 + [
        (False, 1, True)
    ]
    assert [(r.session, r.tool) for r in rig.broker.requests] == [("heartbeat", "memory")]


def test_flush_false_sends_no_extra_request(home: Path) -> None:
    rig = deep(home, at=0.9, flush=False)
    rig.server.script(FakeReply(content=SUMMARY))
    before = len(rig.chat_requests())
    assert rig.loop.turn("chat-one", "second").epoch == 1
    sent = rig.chat_requests()[before:]
    assert [("tools" in r, r["id_slot"]) for r in sent] == [(False, 1), (True, 0)]
    assert not any(is_flush(r) for r in rig.chat_requests())
    assert flush_records(rig) == []
    assert rig.broker.requests == []


class FailingFlush:
    """A model that fails every flush request (HTTP 500) and passes the rest on."""

    def __init__(self, model: Any) -> None:
        self.model = model

    def complete(
        self,
        messages: list[dict[str, Any]],
        tools: list[dict[str, Any]] | None,
        slot: int | None,
        max_tokens: int | None = None,
        **extra: Any,
    ) -> Completion:
        if messages[-1].get("content") == FLUSH:
            raise ModelError("the model server answered HTTP 500: out of memory")
        result: Completion = self.model.complete(messages, tools, slot, max_tokens, **extra)
        return result


def test_a_failing_flush_does_not_stop_compaction_and_is_said_once(
    home: Path, caplog: pytest.LogCaptureFixture
) -> None:
    rig = deep(home, at=0.9)
    rig.loop.model = FailingFlush(rig.loop.model)
    rig.server.script(FakeReply(content=SUMMARY))
    with caplog.at_level(logging.WARNING, logger="boxmaker.loopd"):
        result = rig.loop.turn("chat-one", "second")
        assert result.epoch == 1
        assert result.reply == "ok: second"
        rig.loop.turn("chat-one", "third")
    said = [r.getMessage() for r in caplog.records if "memory flush" in r.getMessage()]
    assert len(said) == 1
    assert "HTTP 500: out of memory" in said[0]
    assert "compacted without it" in said[0]
    [record] = flush_records(rig)
    assert record.outcome == "failed"
    assert "HTTP 500: out of memory" in record.why
    assert not any(isinstance(r, User) and r.speaker for r in rig.records("chat-one"))  # nothing logged
    assert isinstance(rig.records("chat-one")[-1], EpochEnd)


def test_a_slow_flush_times_out_and_compaction_goes_on(home: Path) -> None:
    rig = deep(home, at=0.9, flush_timeout_s=0.2)

    def slow(body: dict[str, Any]) -> FakeReply:
        if is_flush(body):
            time.sleep(0.6)
        return saving_model(body)

    rig.server.default = slow
    started = time.monotonic()
    result = rig.loop.turn("chat-one", "second")
    assert time.monotonic() - started < 5
    assert result.epoch == 1
    [record] = flush_records(rig)
    assert (record.outcome, record.why) == ("failed", timeout_sentence(0.2))
    assert rig.broker.requests == []  # the abandoned reply was never acted on


def test_no_room_left_is_a_failed_flush_without_a_request(home: Path) -> None:
    rig = deep(home, at=0.999)
    rig.server.script(FakeReply(content=SUMMARY))
    before = len(rig.chat_requests())
    assert rig.loop.turn("chat-one", "second").epoch == 1
    assert not any(is_flush(r) for r in rig.chat_requests()[before:])
    [record] = flush_records(rig)
    assert record.outcome == "failed"
    assert "too little of the context was left" in record.why


def test_the_budget_fits_in_what_is_left() -> None:
    assert budget(1000, 1000, "x" * 300, 2048, 16) is None
    assert budget(20_000, 32_768, "x" * 900, 2048, 16) == Budget(2048, 16)
    assert budget(80_000, 100_000, "x" * 900, 200, 3) == Budget(200, 3)
    small = budget(3_300, 4_096, "x" * 900, 2048, 16)
    left = 4_096 - 3_300 - (300 + 16)
    assert small == Budget(left // 2, 1)
    assert small.max_tokens + small.calls * 128 + 64 <= left
    assert reply_room(4_096, 3_300, 900, None) == left // 2
    assert reply_room(4_096, 4_000, 900, 2048) < 0


def test_a_flush_stops_when_too_little_of_the_context_is_left(home: Path) -> None:
    rig = deep(home, at=0.95)
    rig.broker.outputs["recall"] = "found " * 1500  # 9,000 characters: more than is left
    rig.server.script(FakeReply(tool_calls=[("recall", {"query": "boat"})]), FakeReply(content=SUMMARY))
    before = len(rig.chat_requests())
    assert rig.loop.turn("chat-one", "second").epoch == 1
    sent = rig.chat_requests()[before:]
    assert [(is_flush(r), r["id_slot"]) for r in sent] == [(True, 0), (False, 1), (False, 0)]
    records = rig.records("chat-one")
    closing = [r for r in records if isinstance(r, Assistant) and r.content == room_sentence()]
    assert len(closing) == 1
    assert records.index(closing[0]) == len(records) - 3  # then the flush record, then epoch_end
    assert [f.outcome for f in flush_records(rig)] == ["done"]


@given(
    depth=st.integers(min_value=0, max_value=10**6),
    n_ctx=st.integers(min_value=1, max_value=10**6),
    threshold=st.integers(min_value=1, max_value=100),
    margin=st.integers(min_value=0, max_value=99),
)
def test_flush_due_is_exact_at_threshold_minus_margin(
    depth: int, n_ctx: int, threshold: int, margin: int
) -> None:
    at = max(Fraction(threshold - margin, 100), Fraction(0))
    assert flush_due(depth, n_ctx, threshold / 100, margin / 100) == (depth >= at * n_ctx)


def test_flush_due_at_80_percent_of_the_default_threshold() -> None:
    assert flush_due(80, 100, 0.85, 0.05)
    assert not flush_due(79, 100, 0.85, 0.05)
    assert not flush_due(None, 100, 0.85, 0.05)
    assert not flush_due(80, None, 0.85, 0.05)


def test_the_flush_settings_and_their_defaults(home: Path) -> None:
    from boxmaker.loopd import config as loopd_config
    from boxmaker.proto.errors import ConfigError

    defaults = loopd_config.load(None, str(home))
    assert (defaults.flush, defaults.flush_margin, defaults.flush_timeout_s) == (True, 0.05, 60.0)
    assert defaults.flush_prompt == packaged_starter("flush.md")
    path = home.parent / "loopd.toml"
    path.write_text("[compact]\nflush = false\nflush_margin = 0.1\nflush_timeout_s = 5\n", encoding="utf-8")
    read = loopd_config.load(path, str(home))
    assert (read.flush, read.flush_margin, read.flush_timeout_s) == (False, 0.1, 5.0)
    (home.parent / "flush.md").write_text("Save now.", encoding="utf-8")
    assert loopd_config.load(path, str(home)).flush_prompt == home.parent / "flush.md"
    for text, said in [
        ("threshold = 0.3\nflush_margin = 0.3\n", "flush_margin = 0.3 must be below threshold = 0.3"),
        ("flush_timeout_s = 0\n", "flush_timeout_s"),
        ("flush_margin = -0.1\n", "flush_margin"),
        ("flush_prompt = 'absent.md'\n", "flush_prompt"),
        ("flush_now = true\n", "flush_now"),
    ]:
        path.write_text("[compact]\n" + text, encoding="utf-8")
        with pytest.raises(ConfigError, match=re.escape(said)):
            loopd_config.load(path, str(home))
    path.write_text("[compact]\nflush = false\nthreshold = 0.3\nflush_margin = 0.3\n", encoding="utf-8")
    assert not loopd_config.load(path, str(home)).flush  # off: the margin is not used


def test_the_flush_runs_only_the_memory_tools(home: Path) -> None:
    rig = deep(home, at=0.81)
    fetch = ("call_tool", {"name": "http_fetch", "arguments": {"url": "http://127.0.0.1:9/x"}})
    rig.server.script(
        FakeReply(tool_calls=[fetch, ("recall", {"query": "boat"})]), FakeReply(content="Nothing new.")
    )
    rig.loop.turn("chat-one", "second")
    assert [r.tool for r in rig.broker.requests] == ["recall"]  # http_fetch never reached brokerd
    results = [r for r in rig.records("chat-one") if isinstance(r, ToolResult)]
    assert [(r.call, r.content) for r in results] == [
        ("http_fetch", outside_sentence("http_fetch")),
        ("recall", "result of recall"),
    ]
    assert [f.outcome for f in flush_records(rig)] == ["done"]


def test_the_flush_prompt_is_not_indexed_but_what_the_flush_saved_is() -> None:
    from boxmaker.memoryd.index.walk import Rows, Walk, walk_records
    from boxmaker.proto.labels import DataClass
    from boxmaker.proto.records import ToolCall

    call = ToolCall(id="c1", name="memory", arguments=json.dumps({"action": "add", "text": FACT}))
    records = [
        User(time="2026-11-29T12:00:00Z", content=FLUSH, speaker=FLUSH_SPEAKER),
        Assistant(time="2026-11-29T12:00:01Z", tool_calls=[call]),
        Assistant(time="2026-11-29T12:00:02Z", content="Saved the boat's name."),
    ]
    rows = Rows()
    lines = [(n * 100, 0) for n in range(len(records))]  # (line offset, check): not read here
    walk_records(1, 1, records, lines, Walk(), max_class=DataClass.PRIVATE, rows=rows)
    shown = [searchable[0] for searchable in rows.searchable]
    assert not any(FLUSH in text for text in shown)
    assert any(FACT in text for text in shown)
    assert "Saved the boat's name." in shown
