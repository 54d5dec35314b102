"""The agent loop against the fake llama-server (M5a sections 9 and 14, loopd's offline items).

The model is `FakeLlamaServer` through an httpx MockTransport (same logic as on a socket); memory and
the broker are small fakes recording what they are asked.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import itertools
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from boxmaker.loopd import erase
from boxmaker.loopd.loop import Loop, LoopSettings
from boxmaker.loopd.memory import MemoryUnavailable, NoMemory
from boxmaker.loopd.model import ModelClient
from boxmaker.loopd.session import Session, SessionError
from boxmaker.loopd.tools import CORE_TOOL_NAMES, core_tools, route
from boxmaker.loopd.turn import TurnFailed, cap_sentence, not_run_sentence
from boxmaker.proto.labels import DataClass, Label
from boxmaker.proto.messages import ToolRequest, ToolResponse
from boxmaker.proto.records import Assistant, SessionStart, ToolResult, Usage, User, read_log
from fakes.llama_server import FakeLlamaServer, FakeReply

SYSTEM = "You are a test agent."
BLOCK = "# soul.md\n\nA soul.\n\n# memory.md (0 of 2,200 characters)\n\n(empty)"


class FakeMemory:
    """A memory source that serves `block` (or refuses) and records session_updated calls."""

    def __init__(self, block: str = BLOCK) -> None:
        self.text = block
        self.refuse: str | None = None
        self.updates: list[tuple[str, int]] = []

    def block(self) -> str:
        if self.refuse is not None:
            raise MemoryUnavailable(self.refuse)
        return self.text

    def session_updated(self, session: str, turn: int) -> None:
        self.updates.append((session, turn))


class FakeBroker:
    """Answers every call with `output`, labelled `label`; records the requests."""

    def __init__(self) -> None:
        self.requests: list[ToolRequest] = []
        self.label: Label | None = Label(DataClass.PRIVATE, False)
        self.outputs: dict[str, str] = {}
        self.on_call: Any = None

    def call(self, request: ToolRequest) -> ToolResponse:
        self.requests.append(request)
        if self.on_call is not None:
            self.on_call()
        output = self.outputs.get(request.tool, f"result of {request.tool}")
        return ToolResponse(call_id=request.call_id, output=output, code="ok", label=self.label)


class Rig:
    """A loop on the throwaway home with the fake model, memory and broker."""

    def __init__(self, home: Path, cap: int = 16, server: FakeLlamaServer | None = None) -> None:
        self.server = server or FakeLlamaServer(n_ctx=4096, slots=2)
        self.model = ModelClient("http://fake", transport=self.server.transport())
        self.memory = FakeMemory()
        self.broker = FakeBroker()
        self.sessions = home / "sessions"
        ids = iter(f"chat-test{n}" for n in range(1000))
        self.loop = Loop(
            self.sessions,
            self.model,
            self.broker,
            self.memory,
            lambda: SYSTEM + "\n",
            settings=LoopSettings(main_slot=0, tool_calls_per_turn=cap, max_tokens=256),
            rescrub=erase.rescrub,
            now=lambda: dt.datetime(2026, 11, 29, 12, 0, tzinfo=dt.UTC),
            new_id=lambda: next(ids),
        )

    def records(self, session: str, epoch: int = 0) -> list[Any]:
        records, _ = read_log(self.sessions / session / f"{epoch}.jsonl")
        return records

    def chat_requests(self) -> list[dict[str, Any]]:
        return [body for path, body in self.server.requests if path == "/v1/chat/completions"]


@pytest.fixture
def rig(home: Path) -> Rig:
    return Rig(home)


def test_baseline_is_system_md_a_blank_line_and_the_block_from_memory(rig: Rig) -> None:
    result = rig.loop.turn(None, "hello")
    assert result.session == "chat-test0"
    assert result.turn == 1
    assert result.reply == "ok: hello"
    folder = rig.sessions / "chat-test0"
    data = (folder / "0.baseline.json").read_bytes()
    baseline = json.loads(data)
    assert baseline["system"] == f"{SYSTEM}\n\n{BLOCK}"
    assert [t["function"]["name"] for t in baseline["tools"]] == list(CORE_TOOL_NAMES)
    first = rig.records("chat-test0")[0]
    assert isinstance(first, SessionStart)
    assert (first.epoch, first.slot) == (0, 0)
    assert first.baseline == "sha256:" + hashlib.sha256(data).hexdigest()
    request = rig.chat_requests()[0]
    assert request["messages"][0] == {"role": "system", "content": baseline["system"]}
    assert request["id_slot"] == 0
    assert request["cache_prompt"] is True


def test_the_log_has_user_assistant_and_usage_records(rig: Rig) -> None:
    rig.loop.turn("chat-one", "hello there")
    kinds = [type(r) for r in rig.records("chat-one")]
    assert kinds == [SessionStart, User, Assistant, Usage]
    usage = rig.records("chat-one")[3]
    assert usage.prompt_n > 0
    assert usage.predicted_n > 0


def test_the_baseline_is_frozen_for_the_session(rig: Rig) -> None:
    rig.loop.turn("chat-one", "first")
    rig.memory.text = "# soul.md\n\nA different soul."
    rig.loop.turn("chat-one", "second")
    systems = {r["messages"][0]["content"] for r in rig.chat_requests()}
    assert systems == {f"{SYSTEM}\n\n{BLOCK}"}
    rig.loop.turn("chat-two", "new session")
    assert rig.chat_requests()[-1]["messages"][0]["content"] == f"{SYSTEM}\n\n# soul.md\n\nA different soul."


def test_a_restarted_loop_replays_the_saved_bytes(home: Path) -> None:
    first = Rig(home)
    first.loop.turn("chat-one", "remember the blue door")
    second = Rig(home, server=first.server)
    second.memory.text = "something else entirely"
    second.loop.turn("chat-one", "and again")
    requests = second.chat_requests()
    assert requests[-1]["messages"][0]["content"] == f"{SYSTEM}\n\n{BLOCK}"
    assert requests[-1]["messages"][1] == {"role": "user", "content": "remember the blue door"}


def test_an_edited_baseline_is_refused_on_open(rig: Rig) -> None:
    rig.loop.turn("chat-one", "hello")
    path = rig.sessions / "chat-one" / "0.baseline.json"
    path.write_bytes(path.read_bytes().replace(b"test agent", b"evil agent"))
    with pytest.raises(SessionError, match="changed since the session started"):
        Session.open(rig.sessions, "chat-one")


def test_memory_unavailable_fails_a_new_session_only(rig: Rig) -> None:
    rig.loop.turn("chat-one", "hello")
    rig.memory.refuse = "memory.md is 2,300 of 2,200 characters"
    with pytest.raises(TurnFailed) as failed:
        rig.loop.turn("chat-two", "hello")
    assert failed.value.code == "memory-unavailable"
    assert failed.value.runbook == "memory-unavailable"
    assert "2,300 of 2,200" in failed.value.message
    assert not (rig.sessions / "chat-two").exists()
    assert rig.loop.turn("chat-one", "still here").reply == "ok: still here"


def test_no_memory_gives_an_empty_block(home: Path) -> None:
    rig = Rig(home)
    rig.loop.memory = NoMemory()
    rig.loop.turn("chat-one", "hi")
    assert rig.chat_requests()[0]["messages"][0]["content"] == f"{SYSTEM}\n\n"


def test_session_updated_after_a_finished_turn(rig: Rig) -> None:
    rig.loop.turn("chat-one", "a")
    rig.loop.turn("chat-one", "b")
    assert rig.memory.updates == [("chat-one", 1), ("chat-one", 2)]


def test_session_updated_after_a_turn_closed_in_the_middle_of_its_tool_calls(rig: Rig) -> None:
    rig.server.script(FakeReply(tool_calls=[("clock", {})]))
    # the second completion fails: the turn is closed after its tool calls (issue 18), and its records
    # (the call included) are memoryd's to index
    rig.broker.on_call = lambda: setattr(rig.loop, "model", ModelClient("http://127.0.0.1:9", timeout=2.0))
    with pytest.raises(TurnFailed) as failed:
        rig.loop.turn("chat-one", "what time is it")
    assert failed.value.code == "model-unreachable"
    assert rig.memory.updates == [("chat-one", 1)]


def test_tool_calls_go_to_the_broker_and_results_are_logged(rig: Rig) -> None:
    rig.server.script(
        FakeReply(tool_calls=[("recall", {"query": "blue door", "k": 3}), ("clock", {})]),
        FakeReply(content="done"),
    )
    result = rig.loop.turn("chat-one", "what did I say about the door")
    assert result.reply == "done"
    assert [(r.tool, r.arguments) for r in rig.broker.requests] == [
        ("recall", {"query": "blue door", "k": 3}),
        ("clock", {}),
    ]
    assert all(r.session == "chat-one" for r in rig.broker.requests)
    results = [r for r in rig.records("chat-one") if isinstance(r, ToolResult)]
    assert [(r.call, r.content, r.data_class) for r in results] == [
        ("recall", "result of recall", DataClass.PRIVATE),
        ("clock", "result of clock", DataClass.PRIVATE),
    ]
    assert [run.name for run in result.tools] == ["recall", "clock"]
    assert rig.memory.updates == [("chat-one", 1)]


def test_call_tool_is_unwrapped(rig: Rig) -> None:
    rig.server.script(
        FakeReply(tool_calls=[("call_tool", {"name": "http_fetch", "arguments": {"url": "http://x/"}})]),
        FakeReply(content="fetched"),
    )
    rig.loop.turn("chat-one", "fetch it")
    assert [(r.tool, r.arguments) for r in rig.broker.requests] == [("http_fetch", {"url": "http://x/"})]


@pytest.mark.parametrize(
    ("name", "arguments", "problem"),
    [
        ("recall", "{not json", "not valid JSON"),
        ("recall", "[1, 2]", "must be a JSON object"),
        ("call_tool", '{"arguments": {}}', "needs 'name'"),
        ("call_tool", '{"name": "call_tool", "arguments": {}}', "cannot run call_tool"),
        ("call_tool", '{"name": "x", "arguments": 3}', "must be a JSON object"),
        ("Bad Name!", "{}", "there is no tool named"),
    ],
)
def test_bad_tool_calls_get_a_sentence(name: str, arguments: str, problem: str) -> None:
    routed = route(name, arguments)
    assert routed.problem is not None
    assert problem in routed.problem


def test_a_bad_tool_call_never_reaches_the_broker(rig: Rig) -> None:
    rig.server.script(FakeReply(tool_calls=[("call_tool", {"arguments": {}})]), FakeReply(content="sorry"))
    result = rig.loop.turn("chat-one", "go")
    assert result.reply == "sorry"
    assert rig.broker.requests == []
    assert result.tools[0].code == "refused:invalid-arguments"
    logged = [r for r in rig.records("chat-one") if isinstance(r, ToolResult)]
    assert "needs 'name'" in logged[0].content


def test_an_untrusted_result_flags_the_session(rig: Rig) -> None:
    rig.broker.label = Label(DataClass.PUBLIC, True)
    rig.server.script(FakeReply(tool_calls=[("call_tool", {"name": "http_fetch", "arguments": {}})]))
    result = rig.loop.turn("chat-one", "fetch")
    assert result.untrusted
    assert result.tools[0].label == Label(DataClass.PUBLIC, True)
    assert rig.loop.turn("chat-one", "later").untrusted


def test_the_tool_call_cap_ends_the_turn_with_a_reply(home: Path) -> None:
    rig = Rig(home, cap=3)
    rig.server.script(*[FakeReply(tool_calls=[("clock", {}), ("clock", {})]) for _ in range(2)])
    result = rig.loop.turn("chat-one", "loop forever")
    assert result.reply == cap_sentence(3)
    assert len(rig.broker.requests) == 3
    results = [r for r in rig.records("chat-one") if isinstance(r, ToolResult)]
    assert [r.content for r in results][-1] == not_run_sentence(3)
    last = rig.records("chat-one")[-1]
    assert isinstance(last, Assistant)
    assert last.content == cap_sentence(3)
    assert rig.memory.updates == [("chat-one", 1)]
    # the next turn replays cleanly: every tool call has its result
    assert rig.loop.turn("chat-one", "ok stop").reply == "ok: ok stop"


def test_reasoning_is_logged_and_never_replayed(rig: Rig) -> None:
    rig.server.script(FakeReply(content="Thursday.", reasoning="The owner said Thursday."))
    rig.loop.turn("chat-one", "when?")
    rig.loop.turn("chat-one", "sure?")
    assistant = rig.records("chat-one")[2]
    assert isinstance(assistant, Assistant)
    assert assistant.reasoning_content == "The owner said Thursday."
    replayed = rig.chat_requests()[-1]["messages"][2]
    assert replayed == {"role": "assistant", "content": "Thursday."}
    assert "The owner said" not in json.dumps(rig.chat_requests()[-1])


def test_a_message_too_long_even_after_compaction_is_session_full_and_never_logged(home: Path) -> None:
    rig = Rig(home, server=FakeLlamaServer(n_ctx=1500, slots=2))
    rig.loop.turn("chat-one", "short")
    with pytest.raises(TurnFailed) as failed:
        rig.loop.turn("chat-one", "word " * 2000)
    assert failed.value.code == "session_full"
    assert failed.value.runbook == "session-full"
    logged = [r for e in (0, 1) for r in rig.records("chat-one", e) if isinstance(r, User)]
    assert [r.content for r in logged] == ["short"]
    assert rig.loop.turn("chat-one", "a short one").turn == 2


def test_model_unreachable_is_a_turn_failure(home: Path) -> None:
    rig = Rig(home)
    rig.loop.model = ModelClient("http://127.0.0.1:9", timeout=2.0)
    with pytest.raises(TurnFailed) as failed:
        rig.loop.turn("chat-one", "hello")
    assert failed.value.code == "model-unreachable"
    assert "127.0.0.1:9" in failed.value.message


@pytest.mark.parametrize("bad", ["owner", "Chat-1", "-x", "a/b", "x" * 65, ""])
def test_bad_session_ids_are_refused_before_they_become_paths(rig: Rig, bad: str) -> None:
    with pytest.raises(TurnFailed) as failed:
        rig.loop.turn(bad, "hello")
    assert failed.value.code == "invalid-session"
    assert not (rig.sessions / bad).exists() or bad == ""


def test_a_torn_last_line_is_set_aside_when_the_session_opens(home: Path) -> None:
    rig = Rig(home)
    rig.loop.turn("chat-one", "hello")
    log = rig.sessions / "chat-one" / "0.jsonl"
    with log.open("ab") as handle:
        handle.write(b'{"type":"user","time":"2026-')
    fresh = Rig(home, server=rig.server)
    assert fresh.loop.turn("chat-one", "again").turn == 2
    assert (rig.sessions / "chat-one" / "0.jsonl.torn").read_bytes() == b'{"type":"user","time":"2026-\n'


def test_slot_is_not_sent_without_slots(home: Path) -> None:
    rig = Rig(home, server=FakeLlamaServer(degraded=True))
    rig.loop.settings = LoopSettings(main_slot=None, tool_calls_per_turn=16, max_tokens=256)
    rig.loop.turn("chat-one", "hello")
    request = rig.chat_requests()[0]
    assert "id_slot" not in request
    assert "cache_prompt" not in request
    first = rig.records("chat-one")[0]
    assert first.slot is None


# Strict extension (inference contract 2) ---------------------------------------------------------

_REPLY = st.one_of(
    st.builds(lambda text: FakeReply(content=text), st.text(min_size=1, max_size=30)),
    st.builds(
        lambda n, reasoning: FakeReply(tool_calls=[("clock", {})] * n, reasoning=reasoning),
        st.integers(1, 3),
        st.one_of(st.none(), st.text(max_size=20)),
    ),
)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    turns=st.lists(st.text(min_size=1, max_size=40).filter(str.strip), min_size=1, max_size=4),
    replies=st.lists(_REPLY, max_size=8),
)
def test_every_request_strictly_extends_the_previous_one(
    home: Path, turns: list[str], replies: list[FakeReply]
) -> None:
    rig = Rig(home, cap=4)
    rig.server.script(*replies)
    session = f"chat-p{abs(hash((tuple(turns), len(replies)))) % 10**9}"
    for text in turns:
        rig.loop.turn(session, text)
    requests = [r for r in rig.chat_requests() if r["messages"][0]["role"] == "system"]
    for before, after in itertools.pairwise(requests):
        assert after["tools"] == before["tools"] == core_tools()
        prefix = before["messages"]
        assert after["messages"][: len(prefix)] == prefix
        assert len(after["messages"]) > len(prefix)
        assert after["messages"][len(prefix)]["role"] == "assistant"


def test_a_folder_left_before_the_first_record_starts_again(rig: Rig) -> None:
    folder = rig.sessions / "chat-crashed"
    folder.mkdir(parents=True)
    (folder / "0.baseline.json").write_text('{"system": "stale", "tools": []}')
    result = rig.loop.turn("chat-crashed", "hello")
    assert result.turn == 1
    assert json.loads((folder / "0.baseline.json").read_bytes())["system"] == f"{SYSTEM}\n\n{BLOCK}"


def test_only_so_many_sessions_stay_in_memory(rig: Rig, monkeypatch: pytest.MonkeyPatch) -> None:
    import boxmaker.loopd.open_sessions as open_sessions_module

    monkeypatch.setattr(open_sessions_module, "OPEN_SESSIONS", 3)
    for n in range(6):
        rig.loop.turn(f"chat-s{n}", "hello")
    assert rig.loop.open_sessions.ids() == ["chat-s3", "chat-s4", "chat-s5"]
    # an evicted session opens again from disk and goes on where it was
    assert rig.loop.turn("chat-s0", "again").turn == 2


def test_a_lone_surrogate_is_refused_before_anything_is_written(rig: Rig) -> None:
    with pytest.raises(TurnFailed) as failed:
        rig.loop.turn("chat-one", "bad \udcff text")
    assert failed.value.code == "invalid-text"
    assert not (rig.sessions / "chat-one").exists()


def test_a_surrogate_in_a_tool_output_does_not_reach_the_model_server(rig: Rig) -> None:
    rig.broker.outputs["clock"] = "noon \ud800"
    rig.server.script(FakeReply(tool_calls=[("clock", {})]), FakeReply(content="noon"))
    assert rig.loop.turn("chat-one", "time?").reply == "noon"
    result = next(r for r in rig.records("chat-one") if isinstance(r, ToolResult))
    assert result.content == "noon \ufffd"


def test_a_first_message_that_cannot_fit_says_so_and_leaves_no_session(home: Path) -> None:
    rig = Rig(home, server=FakeLlamaServer(n_ctx=1500, slots=2))
    with pytest.raises(TurnFailed) as failed:
        rig.loop.turn("chat-big", "word " * 2000)
    assert failed.value.code == "session_full"
    assert "the first message of session chat-big does not fit" in failed.value.message
    assert "send a shorter message" in failed.value.message
    assert not (rig.sessions / "chat-big").exists()


def test_an_openai_server_counting_the_reply_budget_gets_what_fits(home: Path) -> None:
    rig = Rig(home, server=FakeLlamaServer(n_ctx=1200, degraded=True))
    rig.loop.settings = LoopSettings(main_slot=None, tool_calls_per_turn=16, max_tokens=2048)
    assert rig.loop.turn("chat-one", "hello").reply == "ok: hello"
    budgets = [r.get("max_tokens") for r in rig.chat_requests()]
    assert budgets[0] == 2048
    assert 0 < budgets[1] < 2048


def test_a_log_damaged_while_open_is_noticed_before_the_next_turn(rig: Rig) -> None:
    rig.loop.turn("chat-one", "hello")
    with (rig.sessions / "chat-one" / "0.jsonl").open("ab") as handle:
        handle.write(b"garbage line\n")
    with pytest.raises(TurnFailed) as failed:
        rig.loop.turn("chat-one", "go on")
    assert failed.value.code == "session-damaged"
    assert "line 5" in failed.value.message


def test_a_valid_record_appended_outside_loopd_is_read_again(rig: Rig) -> None:
    rig.loop.turn("chat-one", "hello")
    with (rig.sessions / "chat-one" / "0.jsonl").open("ab") as handle:
        handle.write(b'{"type":"user","time":"2026-11-29T12:00:00Z","content":"from a script"}\n')
    assert rig.loop.turn("chat-one", "go on").turn == 3
    assert {"role": "user", "content": "from a script"} in rig.chat_requests()[-1]["messages"]


def test_a_missing_baseline_is_named(rig: Rig) -> None:
    rig.loop.turn("chat-one", "hello")
    (rig.sessions / "chat-one" / "0.baseline.json").unlink()
    with pytest.raises(TurnFailed) as failed:
        rig.loop.turn("chat-one", "go on")
    assert failed.value.code == "session-damaged"
    assert "0.baseline.json is missing" in failed.value.message


def test_a_log_that_cannot_be_written_is_a_turn_failure_not_a_crash(
    rig: Rig, monkeypatch: pytest.MonkeyPatch
) -> None:
    from boxmaker.loopd import session as session_module

    rig.loop.turn("chat-one", "hello")

    def full(path: Path, line: bytes, sync: bool = True) -> int:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(session_module.fsio, "append_line", full)
    with pytest.raises(TurnFailed) as failed:
        rig.loop.turn("chat-one", "again")
    assert failed.value.code == "session-damaged"
    assert "No space left on device" in failed.value.message
