"""A turn that fails or is cancelled never poisons its session (issue 18; docs/session-log.md, "A turn
that did not finish"), and the requests loopd sends are ones every real server takes.

The fake model server refuses what real servers refuse (null assistant content, a missing
`tool_choice` read as "none" by llama-cpp-python), so these are plain tests of the wire, too.
"""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from test_loop import Rig

from boxmaker.loopd.model import ModelClient
from boxmaker.loopd.turn import Control, TurnCancelled, TurnFailed, closing_sentence, unanswered_sentence
from boxmaker.memoryd.index.walk import Rows, Walk, walk_records
from boxmaker.proto.labels import DataClass
from boxmaker.proto.records import Assistant, ToolResult, TurnEnd, Usage, User
from fakes.llama_server import FakeLlamaServer, FakeReply


@pytest.fixture
def rig(home: Path) -> Rig:
    return Rig(home)


def _prefix(earlier: list[dict[str, Any]], later: list[dict[str, Any]]) -> bool:
    return later[: len(earlier)] == earlier and len(later) > len(earlier)


@pytest.mark.parametrize("degraded", [False, True], ids=["llama-server", "llama-cpp-python"])
def test_a_failure_after_a_tool_call_closes_the_turn_and_the_next_turn_extends_it(
    home: Path, degraded: bool
) -> None:
    rig = Rig(home, server=FakeLlamaServer(degraded=degraded))
    working = rig.loop.model
    rig.server.script(FakeReply(tool_calls=[("clock", {})]))
    rig.broker.on_call = lambda: setattr(rig.loop, "model", ModelClient("http://127.0.0.1:9", timeout=2.0))
    with pytest.raises(TurnFailed) as failed:
        rig.loop.turn("chat-one", "what time is it")
    assert failed.value.code == "model-unreachable"
    assert [t.name for t in failed.value.tools] == ["clock"]  # what it did is kept and said
    kinds = [type(r).__name__ for r in rig.records("chat-one")]
    assert kinds == ["SessionStart", "User", "Assistant", "Usage", "ToolResult", "Assistant", "TurnEnd"]
    closing, end = rig.records("chat-one")[-2:]
    assert closing.content == closing_sentence("model-unreachable")
    assert end == TurnEnd(time=end.time, reason="failed", code="model-unreachable")
    sent_before = rig.chat_requests()[-1]["messages"]

    rig.broker.on_call = None
    rig.loop.model = working
    rig.loop.forget("chat-one")  # read again from disk: the replay of what was logged
    assert rig.loop.turn("chat-one", "and now?").reply == "ok: and now?"
    sent_after = rig.chat_requests()[-1]["messages"]
    assert _prefix(sent_before, sent_after)  # strict extension: the slot's cache still holds
    replayed = [m for m in sent_after if m["role"] == "assistant"]
    assert all(isinstance(m["content"], str) for m in replayed)  # never null (llama-cpp-python: 500)


def test_every_tool_request_sends_tool_choice_auto_and_the_degraded_server_then_calls_tools(
    home: Path,
) -> None:
    rig = Rig(home, server=FakeLlamaServer(degraded=True))
    rig.server.script(FakeReply(tool_calls=[("clock", {})]), FakeReply(content="It is noon."))
    result = rig.loop.turn("chat-one", "what time is it")
    assert result.reply == "It is noon."
    assert [r.name for r in result.tools] == ["clock"]
    assert all(body["tool_choice"] == "auto" for body in rig.chat_requests())


def test_a_cancel_between_tool_calls_answers_the_calls_left_and_keeps_what_ran(rig: Rig) -> None:
    control = Control()
    rig.server.script(FakeReply(tool_calls=[("clock", {}), ("recall", {"query": "x", "k": 2})]))
    rig.broker.on_call = control.cancel.set
    with pytest.raises(TurnCancelled) as cancelled:
        rig.loop.turn("chat-one", "two calls", control=control)
    assert cancelled.value.code == "cancelled"
    assert [t.name for t in cancelled.value.tools] == ["clock"]
    records = rig.records("chat-one")
    results = [r for r in records if isinstance(r, ToolResult)]
    assert [r.content for r in results] == ["result of clock", unanswered_sentence(cancelled=True)]
    assert results[1].call == "recall"
    assert results[1].label.data_class is DataClass.PUBLIC
    assert records[-1] == TurnEnd(time=records[-1].time, reason="cancelled", code="cancelled")
    rig.broker.on_call = None
    assert rig.loop.turn("chat-one", "hello").reply == "ok: hello"  # the session stays usable


def test_a_cancel_abandons_a_slow_model_request_at_once(home: Path) -> None:
    rig = Rig(home, server=FakeLlamaServer(delay=3.0))
    control = Control()
    threading.Timer(0.3, control.cancel.set).start()
    started = time.monotonic()
    with pytest.raises(TurnCancelled):
        rig.loop.turn("chat-one", "hello", control=control)
    assert time.monotonic() - started < 2.0
    assert not (rig.sessions / "chat-one").exists()  # nothing was logged: no session to keep


def test_a_streamed_turn_hands_on_the_text_and_logs_the_whole_reply_with_its_usage(rig: Rig) -> None:
    pieces: list[str] = []
    rig.server.script(FakeReply(content="Hello there, owner: a streamed reply.", reasoning="think"))
    result = rig.loop.turn("chat-one", "hi", control=Control(on_text=pieces.append))
    assert "".join(pieces) == result.reply == "Hello there, owner: a streamed reply."
    assert len(pieces) > 1
    assistant = next(r for r in rig.records("chat-one") if isinstance(r, Assistant))
    assert assistant.reasoning_content == "think"  # kept in the log, never streamed to the owner
    usage = next(r for r in rig.records("chat-one") if isinstance(r, Usage))
    assert usage.prompt_n > 0
    assert usage.predicted_n > 0
    assert rig.chat_requests()[-1]["stream"] is True


def test_streamed_tool_calls_are_assembled_before_they_are_routed(rig: Rig) -> None:
    arguments = {"query": "the blue door and the long hallway", "k": 3}
    rig.server.script(FakeReply(tool_calls=[("recall", arguments)]), FakeReply(content="Found it."))
    result = rig.loop.turn("chat-one", "where?", control=Control(on_text=lambda _: None))
    assert result.reply == "Found it."
    assert rig.broker.requests[0].arguments == arguments
    call = next(r for r in rig.records("chat-one") if isinstance(r, Assistant) and r.tool_calls).tool_calls[0]
    assert json.loads(call.arguments) == arguments
    assert call.id.startswith("call__0_recall_cmpl-") or len(call.id) == 32  # the server's id, kept


def test_the_degraded_server_streams_usage_only_when_asked_and_loopd_asks() -> None:
    server = FakeLlamaServer(degraded=True)
    client = ModelClient("http://fake", transport=server.transport())
    reply = client.complete([{"role": "user", "content": "hi"}], None, None, on_text=lambda _: None)
    body = server.requests[-1][1]
    assert body["stream_options"] == {"include_usage": True}
    assert reply.prompt_n > 0
    assert reply.cache_n == 0  # this server reports no cache: compaction starts later (docs)
    assert server.handle(
        "POST", "/v1/chat/completions", json.dumps({**body, "stream_options": None}).encode()
    )[1].chunks[-1]["choices"]  # without it, no usage chunk: the last chunk is the finish


def test_the_closing_sentence_is_not_indexed_but_the_call_before_it_is() -> None:
    records = [
        User(time="2026-11-29T12:00:00Z", content="what time is it"),
        Assistant(time="2026-11-29T12:00:01Z", content=closing_sentence("cancelled")),
        TurnEnd(time="2026-11-29T12:00:01Z", reason="cancelled", code="cancelled"),
    ]
    rows = Rows()
    lines = [(n * 100, 0) for n in range(len(records))]  # (line offset, check): not read here
    walk_records(1, 1, records, lines, Walk(), max_class=DataClass.PRIVATE, rows=rows)
    assert [row[0] for row in rows.searchable] == ["what time is it"]
    assert [row[1] for row in rows.rows] == [1]  # the user record's number only


def test_a_server_that_cannot_stream_tool_calls_is_asked_plainly_and_its_text_handed_on(home: Path) -> None:
    rig = Rig(home, server=FakeLlamaServer(degraded=True))
    pieces: list[str] = []
    rig.server.script(FakeReply(tool_calls=[("clock", {})]), FakeReply(content="It is noon."))
    result = rig.loop.turn("chat-one", "time?", control=Control(on_text=pieces.append))
    assert result.reply == "It is noon."
    assert pieces == ["It is noon."]  # whole, once the plain reply came
    streamed = [body.get("stream") for body in rig.chat_requests()]
    assert streamed == [True, False, False]  # the empty stream, then plain requests only
