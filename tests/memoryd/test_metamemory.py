"""Metamemory (seed 003 section 23; checklist 13, 14, 16): feedback events through the memory tool and
the owner's command, their refusals, the journal and replay, and that feedback never changes an item."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from typing import Any

import pytest
from test_skeptic import call, note, recall

from boxmaker.memoryd.index import retrievals
from boxmaker.memoryd.items.store import fold, read_events
from boxmaker.memoryd.review import feedback as metamemory
from boxmaker.memoryd.review import plan
from boxmaker.memoryd.review import sections as review_sections
from boxmaker.memoryd.service import Memoryd
from boxmaker.proto.messages import MemoryAdmin
from conftest import Clock, record, start, write_log


def feedback(service: Memoryd, session: str = "chat-asker", **args: Any) -> Any:
    return call(service, "memory", {"action": "feedback", **args}, session)


def owner_feedback(service: Memoryd, **args: Any) -> Any:
    return service.handle("memory_admin", MemoryAdmin(command="feedback", args=args))


def feedback_file(home: Path) -> list[dict[str, Any]]:
    path = home / "memory" / "feedback.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


@pytest.fixture
def retrieved(home: Path, service: Memoryd) -> tuple[str, str]:
    """An item found by a recall in turn 1 of chat-asker: (item id, retrieval id)."""
    write_log(home, "chat-asker", [start(), record("user", content="Where is the tapir backup?")])
    ident = note(service, "The tapir backup lives on disk sdc.", kind="state", subject="backup:tapir")
    assert recall(service, "tapir").output.endswith("(retrieval memret-2026-09-24-001)")
    return ident, "memret-2026-09-24-001"


def test_checklist_13_outcome_recorded_without_rewriting_source(
    home: Path, service: Memoryd, retrieved: tuple[str, str], clock: Clock
) -> None:
    """A retrieved item's later outcome is recorded as its own event, referencing the retrieval; the
    item store (its text, Source, confidence, status) is byte for byte what it was, and so is the fold."""
    ident, retrieval = retrieved
    items_before = (home / "memory" / "items.jsonl").read_bytes()
    fold_before = fold(read_events(home / "memory" / "items.jsonl"))
    clock.advance(hours=1)
    write_log(home, "chat-asker", [record("user", content="It was not there.")])
    answer = feedback(
        service,
        retrieval=retrieval,
        verdict="misleading",
        role="action-premise",
        outcome="The backup was on sdd, not sdc.",
        decision="Looked for the backup on sdc.",
        evidence=["runtime:lsblk-2026-09-24"],
    )
    assert answer.code == "ok", answer.output
    assert answer.output == (
        f"recorded memfb-2026-09-24-001: misleading for {ident}; it raises or lowers review priority only, "
        "the items are unchanged"
    )
    [event] = feedback_file(home)
    assert event == {
        "event_id": "memfb-2026-09-24-001",
        "task_id": "chat-asker#2",
        "retrieval_ref": retrieval,
        "memory_item_ids": [ident],
        "use_role": "action-premise",
        "action_or_decision": "Looked for the backup on sdc.",
        "outcome": "The backup was on sdd, not sdc.",
        "verdict_scheme": "intervention-outcome-v1",
        "verdict": "misleading",
        "attribution_confidence_scheme": "ordinal-confidence-v1",
        "attribution_confidence": "low",
        "evidence_refs": ["runtime:lsblk-2026-09-24"],
        "observed_at": "2026-09-24T22:02:07Z",
        "recorded_by": "session",
    }
    assert (home / "memory" / "items.jsonl").read_bytes() == items_before
    assert fold(read_events(home / "memory" / "items.jsonl")) == fold_before
    [journalled] = [e for e in service.memory.journal.entries_newest_first() if e.get("action") == "feedback"]
    assert journalled["feedback"] == [event]
    assert "events" not in journalled
    listed = service.handle("memory_admin", MemoryAdmin(command="feedback-of", arg=ident))
    assert listed.data == [event]  # type: ignore[union-attr]
    assert "misleading (action-premise, attribution low) by session" in listed.text  # type: ignore[union-attr]


def test_feedback_replays(home: Path, service: Memoryd, retrieved: tuple[str, str], tmp_path: Path) -> None:
    ident, retrieval = retrieved
    assert feedback(service, retrieval=retrieval, verdict="helpful").code == "ok"
    assert (
        owner_feedback(service, retrieval=retrieval, verdict="neutral", confidence="high").data["code"]
        == "ok"
    )
    out = tmp_path / "replayed"
    done = service.handle("memory_admin", MemoryAdmin(command="replay", arg=str(out)))
    assert "feedback.jsonl" in done.data["files"]  # type: ignore[union-attr]
    assert (out / "feedback.jsonl").read_bytes() == (home / "memory" / "feedback.jsonl").read_bytes()
    owner = feedback_file(home)[1]
    assert (owner["recorded_by"], owner["task_id"], owner["attribution_confidence"]) == (
        "owner",
        "chat-asker#1",
        "high",
    )
    assert owner["memory_item_ids"] == [ident]


@pytest.mark.parametrize(
    ("args", "code", "said"),
    [
        ({"retrieval": "memret-2026-09-24-009", "verdict": "helpful"}, "refused:not-found", "no retrieval"),
        ({"retrieval": "nope", "verdict": "helpful"}, "refused:not-found", "no retrieval"),
        (
            {"retrieval": "memret-2026-09-24-001", "verdict": "great"},
            "refused:arguments",
            "`verdict` is one of",
        ),
        (
            {"retrieval": "memret-2026-09-24-001", "verdict": "helpful", "role": "x"},
            "refused:arguments",
            "`role`",
        ),
        (
            {"retrieval": "memret-2026-09-24-001", "verdict": "helpful", "items": ["mem-2026-01-01-001"]},
            "refused:arguments",
            "is not an item memret-2026-09-24-001 showed",
        ),
        ({"retrieval": "memret-2026-09-24-001"}, "refused:arguments", "needs `verdict`"),
        (
            {"retrieval": "memret-2026-09-24-001", "verdict": "helpful", "mood": "x"},
            "refused:arguments",
            "`mood`",
        ),
    ],
)
def test_feedback_refusals_write_nothing(
    home: Path, service: Memoryd, retrieved: tuple[str, str], args: dict[str, Any], code: str, said: str
) -> None:
    journal = sorted((home / "memory" / "edits").glob("*.jsonl"))
    before = [p.read_bytes() for p in journal]
    answer = feedback(service, **args)
    assert answer.code == code
    assert said in answer.output
    assert not (home / "memory" / "feedback.jsonl").exists()
    assert [p.read_bytes() for p in journal] == before


def test_a_session_gives_feedback_only_on_its_own_retrievals(
    service: Memoryd, retrieved: tuple[str, str]
) -> None:
    _, retrieval = retrieved
    answer = feedback(service, "chat-intruder", retrieval=retrieval, verdict="misleading")
    assert answer.code == "refused:not-found"
    assert owner_feedback(service, retrieval=retrieval, verdict="misleading").data["code"] == "ok"


def test_checklist_16_transient_traces_not_persisted_wholesale(
    home: Path, service: Memoryd, retrieved: tuple[str, str]
) -> None:
    """Feedback keeps a bounded statement, never a transcript or a credential: outcome and decision
    at most 300 characters, references one line of at most 200, every text through the write check;
    the event holds no field for a trace, and the journal line carries only the event."""
    _, retrieval = retrieved
    transcript = "user: where is it?\nassistant: on sdc\n" * 20
    long = feedback(service, retrieval=retrieval, verdict="misleading", outcome=transcript)
    assert long.code == "refused:length"
    assert "never a transcript" in long.output
    secret = feedback(
        service,
        retrieval=retrieval,
        verdict="misleading",
        outcome="used token ghp_0123456789abcdefghij0123456789abcdef",
    )
    assert secret.code == "refused:secret"
    multi = feedback(service, retrieval=retrieval, verdict="neutral", evidence=["line one\nline two"])
    assert multi.code == "refused:arguments"
    many = feedback(service, retrieval=retrieval, verdict="neutral", evidence=[f"ref:{n}" for n in range(11)])
    assert many.code == "refused:arguments"
    trace = feedback(service, retrieval=retrieval, verdict="neutral", workspace={"turns": []})
    assert trace.code == "refused:arguments"
    assert not (home / "memory" / "feedback.jsonl").exists()
    ok = feedback(service, retrieval=retrieval, verdict="neutral", outcome="x" * 300)
    assert ok.code == "ok"
    [event] = feedback_file(home)
    assert set(event) <= {
        *("event_id", "task_id", "retrieval_ref", "memory_item_ids", "use_role", "action_or_decision"),
        *("outcome", "verdict_scheme", "verdict", "attribution_confidence_scheme", "attribution_confidence"),
        *("evidence_refs", "observed_at", "recorded_by"),
    }
    assert "where is it" not in (home / "memory" / "feedback.jsonl").read_text()


def test_checklist_14_one_outcome_cannot_change_the_constitution(
    home: Path, service: Memoryd, retrieved: tuple[str, str]
) -> None:
    """One misleading outcome changes nothing: not the item, not soul.md or the identity files, and the
    review plan does not even list it; a second makes it a candidate for a proposal, still unchanged."""
    ident, retrieval = retrieved
    hot = {
        name: (home / "memory" / name).read_bytes()
        for name in ("soul.md", "memory.md", "user.md", "items.jsonl")
    }
    assert owner_feedback(service, retrieval=retrieval, verdict="misleading").data["code"] == "ok"
    sections = {
        s.name: s for s in review_sections.build(plan.gather(service.memory.writer, service.memory.controls))
    }
    assert sections["misleading"].rows == []
    assert feedback(service, retrieval=retrieval, verdict="misleading").code == "ok"
    sections = {
        s.name: s for s in review_sections.build(plan.gather(service.memory.writer, service.memory.controls))
    }
    [row] = sections["misleading"].rows
    assert (row["id"], row["misleading"], row["misleading_by_owner"], row["candidate"]) == (
        ident,
        2,
        1,
        "proposal",
    )
    assert {name: (home / "memory" / name).read_bytes() for name in hot} == hot
    item = service.memory.items.get(ident)
    assert item is not None
    assert (item.status, item.confidence) == ("active", None)


def test_feedback_ids_count_per_day() -> None:
    events = [{"event_id": "memfb-2026-09-24-007"}, {"event_id": "memfb-2026-09-23-011"}]
    assert metamemory.next_feedback_id(events, dt.date(2026, 9, 24)) == "memfb-2026-09-24-008"
    assert metamemory.next_feedback_id(events, dt.date(2026, 9, 25)) == "memfb-2026-09-25-001"
    assert retrievals.is_retrieval_id("memret-2026-09-24-001")
    assert not retrievals.is_retrieval_id("memret-2026-02-30-001")


def test_owner_wording_for_a_missing_retrieval_and_an_unknown_item(
    home: Path, service: Memoryd, retrieved: tuple[str, str]
) -> None:
    reply = owner_feedback(service, retrieval="memret-2026-09-24-009", verdict="helpful")
    assert reply.data["code"] == "refused:not-found"
    assert reply.text.startswith("no retrieval 'memret-2026-09-24-009';")
    reply = service.handle("memory_admin", MemoryAdmin(command="feedback-of", arg="mem-2099-01-01-001"))
    assert reply.data["code"] == "refused:not-found"
    assert "no item mem-2099-01-01-001" in reply.text


def test_owner_feedback_reply_carries_the_new_id(
    home: Path, service: Memoryd, retrieved: tuple[str, str]
) -> None:
    reply = owner_feedback(service, retrieval=retrieved[1], verdict="helpful")
    assert reply.data["code"] == "ok"
    assert reply.data["feedback_id"] == "memfb-2026-09-24-001"
    assert feedback_file(home)[0]["event_id"] == "memfb-2026-09-24-001"
