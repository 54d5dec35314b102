"""Skeptical recall, review and metamemory end to end (issue 7; seed 003 sections 15.2, 16, 23;
checklist 9, 10, 13): `bxctl up` starts real memoryd, brokerd and loopd against the fake llama-server;
the agent recalls and records feedback through its tools, the owner reviews, reconciles and records
feedback with bxctl."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from fakes.llama_server import FakeReply
from protocol_helpers import RETRIEVAL, Box, cite_retrieval, note_call, running, snapshot, tool_results


@pytest.fixture(scope="module")
def box() -> Iterator[Box]:
    with running("bx-recall-") as state:
        yield state


def test_a_conflict_surfaces_in_recall_and_feedback_is_recorded(box: Box) -> None:
    box.chat(
        "chat-nas1",
        "The NAS is at 10.0.0.7.",
        note_call("The NAS is at 10.0.0.7.", kind="state", subject="nas:ip"),
        FakeReply(content="Noted."),
    )
    box.chat(
        "chat-nas2",
        "The NAS moved.",
        note_call("The NAS now answers on 10.0.0.8.", kind="state", subject="nas:ip"),
        FakeReply(content="Noted."),
    )
    older, newer = box.items("--subject", "nas:ip")
    box.chat(
        "chat-ask",
        "Where is the NAS?",
        FakeReply(tool_calls=[("recall", {"query": "NAS"})]),
        cite_retrieval(
            "misleading",
            role="action-premise",
            outcome="The NAS did not answer on the older address.",
            items=[],
        ),
        FakeReply(content="Two values are recorded; acting on 10.0.0.8."),
    )
    recalled, recorded = tool_results(box, "chat-ask")
    shown = recalled["content"]
    assert "Conflict on subject `nas:ip` (2 active state items, not reconciled):" in shown
    assert f"{older['id']} · older: retained as history" in shown
    assert f"{newer['id']} · newest: acting on this" in shown
    assert "ask the owner to reconcile (bxctl memory reconcile nas:ip --keep ID)" in shown
    assert (
        f"{older['id']} · state nas:ip · active · {older['date']} · Source sessions/chat-nas1/0.jsonl#"
        in shown
    )
    [ident] = RETRIEVAL.findall(shown)
    [line] = [
        json.loads(raw)
        for path in (box.home / "memory" / "recalls").glob("*.jsonl")
        for raw in path.read_text().splitlines()
        if json.loads(raw).get("retrieval_id") == ident
    ]
    assert (line["task_id"], line["use_role"]) == ("chat-ask#1", "background")
    assert sorted(line["memory_item_ids"]) == sorted([older["id"], newer["id"]])
    assert recorded["content"].startswith("recorded memfb-")
    items_before = (box.home / "memory" / "items.jsonl").read_bytes()
    owner = box.bxctl(
        "memory", "feedback", "--retrieval", ident, "--verdict", "misleading", "--item", older["id"],
        "--evidence", "ping:10.0.0.7", "--confidence", "medium",
    )  # fmt: skip
    assert owner.stdout.startswith("recorded memfb-")
    assert (box.home / "memory" / "items.jsonl").read_bytes() == items_before
    listed = json.loads(box.bxctl("memory", "feedback", "--item", older["id"], "--json").stdout)
    assert [(e["recorded_by"], e["verdict"]) for e in listed] == [
        ("session", "misleading"),
        ("owner", "misleading"),
    ]
    assert listed[0]["task_id"] == "chat-ask#1"
    assert listed[1]["attribution_confidence"] == "medium"
    bad = box.bxctl(
        "memory", "feedback", "--retrieval", "memret-2020-01-01-001", "--verdict", "helpful", ok=False
    )
    assert bad.returncode == 1
    assert "no retrieval" in bad.stderr
    assert "Traceback" not in bad.stderr


def test_checklist_9_review_plans_before_deletion(box: Box) -> None:
    """``bxctl memory review`` names the conflict and the repeatedly misleading item, says what to
    run, and memory/ is byte for byte unchanged."""
    memory = box.home / "memory"
    before = snapshot(memory)
    plan = box.bxctl("memory", "review").stdout
    data = json.loads(box.bxctl("memory", "review", "--json").stdout)
    assert snapshot(memory) == before
    assert plan.startswith("Review plan: nothing was changed")
    sections = {s["name"]: s for s in data["sections"]}
    assert data["sections"][0]["name"] == "misleading"
    [candidate] = sections["misleading"]["rows"]
    assert (candidate["misleading"], candidate["candidate"]) == (2, "proposal")
    assert [row["subject"] for row in sections["conflicts"]["rows"]] == ["nas:ip"]
    assert "bxctl memory reconcile SUBJECT --keep ID" in plan


def test_the_owner_reconciles_and_recall_shows_history(box: Box) -> None:
    older, newer = box.items("--subject", "nas:ip")
    done = box.bxctl("memory", "reconcile", "nas:ip", "--keep", newer["id"])
    assert done.stdout.strip() == (
        f"reconciled nas:ip: {newer['id']} is the current value; {older['id']} is superseded by it and stays "
        "as history"
    ).replace("stays as history", "stay as history")
    log = json.loads(box.bxctl("memory", "log", "1", "--json").stdout)
    assert log[-1]["action"] == "reconcile"
    box.chat(
        "chat-ask2",
        "Where is the NAS now?",
        FakeReply(tool_calls=[("recall", {"query": "NAS 10.0.0.7", "k": 10})]),
        FakeReply(content="10.0.0.8."),
    )
    [recalled] = tool_results(box, "chat-ask2")
    assert "Conflict" not in recalled["content"]
    assert (
        f"{older['id']} · state nas:ip · superseded by {newer['id']}; history, not current"
        in recalled["content"]
    )
    refused = box.bxctl("memory", "reconcile", "nas:ip", "--keep", newer["id"], ok=False)
    assert refused.returncode == 1
    assert "nothing to reconcile" in refused.stderr


def test_a_session_cannot_give_feedback_on_another_sessions_retrieval(box: Box) -> None:
    line = json.loads(
        (sorted((box.home / "memory" / "recalls").glob("*.jsonl"))[-1]).read_text().splitlines()[0]
    )
    box.chat(
        "chat-other",
        "Rate that recall.",
        FakeReply(
            tool_calls=[
                ("memory", {"action": "feedback", "retrieval": line["retrieval_id"], "verdict": "helpful"})
            ]
        ),
        FakeReply(content="I cannot."),
    )
    [result] = tool_results(box, "chat-other")
    assert result["content"].startswith("no retrieval")


def test_checklist_10_a_high_risk_rule_works_in_a_fresh_session(box: Box) -> None:
    """A high-risk rule the owner put in soul.md (steering) and memory.md reaches a brand-new
    session's baseline through the real daemons, every session, with nothing recalled."""
    soul = box.home / "memory" / "soul.md"
    rule = "Never delete a backup without the owner's written yes."
    soul.write_text(soul.read_text().rstrip("\n") + "\n\n" + rule + "\n")
    box.bxctl("memory", "add", "--file", "memory", "Always confirm the host before a reboot.")
    for session in ("chat-fresh-a", "chat-fresh-b"):
        box.chat(session, "Clean up the old backups.", FakeReply(content="I need your written yes first."))
        baseline = json.loads((box.home / "sessions" / session / "0.baseline.json").read_text())
        assert rule in baseline["system"]
        assert "Always confirm the host before a reboot." in baseline["system"]
        assert tool_results(box, session) == []
    review = json.loads(box.bxctl("memory", "review", "--json").stdout)
    boundary = {s["name"]: s for s in review["sections"]}["boundary"]["rows"]
    wanted = "Always confirm the host before a reboot."
    assert {
        "file": "memory.md",
        "text": wanted,
        "reads_like": "standing rule",
        "candidate": "proposal",
    } in boundary
