"""Frames and message bodies (DESIGN 3 and 10.3)."""

from __future__ import annotations

import json
import socket
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from boxmaker.proto import frame, messages
from boxmaker.proto.errors import FrameTooLarge, FrameTruncated, InvalidBody, MalformedMessage, UnknownKind
from boxmaker.proto.labels import DataClass, Label
from boxmaker.proto.messages import (
    Error,
    MemoryAdmin,
    MemoryAdminReply,
    MemoryBlock,
    MemoryBlockReply,
    MemoryCall,
    Ok,
    Reindex,
    Reindexed,
    SessionUpdated,
    ToolRequest,
    ToolResponse,
)

REQUEST_RAW = {"session": "s", "call_id": "c", "tool": "recall", "arguments": {}}
REQUEST = ToolRequest(session="chat-abc", call_id="call_1", tool="recall", arguments={"query": "x", "k": 3})
EVERY_BODY = [
    REQUEST,
    ToolResponse(call_id="call_1", output="ok", code="ok", label=Label(DataClass.SECRET, True)),
    ToolResponse(call_id="call_1", output="noted", code="noted", label=None),
    MemoryCall(request=REQUEST, taint=DataClass.PUBLIC, untrusted=True),
    MemoryBlock(),
    MemoryBlockReply(text="# soul.md"),
    SessionUpdated(session="heartbeat"),
    SessionUpdated(session="job-tier-t1790000000", turn=7),
    Ok(),
    Reindex(),
    Reindexed(logs=1, records=2, notes=3),
    MemoryAdmin(command="log", arg="5"),
    MemoryAdminReply(text="t", data={"rows": [1, 2]}),
    Error(code="memory-unavailable", message="m", runbook="memory-unavailable"),
    messages.Chat(text="hello"),
    messages.Chat(text="hello", session="chat-abc"),
    messages.ChatReply(
        session="chat-abc",
        turn=2,
        reply="hi",
        tools=[messages.ToolRun(name="recall", code="ok", label=Label(DataClass.PRIVATE, False))],
        untrusted=False,
    ),
    messages.Status(),
    messages.StatusReply(role="loopd", pid=42, detail="ready", data={"sessions": 3}),
    messages.BrokerAdmin(command="approve", arg="a-1"),
    messages.BrokerAdminReply(text="t", data=[]),
    messages.LoopAdmin(command="jobs"),
    messages.LoopAdminReply(text="t", data=[{"name": "tier"}]),
]


def raw(kind: str, body: Any) -> bytes:
    return json.dumps({"kind": kind, "body": body}).encode()


@pytest.mark.parametrize("body", EVERY_BODY, ids=lambda b: type(b).__name__)
def test_every_body_round_trips(body: messages.Body) -> None:
    kind, back = messages.decode(messages.encode(body))
    assert kind == messages.kind_of(body)
    assert back == body


def test_wire_names() -> None:
    encoded = json.loads(messages.encode(EVERY_BODY[1]))
    assert encoded == {
        "kind": "tool_response",
        "body": {
            "call_id": "call_1",
            "output": "ok",
            "code": "ok",
            "label": {"class": "secret", "untrusted": True},
        },
    }


@pytest.mark.parametrize(
    ("payload", "error", "words"),
    [
        (b"\xff\xfe", MalformedMessage, "not UTF-8"),
        (b"{not json", MalformedMessage, "not JSON"),
        (b"[1, 2]", MalformedMessage, "object"),
        (b'{"kind": "ok"}', InvalidBody, "'body' must be a JSON object"),
        (b'{"kind": 3, "body": {}}', MalformedMessage, "'kind' must be a string"),
        (b'{"kind": "ok", "body": {}, "extra": 1}', MalformedMessage, "extra"),
        (raw("launch_missiles", {}), UnknownKind, "launch_missiles"),
        (raw("session_updated", {}), InvalidBody, "session"),
        (raw("session_updated", {"session": "../etc"}), InvalidBody, "session"),
        (raw("session_updated", {"session": "ok-id\n"}), InvalidBody, "session"),
        (raw("session_updated", {"session": "a", "turn": -1}), InvalidBody, "turn"),
        (raw("session_updated", {"session": "a", "turn": "3"}), InvalidBody, "turn"),
        (raw("reindexed", {"logs": 1, "records": 2}), InvalidBody, "notes"),
        (raw("memory_call", {"request": {}, "taint": "private", "untrusted": False}), InvalidBody, "session"),
        (
            raw("memory_call", {"request": REQUEST_RAW, "taint": "top", "untrusted": False}),
            InvalidBody,
            "taint",
        ),
        (
            raw("memory_call", {"request": REQUEST_RAW, "taint": "private", "untrusted": "no"}),
            InvalidBody,
            "untrusted",
        ),
        (raw("tool_request", {**REQUEST_RAW, "tool": "Bad Tool"}), InvalidBody, "tool"),
        (raw("tool_request", {**REQUEST_RAW, "arguments": []}), InvalidBody, "arguments"),
        (raw("memory_block", {"x": 1}), InvalidBody, "x"),
        (b'{"kind": "ok", "body": {"n": NaN}}', MalformedMessage, "not JSON"),
    ],
)
def test_bad_messages_name_what_is_wrong(payload: bytes, error: type[Exception], words: str) -> None:
    with pytest.raises(error) as raised:
        messages.decode(payload)
    assert words in str(raised.value)


def test_accept_limits_kinds() -> None:
    with pytest.raises(UnknownKind):
        messages.decode(messages.encode(Reindex()), frozenset({"memory_block"}))


def test_lone_surrogates_survive_decoding_and_encode_as_ascii() -> None:
    payload = (
        b'{"kind":"tool_request","body":{"session":"s","call_id":"c","tool":"memory",'
        b'"arguments":{"action":"note","text":"a\\ud800b"}}}'
    )
    _, body = messages.decode(payload)
    assert isinstance(body, ToolRequest)
    assert body.arguments["text"] == "a\ud800b"
    assert messages.encode(body).isascii()


def test_frame_too_large_is_refused_before_reading() -> None:
    header = (frame.MAX_FRAME + 1).to_bytes(4, "big")
    with pytest.raises(FrameTooLarge) as raised:
        frame.unpack(header)
    assert "4,194,305" in str(raised.value)
    with pytest.raises(FrameTooLarge):
        frame.pack(b"x" * (frame.MAX_FRAME + 1))


def test_truncated_frames() -> None:
    with pytest.raises(FrameTruncated):
        frame.unpack(b"\x00\x00")
    with pytest.raises(FrameTruncated):
        frame.unpack(b"\x00\x00\x00\x05abc")


def test_socket_frames() -> None:
    left, right = socket.socketpair()
    with left, right:
        frame.send_frame(left, b"hello")
        assert frame.recv_frame(right) == b"hello"
        left.sendall(b"\x00\x00\x00\x09abc")
        left.shutdown(socket.SHUT_WR)
        with pytest.raises(FrameTruncated):
            frame.recv_frame(right)


@given(st.binary(max_size=2000), st.binary(max_size=50))
def test_frame_round_trip(payload: bytes, rest: bytes) -> None:
    assert frame.unpack(frame.pack(payload) + rest) == (payload, rest)


@given(st.binary(max_size=300))
def test_decode_never_crashes(payload: bytes) -> None:
    try:
        kind, _ = messages.decode(payload)
    except (MalformedMessage, UnknownKind, InvalidBody) as exc:
        code = exc.code
    else:
        code = "decoded"
        assert kind in messages.KINDS
    assert code in {"decoded", "malformed-message", "unknown-kind", "invalid-body"}


_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=10),
    lambda children: (
        st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=8), children, max_size=3)
    ),
    max_leaves=10,
)


@given(st.sampled_from(sorted(messages.KINDS)), st.dictionaries(st.text(max_size=10), _json, max_size=5))
def test_any_json_body_is_validated_or_refused(kind: str, body: dict[str, Any]) -> None:
    try:
        messages.decode(raw(kind, body))
    except InvalidBody as exc:
        message = str(exc)
    else:
        return
    assert kind in message
