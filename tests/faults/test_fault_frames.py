"""Malformed frames and hostile bodies on every socket of every role (issue 14): each gets an `error`
frame naming what is wrong (or a refusal the model reads), never ``internal``, never a crash or a hang,
and the role answers its status afterwards with nothing in its log but its own lines.
"""

from __future__ import annotations

import json
import struct
from pathlib import Path
from typing import Any

import pytest

from boxmaker.proto import wire
from faultkit import (
    LOOPD,
    MEMORYD,
    ROLES,
    Role,
    exchange,
    frame,
    log_of,
    reply_kind,
    spawn,
    stop,
    wait_answers,
)

S = "\\ud800"  # a lone surrogate, as JSON carries it

#: Frames no socket can use: (name, bytes sent).
BROKEN: list[tuple[str, bytes]] = [
    ("empty frame", frame(b"")),
    ("header only", struct.pack(">I", 10)),
    ("half a header", b"\x00\x00"),
    ("too large", struct.pack(">I", 4 * 1024 * 1024 + 1) + b"{}"),
    ("cut body", struct.pack(">I", 100) + b'{"kind":'),
    ("not UTF-8", frame(b'{"kind":"status","body":{"\xff\xfe":1}}')),
    ("not JSON", frame(b"hello")),
    ("JSON array", frame(b"[1,2,3]")),
    ("no kind", frame(b'{"body":{}}')),
    ("kind not a string", frame(b'{"kind":7,"body":{}}')),
    ("unknown kind", frame(b'{"kind":"nope","body":{}}')),
    ("body not an object", frame(b'{"kind":"status","body":[]}')),
    ("extra field", frame(b'{"kind":"status","body":{},"x":1}')),
    ("NaN", frame(b'{"kind":"status","body":{"x":NaN}}')),
    ("deep nesting", frame(b'{"kind":"status","body":{"x":' + b"[" * 100_000 + b"]" * 100_000 + b"}}")),
    ("surrogate kind", frame(f'{{"kind":"{S}","body":{{}}}}'.encode())),
    ("two frames", frame(b'{"kind":"status","body":{}}') * 2),
    ("garbage after", frame(b'{"kind":"status","body":{}}') + b"\x00" * 1000),
]


def request(kind: str, body: dict[str, Any]) -> bytes:
    return frame(json.dumps({"kind": kind, "body": body}).encode().replace(b"SURROGATE", S.encode()))


def tool_request(arguments: Any, tool: str = "memory", session: str = "chat-frames") -> dict[str, Any]:
    return {"session": session, "call_id": "c1", "tool": tool, "arguments": arguments}


def _call(arguments: Any, tool: str = "memory", session: str = "chat-frames") -> dict[str, Any]:
    return {"request": tool_request(arguments, tool, session), "taint": "private", "untrusted": False}


NESTED: Any = {}
_inner = NESTED
for _ in range(900):
    _inner["a"] = {}
    _inner = _inner["a"]

#: Bodies of the kinds each socket takes, hostile in content: (name, bytes sent).
HOSTILE: dict[str, list[tuple[str, bytes]]] = {
    MEMORYD.sockets[0]: [
        ("session surrogate", request("session_updated", {"session": "SURROGATE"})),
        ("session owner", request("session_updated", {"session": "owner"})),
        ("turn negative", request("session_updated", {"session": "chat-x", "turn": -1})),
        ("turn huge", request("session_updated", {"session": "chat-x", "turn": 10**30})),
        ("turn bool", request("session_updated", {"session": "chat-x", "turn": True})),
        ("block with a field", request("memory_block", {"x": 1})),
    ],
    MEMORYD.sockets[1]: [
        ("surrogate name", request("memory_call", _call({"action": "note", "SURROGATE": 1}))),
        ("surrogate action", request("memory_call", _call({"action": "SURROGATE"}))),
        (
            "surrogate kind",
            request("memory_call", _call({"action": "note", "text": "x", "kind": "SURROGATE"})),
        ),
        ("action a list", request("memory_call", _call({"action": ["note"]}))),
        ("deep arguments", request("memory_call", _call({"action": "note", "text": NESTED}))),
        ("huge text", request("memory_call", _call({"action": "note", "text": "x" * 3_000_000}))),
        ("recall k huge", request("memory_call", _call({"query": "a", "k": 10**40}, "recall"))),
        ("unknown tool", request("memory_call", _call({}, "http_fetch"))),
        (
            "taint wrong",
            request("memory_call", {"request": tool_request({}), "taint": "top", "untrusted": 0}),
        ),
        ("session id path", request("memory_call", _call({"action": "note", "text": "x"}, session="../etc"))),
    ],
    MEMORYD.sockets[2]: [
        ("command surrogate", request("memory_admin", {"command": "SURROGATE"})),
        ("args surrogate", request("memory_admin", {"command": "status", "args": {"SURROGATE": 1}})),
        ("arg for none", request("memory_admin", {"command": "status", "arg": "x"})),
        ("search k wrong", request("memory_admin", {"command": "search", "arg": "a", "args": {"k": "9"}})),
        ("undo bad id", request("memory_admin", {"command": "undo", "arg": "SURROGATE"})),
        ("repair yes wrong", request("memory_admin", {"command": "repair", "args": {"yes": "yes"}})),
        ("replay relative", request("memory_admin", {"command": "replay", "arg": "relative/dir"})),
        ("reindex with a field", request("reindex", {"x": 1})),
    ],
    "run/loop-broker/broker.sock": [
        ("surrogate name", request("tool_request", tool_request({"SURROGATE": 1}, "clock"))),
        ("surrogate value", request("tool_request", tool_request({"query": "SURROGATE"}, "recall"))),
        (
            "call_tool nested",
            request("tool_request", tool_request({"name": "call_tool", "arguments": {}}, "call_tool")),
        ),
        ("call_tool surrogate", request("tool_request", tool_request({"name": "SURROGATE"}, "call_tool"))),
        ("unknown tool", request("tool_request", tool_request({}, "rm_rf"))),
        ("bad session", request("tool_request", tool_request({}, "clock", session="UPPER"))),
        ("deep arguments", request("tool_request", tool_request(NESTED, "clock"))),
    ],
    "run/owner-broker/admin.sock": [
        ("command surrogate", request("broker_admin", {"command": "SURROGATE"})),
        ("approve nothing", request("broker_admin", {"command": "approve", "arg": "SURROGATE"})),
        ("args junk", request("broker_admin", {"command": "sessions", "args": {"x": NESTED}})),
    ],
    LOOPD.sockets[0]: [
        ("text surrogate", request("chat", {"text": "SURROGATE", "session": None})),
        ("text empty", request("chat", {"text": "", "session": None})),
        ("text too long", request("chat", {"text": "x" * 100_001, "session": None})),
        ("session path", request("chat", {"text": "hi", "session": "../x"})),
        ("session reserved", request("chat", {"text": "hi", "session": "heartbeat"})),
        ("admin surrogate", request("loop_admin", {"command": "SURROGATE"})),
        ("admin junk", request("loop_admin", {"command": "jobs", "args": {"x": NESTED}})),
    ],
}


@pytest.mark.parametrize("role", ROLES, ids=lambda r: r.name)
def test_malformed_frames_and_hostile_bodies_on_every_socket(home: Path, role: Role) -> None:
    config = '[model]\nurl = "http://127.0.0.1:9"\n' if role is LOOPD else ""
    process = spawn(role, home, config)
    try:
        wait_answers(process, role, home)
        for name in role.sockets:
            path = home / name
            for what, data in [*BROKEN, *HOSTILE[name]]:
                reply = exchange(path, data, timeout=60)
                assert process.poll() is None, (name, what)
                if reply is None:
                    continue  # closed without a word: a frame whose end never came
                kind, body = reply_kind(reply)
                assert not (kind == "error" and body.get("code") == "internal"), (name, what, body)
            assert wire.call(role.socket(home), role.status(), timeout=10) is not None
    finally:
        assert stop(process) == 0
    log = log_of(role, home)
    assert "Traceback" not in log, log[-3000:]
