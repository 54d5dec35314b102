"""brokerd's handling of a call end to end: approvals over a real admin socket, the session's state
in memory_call, memoryd down, labels only getting stricter, the session file and the audit log."""

from __future__ import annotations

import dataclasses
import json
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from boxmaker.brokerd.config import Config
from boxmaker.brokerd.grants import BUILTINS, GrantSet
from boxmaker.brokerd.runtime import Output, RunSpec, Runtime, run_decided
from boxmaker.brokerd.sentences import MEMORYD_UNREACHABLE
from boxmaker.brokerd.server import Server
from boxmaker.brokerd.service import Brokerd
from boxmaker.proto import wire
from boxmaker.proto.labels import SESSION_START_LABEL, DataClass, Label
from boxmaker.proto.messages import (
    Body,
    BrokerAdmin,
    BrokerAdminReply,
    Status,
    StatusReply,
    ToolRequest,
    ToolResponse,
)
from brokerd.brokerd_helpers import FakeMemoryd, grant_text, request, write_grant

RECALL = request("recall", {"query": "deploy day"})


def audit_lines(home: Path) -> list[dict[str, Any]]:
    files = sorted((home / "broker" / "audit").glob("*.jsonl"))
    return [json.loads(line) for f in files for line in f.read_text().splitlines()]


class Scripted(Runtime):
    """A local runtime answering `text` with a fixed label of its own."""

    def __init__(self, label: Label | None) -> None:
        self.label = label

    def run_labelled(self, spec: RunSpec) -> tuple[Output, Label | None]:
        return Output("done"), self.label


class Plain(Runtime):
    """A runtime that only implements `run`: its label is the grant's."""

    def run(self, spec: RunSpec) -> Output:
        return Output("plain")


def spec(grant_id: str, tool: str) -> RunSpec:
    grant = next(g for g in BUILTINS if g.id == grant_id)
    return RunSpec(request(tool), grant, SESSION_START_LABEL, GrantSet())


def test_labels_only_get_stricter() -> None:
    clock = spec("builtin-clock", "clock")  # the grant says (public, trusted)
    stricter = run_decided(Scripted(Label(DataClass.SECRET, True)), clock)
    assert stricter.label == Label(DataClass.SECRET, True)
    recall = spec("builtin-recall", "recall")  # the grant says (private, trusted)
    laxer = run_decided(Scripted(Label(DataClass.PUBLIC, False)), recall)
    assert laxer.label == Label(DataClass.PRIVATE, False)
    mixed = run_decided(Scripted(Label(DataClass.PUBLIC, True)), recall)
    assert mixed.label == Label(DataClass.PRIVATE, True)
    assert run_decided(Plain(), recall).label == Label(DataClass.PRIVATE, False)


def test_the_session_state_travels_in_memory_call(home: Path, broker: Brokerd, memoryd: FakeMemoryd) -> None:
    memoryd.label = Label(DataClass.SECRET, True)
    first = broker.tool_call(RECALL)
    assert first.code == "ok"
    assert first.label == Label(DataClass.SECRET, True)  # stricter than the grant's (private, trusted)
    second = broker.tool_call(request("memory", {"action": "note", "text": "x"}, call="c2"))
    assert second.code == "ok"
    (a, b) = memoryd.calls
    assert (a.taint, a.untrusted) == (DataClass.PRIVATE, False)  # the label at decision time
    assert (b.taint, b.untrusted) == (DataClass.SECRET, True)
    assert a.request == RECALL
    saved = json.loads((home / "broker" / "sessions" / "chat-a.json").read_text())
    assert {k: saved[k] for k in ("session", "class", "untrusted")} == {
        "session": "chat-a",
        "class": "secret",
        "untrusted": True,
    }
    assert (home / "broker" / "sessions" / "chat-a.json").stat().st_mode & 0o777 == 0o600


def test_memoryd_down_is_a_fixed_sentence(home: Path, broker: Brokerd) -> None:
    started = time.monotonic()
    response = broker.tool_call(RECALL)
    assert time.monotonic() - started < 5
    assert response == ToolResponse(
        call_id="c1", output=MEMORYD_UNREACHABLE, code="refused:memoryd-unreachable", label=None
    )
    assert MEMORYD_UNREACHABLE == (
        "memoryd did not answer; recall and memory are unavailable until it is back "
        "(runbook: memoryd-unreachable)"
    )
    assert not (home / "broker" / "sessions" / "chat-a.json").exists()


def test_a_silent_memoryd_times_out(config: Config, memoryd: FakeMemoryd) -> None:
    hang = threading.Event()

    def slow(kind: str, body: Body) -> Body:
        hang.wait(5)
        return memoryd.handle(kind, body)

    memoryd.server.handler = slow
    broker = Brokerd(dataclasses.replace(config, memoryd_timeout_s=0.3))
    started = time.monotonic()
    try:
        assert broker.tool_call(RECALL).code == "refused:memoryd-unreachable"
    finally:
        hang.set()
    assert time.monotonic() - started < 3


def test_refused_calls_do_not_change_the_label(home: Path, broker: Brokerd) -> None:
    assert broker.tool_call(request("shell", {"cmd": "ls"})).code == "refused:denied"
    assert broker.labels.get("chat-a") == SESSION_START_LABEL
    assert not (home / "broker" / "sessions" / "chat-a.json").exists()


def test_audit_lines(home: Path, broker: Brokerd) -> None:
    broker.tool_call(request("clock", call="c1"))
    broker.tool_call(request("shell", call="c2"))
    first, second = audit_lines(home)
    clock = next(g for g in BUILTINS if g.id == "builtin-clock")
    assert {k: v for k, v in first.items() if k != "time"} == {
        "session": "chat-a",
        "call_id": "c1",
        "tool": "clock",
        "grant": "builtin-clock",
        "grant_sha256": clock.sha256,
        "decision": "allow",
        "approval": None,
        "code": "ok",
        "label": {"class": "public", "untrusted": False},
    }
    assert first["time"].endswith("Z")
    assert (second["decision"], second["grant"], second["code"], second["label"]) == (
        "deny",
        None,
        "refused:denied",
        None,
    )
    (audit,) = (home / "broker" / "audit").glob("*.jsonl")
    assert audit.stat().st_mode & 0o777 == 0o600
    assert (home / "broker" / "audit").stat().st_mode & 0o777 == 0o700


# Approvals through a real admin socket -------------------------------------------------------------


def admin(server: Server, command: str, arg: str = "") -> BrokerAdminReply:
    reply = wire.call(server.config.admin_socket, BrokerAdmin(command=command, arg=arg), timeout=5)
    assert isinstance(reply, BrokerAdminReply)
    return reply


def call_in_thread(server: Server, body: ToolRequest) -> tuple[threading.Thread, list[Any]]:
    out: list[Any] = []
    thread = threading.Thread(
        target=lambda: out.append(wire.call(server.config.loop_socket, body, timeout=30))
    )
    thread.start()
    return thread, out


def wait_for_approval(server: Server) -> dict[str, Any]:
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        waiting = admin(server, "approvals").data["approvals"]
        if waiting:
            return dict(waiting[0])
        time.sleep(0.02)
    raise AssertionError("no approval appeared")


@pytest.mark.parametrize("answer", ["approve", "deny"])
def test_an_ask_grant_waits_for_the_owner(home: Path, serving: Callable[..., Server], answer: str) -> None:
    docs = home.parent / "docs"
    docs.mkdir()
    (docs / "a.txt").write_text("the launch moved to Thursday")
    write_grant(home, "read-docs", grant_text("read_file", "ask", paths=[str(docs)], result_class="private"))
    server = serving()
    thread, out = call_in_thread(server, request("read_file", {"path": str(docs / "a.txt")}))
    pending = wait_for_approval(server)
    assert pending["id"].startswith("a-")
    assert len(pending["id"]) == 10
    assert (pending["session"], pending["tool"], pending["arguments"]) == (
        "chat-a",
        "read_file",
        {"path": str(docs / "a.txt")},
    )
    assert str(docs / "a.txt") in admin(server, "approvals").text
    verb = "approved" if answer == "approve" else "denied"
    assert admin(server, answer, pending["id"]).data == {"id": pending["id"], "outcome": verb}
    thread.join(10)
    (response,) = out
    if answer == "approve":
        assert (response.code, response.output) == ("ok", "the launch moved to Thursday")
        assert response.label == Label(DataClass.PRIVATE, False)
    else:
        assert (response.code, response.output) == (
            "refused:denied",
            "the owner denied this call of read_file",
        )
        assert response.label is None
    line = audit_lines(home)[-1]
    assert (line["decision"], line["approval"], line["grant"]) == ("ask", verb, "read-docs")
    assert admin(server, "approvals").data["approvals"] == []


@pytest.mark.parametrize("change", ["deny-grant", "grant-removed"])
def test_an_approved_call_is_decided_again_against_the_grants_of_now(
    home: Path, serving: Callable[..., Server], change: str
) -> None:
    docs = home.parent / "docs"
    docs.mkdir()
    (docs / "a.txt").write_text("secret stuff")
    write_grant(home, "ask-docs", grant_text("read_file", "ask", paths=[str(docs)]))
    server = serving()
    thread, out = call_in_thread(server, request("read_file", {"path": str(docs / "a.txt")}))
    pending = wait_for_approval(server)
    if change == "deny-grant":
        write_grant(home, "no-docs", grant_text("read_file", "deny", paths=[str(docs)]))
    else:
        (home / "grants" / "ask-docs.toml").unlink()
    admin(server, "approve", pending["id"])
    thread.join(10)
    (response,) = out
    assert response.code == "refused:denied"
    assert "secret stuff" not in response.output
    assert audit_lines(home)[-1]["code"] == "refused:denied"


def test_an_unanswered_ask_times_out(home: Path, serving: Callable[..., Server]) -> None:
    write_grant(home, "read-etc", grant_text("read_file", "ask", paths=["/etc"]))
    server = serving(approval_timeout_s=0.3)
    response = wire.call(
        server.config.loop_socket, request("read_file", {"path": "/etc/hostname"}), timeout=10
    )
    assert isinstance(response, ToolResponse)
    assert (response.code, response.output) == ("refused:denied", "the owner did not answer within 0.3 s")
    assert audit_lines(home)[-1]["approval"] == "timeout"


def test_admin_status_unknown_command_and_unknown_id(home: Path, serving: Callable[..., Server]) -> None:
    write_grant(home, "web", grant_text("http_fetch", hosts=["example.org"]))
    server = serving()
    status = wire.call(server.config.admin_socket, Status(), timeout=5)
    assert isinstance(status, StatusReply)
    assert (status.role, status.detail) == ("brokerd", "ready; 4 built-in grants, 1 owner grant")
    unknown = admin(server, "explode")
    assert unknown.data == {"code": "refused:unknown-command"}
    assert "approvals, approve, deny, grants, sessions" in unknown.text
    assert admin(server, "approve", "a-zzzzzzzz").data == {"code": "refused:not-found"}
    write_grant(home, "mem", grant_text("memory"))
    status = wire.call(server.config.admin_socket, Status(), timeout=5)
    assert isinstance(status, StatusReply)
    assert (
        status.detail
        == "grants invalid: grants/mem.toml: the policy of recall and memory is built in; remove this grant"
    )


def test_the_sockets_take_only_their_kinds(serving: Callable[..., Server]) -> None:
    from boxmaker.proto.errors import PeerError

    server = serving()
    with pytest.raises(PeerError) as caught:
        wire.call(server.config.loop_socket, Status(), timeout=5)
    assert caught.value.code == "unknown-kind"
    with pytest.raises(PeerError):
        wire.call(server.config.admin_socket, request("clock"), timeout=5)


def test_sessions_lists_each_label(broker: Brokerd, memoryd: FakeMemoryd) -> None:
    memoryd.label = Label(DataClass.PRIVATE, True)
    broker.tool_call(RECALL)
    from boxmaker.brokerd import admin as broker_admin

    reply = broker_admin.sessions(broker.state, "")
    assert reply.data == {"sessions": {"chat-a": {"class": "private", "untrusted": True}}}
    assert "chat-a: private, untrusted" in reply.text
