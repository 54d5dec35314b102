"""Every case of ../shared/data/bad-inputs-dev.json through memoryd's real edit and recall paths.

DESIGN 10.6: first failing rule wins; its name is the ``refused:<rule>`` code. A refusal leaves every
file under memory/ exactly as it was.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from boxmaker.memoryd.service import Memoryd
from boxmaker.proto import messages
from boxmaker.proto.labels import DataClass
from boxmaker.proto.messages import MemoryCall, ToolRequest, ToolResponse
from conftest import shared_data

CASES: list[dict[str, Any]] = json.loads(shared_data("bad-inputs-dev.json").read_text(encoding="utf-8"))[
    "cases"
]
WRITES = [c for c in CASES if c["target"] in ("memory", "user", "note")]
QUERIES = [c for c in CASES if c["target"] == "query"]


def snapshot(home: Path) -> dict[str, bytes]:
    return {str(p.relative_to(home)): p.read_bytes() for p in (home / "memory").rglob("*") if p.is_file()}


def through_the_wire(service: Memoryd, arguments: dict[str, Any], tool: str) -> ToolResponse:
    """Encode the call as brokerd would (JSON, lone surrogates escaped), decode it, and answer it."""
    request = ToolRequest(session="chat-bad-inputs", call_id="c1", tool=tool, arguments=arguments)
    payload = messages.encode(MemoryCall(request=request, taint=DataClass.PRIVATE, untrusted=False))
    kind, body = messages.decode(payload)
    reply = service.handle(kind, body)
    assert isinstance(reply, ToolResponse)
    return reply


def test_the_data_file_has_every_case() -> None:
    assert len(WRITES) == 112
    assert len(QUERIES) == 23


@pytest.mark.parametrize("case", WRITES, ids=[c["id"] for c in WRITES])
def test_write_case(case: dict[str, Any], home: Path, service: Memoryd) -> None:
    if case["target"] == "note":
        arguments = {"action": "note", "text": case["text"]}
    else:
        arguments = {"action": "add", "file": case["target"], "text": case["text"]}
    before = snapshot(home)
    reply = through_the_wire(service, arguments, "memory")
    if case["expect"] == "accept":
        assert reply.code in ("ok", "noted"), (reply.code, reply.output)
        assert snapshot(home) != before
    else:
        rule = case["expect"].removeprefix("refuse:")
        assert reply.code == f"refused:{rule}", (reply.code, reply.output)
        assert snapshot(home) == before
        assert rule in reply.output or rule in ("length", "empty", "limit")


@pytest.mark.parametrize("case", QUERIES, ids=[c["id"] for c in QUERIES])
def test_query_case(case: dict[str, Any], service: Memoryd) -> None:
    service.memory.writer.note(service_owner(), "owner utc data apples", "note")
    reply = through_the_wire(service, {"query": case["text"], "k": 5}, "recall")
    if case["expect"] == "no-error":
        assert reply.code == "ok", reply.output
    else:
        assert reply.code == case["expect"].replace("refuse:", "refused:")


def service_owner() -> Any:
    from boxmaker.memoryd.write.answer import OWNER

    return OWNER


#: Calls whose lone surrogate is in an argument's name, in the `action` value, or in a value that must
#: be one of a few words: each was `error internal` (a UnicodeEncodeError in the argument conversion).
SURROGATE_CALLS = [
    ("memory", {"action": "\ud800"}, "in the field `action`"),
    ("memory", {"action": "note\udfff", "text": "x"}, "in the field `action`"),
    ("memory", {"action": "note", "te\ud800xt": "x"}, "the name of an argument contains"),
    ("memory", {"action": "add", "file": "memory", "text": "a", "\udfff": 1}, "the name of an argument"),
    ("memory", {"action": "forget", "\ud800": 1}, "the name of an argument contains"),
    ("memory", {"action": "tiers", "\ud800": 1}, "the name of an argument contains"),
    ("memory", {"action": "index", "\ud800": 1}, "the name of an argument contains"),
    ("memory", {"action": "feedback", "\ud800": 1}, "the name of an argument contains"),
    ("memory", {"action": "dream-input", "x\ud800": 1}, "the name of an argument contains"),
    ("memory", {"action": "note", "text": "x", "kind": "\ud800"}, "in the field `kind`"),
    ("memory", {"action": "note", "text": "x", "confidence": "inferred\ud800"}, "in the field `confidence`"),
    ("memory", {"action": "add", "file": "memory\ud800", "text": "x"}, "in the field `file`"),
    (
        "memory",
        {"action": "consolidate", "file": "memory", "entries": [{"old": "a", "\ud800": True}]},
        "in `entries[0]`",
    ),
    ("recall", {"query": "a", "\ud800": 1}, "the name of an argument contains"),
]


@pytest.mark.parametrize(("tool", "arguments", "says"), SURROGATE_CALLS, ids=lambda v: ascii(v)[:40])
def test_a_lone_surrogate_in_a_name_or_a_fixed_word_is_refused_by_name(
    tool: str, arguments: dict[str, Any], says: str, home: Path, service: Memoryd
) -> None:
    before = snapshot(home)
    reply = through_the_wire(service, arguments, tool)
    assert reply.code == "refused:surrogate", reply
    assert says in reply.output
    assert reply.output.endswith("which is not a character; nothing was written")
    assert snapshot(home) == before
