"""memoryd's side of an erasure (seed 003 section 12.3): notes keep their headers and positions,
identity entries go, the journal and recall log are scrubbed, the tombstone is content-free."""

from __future__ import annotations

import hashlib
import json
from typing import Any

from boxmaker.memoryd import tool as memory_tool
from boxmaker.memoryd.bundle.transfer import export
from boxmaker.memoryd.erase import run
from boxmaker.memoryd.files.notes import parse
from boxmaker.memoryd.items.live import ItemStore
from boxmaker.memoryd.items.replay import replay_into
from boxmaker.memoryd.memory import excluded
from boxmaker.memoryd.sentences import Refusal, erasure
from boxmaker.memoryd.write.actions import Add
from boxmaker.memoryd.write.answer import Caller
from boxmaker.proto.labels import DataClass, Label

TEXT = "The alarm code is HERON-4410-BISON"


def test_a_session_erasure_scrubs_memoryd_files_and_keeps_note_positions(service: Any) -> None:
    label = Label(DataClass.PRIVATE, False)
    service.memory.writer.note(Caller("chat-gone", "c1", label), TEXT, "note")
    service.memory.writer.note(Caller("chat-kept", "c2", label), "The kettle is blue.", "note")
    service.memory.writer.memory(Caller("chat-gone", "c3", label), Add(file="user", text=f"{TEXT}."))
    service.memory.recaller.recall("alarm code HERON", 5, "chat-kept")
    memory_dir = service.config.layout.memory
    keys = [n.key for n in parse(service.memory.store.read_notes())]

    planned = run.plan(service.memory.holdings, {"sessions": ["chat-gone"], "texts": [], "reserve": True})
    assert isinstance(planned, dict)
    assert TEXT in planned["texts"]
    rows = {h["holder_ref"]: h["holds"] for h in planned["holders"]}
    assert rows["memory/notes.md"] == 1
    assert rows["memory/user.md"] == 1
    args = {
        "sessions": ["chat-gone"],
        "texts": [],
        "authority": "ticket-7",
        "erasure_id": planned["erasure_id"],
        "holders": [],
    }
    tombstone = run.execute(service.memory.holdings, args)
    assert isinstance(tombstone, dict)
    notes = parse(service.memory.store.read_notes())
    assert [n.key for n in notes] == keys  # positions and header times stay
    assert notes[0].text == f"[erased {tombstone['erasure_id']}]"
    assert notes[1].text == "The kettle is blue."
    assert (memory_dir / "user.md").read_text(encoding="utf-8") == ""
    for path in memory_dir.rglob("*"):
        if path.is_file():
            assert b"HERON" not in path.read_bytes(), path
    for path in service.config.layout.index.iterdir():
        assert b"HERON" not in path.read_bytes().upper(), path
    recall_lines = [
        json.loads(line)
        for f in (memory_dir / "recalls").glob("*.jsonl")
        for line in f.read_text(encoding="ascii").splitlines()
    ]
    assert all("HERON" not in r["query"] for r in recall_lines)
    stored = (memory_dir / "erasures.jsonl").read_text(encoding="ascii")
    assert hashlib.sha256(TEXT.encode()).hexdigest() not in stored
    assert json.loads(stored)["holders"][0]["holder_ref"] == "memory/items.jsonl"
    journal = service.memory.journal.entries_newest_first()
    last = next(journal)
    assert last["action"] == "erase"
    assert last["tombstone"] == tombstone
    assert run.execute(service.memory.holdings, args) == erasure.ERASE_ID_TAKEN  # an id is used once


def test_an_authority_that_is_a_sentence_is_refused(service: Any) -> None:
    planned = run.plan(service.memory.holdings, {"sessions": ["chat-x"], "reserve": True})
    assert isinstance(planned, dict)
    refused = run.execute(
        service.memory.holdings,
        {"sessions": ["chat-x"], "authority": "because I said so", "erasure_id": planned["erasure_id"]},
    )
    assert refused == erasure.ERASE_AUTHORITY
    assert not (service.config.layout.memory / "erasures.jsonl").exists()


def test_a_rerun_on_an_erased_item_is_refused_naming_the_holders_not_completed(service: Any) -> None:
    label = Label(DataClass.PRIVATE, False)
    service.memory.writer.note(Caller("chat-a", "c1", label), TEXT, "note")
    item = next(iter(ItemStore(service.config.layout.memory).items()))
    live = {
        "holder_ref": "sessions/",
        "result": "partially-completed",
        "limitation_ref": "live-session-context",
    }
    planned = run.plan(service.memory.holdings, {"items": [item], "reserve": True})
    assert isinstance(planned, dict)
    first = run.execute(
        service.memory.holdings,
        {"items": [item], "authority": "t-1", "erasure_id": planned["erasure_id"], "holders": [live]},
    )
    assert isinstance(first, dict)
    files = {p: p.read_bytes() for p in service.config.layout.memory.rglob("*") if p.is_file()}
    again = run.plan(service.memory.holdings, {"items": [item], "reserve": True})
    assert isinstance(again, Refusal)
    assert again.code == "refused:erased"
    assert again.sentence == (
        f"refused (erased): item {item} was erased by {first['erasure_id']} and its text is no longer "
        "known, so its copies cannot be searched for (holders of "
        f"{first['erasure_id']} that were not completed: sessions/ (partially-completed, "
        "live-session-context)); nothing was changed"
    )
    assert {p: p.read_bytes() for p in files} == files


def test_a_session_nothing_holds_is_refused_without_a_tombstone(service: Any) -> None:
    refused = run.plan(service.memory.holdings, {"sessions": ["chat-nonexist"], "held": [], "reserve": True})
    assert isinstance(refused, Refusal)
    assert refused.sentence == "refused (not-found): nothing of chat-nonexist is held; nothing was erased"
    # brokerd (an audit line) holding it is enough
    assert isinstance(
        run.plan(service.memory.holdings, {"sessions": ["chat-nonexist"], "held": ["chat-nonexist"]}), dict
    )
    assert not (service.config.layout.memory / "erasures.jsonl").exists()


def test_exports_outside_the_home_are_unevaluated_and_inside_are_scrubbed(
    service: Any, tmp_path: Any
) -> None:
    label = Label(DataClass.PRIVATE, False)
    service.memory.writer.note(Caller("chat-exp", "c1", label), TEXT, "note")
    outside = tmp_path / "outside" / "bundle.json"
    outside.parent.mkdir()
    inside = service.config.home / "bundle.json"
    assert not isinstance(export(service.memory.writer, excluded(service.memory), outside, False), Refusal)
    assert not isinstance(export(service.memory.writer, excluded(service.memory), inside, False), Refusal)
    assert b"HERON" in outside.read_bytes()
    assert b"HERON" in inside.read_bytes()
    planned = run.plan(service.memory.holdings, {"sessions": ["chat-exp"], "reserve": True})
    assert isinstance(planned, dict)
    exports = [h for h in planned["holders"] if h["holder_ref"].startswith("export:")]
    assert sorted((h["result"], h["limitation_ref"]) for h in exports) == [
        ("completed", None),
        ("unevaluated", "outside-home"),
    ]
    tombstone = run.execute(
        service.memory.holdings,
        {"sessions": ["chat-exp"], "authority": "t-3", "erasure_id": planned["erasure_id"], "holders": []},
    )
    assert isinstance(tombstone, dict)
    got = sorted(
        (h["result"], h["limitation_ref"])
        for h in tombstone["holders"]
        if h["holder_ref"].startswith("export:")
    )
    assert got == [("completed", None), ("unevaluated", "outside-home")]
    assert b"HERON" in outside.read_bytes()  # not touched, and not claimed
    assert b"HERON" not in inside.read_bytes()


def test_feedback_and_proposals_citing_an_erased_item_lose_their_free_text(
    service: Any, tmp_path: Any
) -> None:
    from boxmaker.memoryd.review import feedback as metamemory
    from boxmaker.proto.messages import MemoryCall, ToolRequest

    label = Label(DataClass.PRIVATE, False)
    service.memory.writer.note(Caller("chat-a", "c1", label), TEXT, "note")
    item = next(iter(ItemStore(service.config.layout.memory).items()))
    event = {
        "event_id": "memfb-2026-09-24-001",
        "retrieval_ref": "memret-2026-09-24-001",
        "memory_item_ids": [item],
        "verdict": "misleading",
        "outcome": "The heron alarm code was stale",
        "action_or_decision": "Typed the heron code at the door",
    }
    service.memory.journal.commit(metamemory.change(event, "owner", "", False))
    request = ToolRequest(
        session="chat-b",
        call_id="c2",
        tool="memory",
        arguments={
            "action": "propose",
            "target": "conventions",
            "text": "Rotate the heron alarm code weekly.",
            "refs": [item],
            "benefit": "The heron code stays fresh.",
            "risk": "People forget the heron code.",
        },
    )
    assert (
        memory_tool.call(
            service.memory, MemoryCall(request=request, taint=DataClass.PRIVATE, untrusted=False)
        ).code
        == "ok"
    )
    planned = run.plan(service.memory.holdings, {"items": [item], "reserve": True})
    assert isinstance(planned, dict)
    done = run.execute(
        service.memory.holdings, {"items": [item], "authority": "t-1", "erasure_id": planned["erasure_id"]}
    )
    assert isinstance(done, dict)
    mark = f"[erased {planned['erasure_id']}]"
    memory = service.config.layout.memory
    [feedback] = [json.loads(line) for line in (memory / "feedback.jsonl").read_text().splitlines()]
    assert (feedback["event_id"], feedback["memory_item_ids"]) == ("memfb-2026-09-24-001", [item])
    assert (feedback["outcome"], feedback["action_or_decision"]) == (mark, mark)
    [proposal] = [json.loads(line) for line in (memory / "proposals.jsonl").read_text().splitlines()]
    assert proposal["supporting_refs"] == [item]
    assert (proposal["proposed_change"], proposal["expected_benefit"], proposal["risk"]) == (mark, mark, mark)
    journal = "".join(p.read_text() for p in (memory / "edits").glob("*.jsonl"))
    assert "heron" not in journal.lower()
    replayed = replay_into(service.memory.journal, tmp_path / "replayed", service.memory.exclusion_for)
    assert isinstance(replayed, list)
    for name in ("feedback.jsonl", "proposals.jsonl"):
        assert (tmp_path / "replayed" / name).read_bytes() == (memory / name).read_bytes()
