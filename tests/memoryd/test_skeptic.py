"""Skeptical recall (seed 003 section 15.2, 15.2.1) and the retrieval record (section 23.2), through
memoryd's service and its real files."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from boxmaker.memoryd import tool as memory_tool
from boxmaker.memoryd.config import load
from boxmaker.memoryd.service import Memoryd
from boxmaker.memoryd.write import itemops
from boxmaker.memoryd.write.answer import OWNER
from boxmaker.proto.labels import DataClass
from boxmaker.proto.messages import MemoryAdmin, MemoryCall, SessionUpdated, ToolRequest, ToolResponse
from conftest import Clock, record, start, write_log


def call(
    service: Memoryd,
    tool: str,
    arguments: dict[str, Any],
    session: str = "chat-asker",
    untrusted: bool = False,
    call_id: str = "call-1",
) -> ToolResponse:
    request = ToolRequest(session=session, call_id=call_id, tool=tool, arguments=arguments)
    return memory_tool.call(
        service.memory, MemoryCall(request=request, taint=DataClass.PRIVATE, untrusted=untrusted)
    )


def note(
    service: Memoryd, text: str, session: str = "chat-asker", untrusted: bool = False, **fields: str
) -> str:
    answer = call(service, "memory", {"action": "note", "text": text, **fields}, session, untrusted)
    assert answer.code == "noted", answer.output
    return list(service.memory.items.items())[-1]


def recall(service: Memoryd, query: str, session: str = "chat-asker") -> ToolResponse:
    return call(service, "recall", {"query": query, "k": 10}, session)


def recall_log(home: Path) -> list[dict[str, Any]]:
    folder = home / "memory" / "recalls"
    return [
        json.loads(line) for path in sorted(folder.glob("*.jsonl")) for line in path.read_text().splitlines()
    ]


def test_an_item_hit_carries_its_metadata_on_the_header_line(service: Memoryd) -> None:
    ident = note(
        service, "The NAS is at 10.0.0.7 quokka.", kind="state", subject="nas:ip", confidence="observed-once"
    )
    out = recall(service, "quokka").output
    header, body = out.split("\n")[:2]
    assert header == (
        "[1] memory · note, 2026-09-24 21:02 UTC, session chat-asker · private · "
        f"{ident} · state nas:ip · active · 2026-09-24 · Source sessions/chat-asker#call=call-1 · "
        "confidence observed-once"
    )
    assert body == "The NAS is at 10.0.0.7 quokka."


def test_hits_that_are_not_items_keep_m5a_line(home: Path, service: Memoryd) -> None:
    write_log(home, "chat-talk", [start(), record("user", content="The wombat lives in Tasmania.")])
    service.handle("session_updated", SessionUpdated(session="chat-talk"))
    out = recall(service, "wombat").output
    assert (
        out.split("\n")[0] == "[1] memory · session chat-talk, 2026-09-20 14:02 UTC, the owner said · private"
    )


def test_a_superseded_hit_is_history_and_points_to_the_live_item(service: Memoryd, clock: Clock) -> None:
    old = note(service, "Staging runs on host numbat-1.", kind="state", subject="host:staging")
    clock.advance(days=2)
    new = note(service, "Staging moved to another rack.", kind="state", subject="host:staging")
    assert itemops.supersede(service.memory.writer, old, new, OWNER).ok
    out = recall(service, "numbat").output
    lines = out.split("\n")
    assert f"{old} · state host:staging · superseded by {new}; history, not current · 2026-09-24" in lines[0]
    assert lines[1] == "Staging runs on host numbat-1."
    assert lines[2] == (f"→ current: [2026-09-26] (state) Staging moved to another rack. · {new} · active")


def test_stale_and_pending_cleanup_hits_are_not_load_bearing(service: Memoryd) -> None:
    stale = note(service, "The printer toner is cyan-kiwi.")
    pending = note(service, "The kiwi router needs a reboot weekly.")
    assert itemops.set_status(service.memory.writer, stale, "stale", OWNER).ok
    assert itemops.set_status(service.memory.writer, pending, "pending-cleanup", OWNER).ok
    out = recall(service, "kiwi").output
    assert f"{stale} · knowledge · stale; not load-bearing · 2026-09-24" in out
    assert f"{pending} · knowledge · pending-cleanup; not load-bearing · 2026-09-24" in out


def test_two_active_state_items_come_back_as_a_conflict(service: Memoryd, clock: Clock) -> None:
    """The second item of the subject is not a hit (no shared word), yet the block shows both rows,
    dated, the newer acted on and the older retained as history."""
    older = note(
        service, "The gateway address is 10.1.1.1 for the pangolin lab.", kind="state", subject="lab:gw"
    )
    clock.advance(days=3)
    newer = note(service, "Gateway now 10.1.1.254.", kind="state", subject="lab:gw")
    out = recall(service, "pangolin").output
    assert newer not in out.split("\n")[0]
    block = out.split("\n\n")[1]
    assert block == (
        "Conflict on subject `lab:gw` (2 active state items, not reconciled):\n"
        f"- [2026-09-24] (state) The gateway address is 10.1.1.1 for the pangolin lab. Source: "
        f"sessions/chat-asker#call=call-1 · {older} · older: retained as history\n"
        f"- [2026-09-27] (state) Gateway now 10.1.1.254. Source: sessions/chat-asker#call=call-1 · {newer} · "
        "newest: acting on this\n"
        f"Acting on [2026-09-27]'s value ({newer}). The older row is retained as history, not current; "
        "if one should be the current truth, ask the owner to reconcile "
        "(bxctl memory reconcile lab:gw --keep ID)."
    )
    [line] = [
        entry for entry in recall_log(service.config.layout.memory.parent) if entry["query"] == "pangolin"
    ]
    assert line["memory_item_ids"] == [older, newer]
    # after the owner reconciles, the conflict is gone and the older row is history
    done = service.handle(
        "memory_admin", MemoryAdmin(command="reconcile", arg="lab:gw", args={"keep": newer})
    )
    assert done.data["code"] == "ok"  # type: ignore[union-attr]
    out = recall(service, "pangolin").output
    assert "Conflict" not in out
    assert f"superseded by {newer}; history, not current" in out


def test_the_conflict_rows_count_in_the_label_and_withdrawn_rows_never_show(
    service: Memoryd, clock: Clock
) -> None:
    note(service, "Backup target is the echidna share.", kind="state", subject="backup:target")
    clock.advance(minutes=5)
    tainted = note(
        service,
        "Backup target moved to bucket nine.",
        "chat-web",
        True,
        kind="state",
        subject="backup:target",
    )
    answer = recall(service, "echidna")
    assert "Conflict on subject `backup:target`" in answer.output
    assert answer.label is not None
    assert answer.label.untrusted
    withdrawn = service.handle(
        "memory_admin", MemoryAdmin(command="withdraw", args={"items": [tainted], "reason": "poisoned"})
    )
    assert withdrawn.data["code"] == "ok"  # type: ignore[union-attr]
    answer = recall(service, "echidna")
    assert "Conflict" not in answer.output
    assert "bucket nine" not in answer.output
    assert tainted not in answer.output
    assert answer.label is not None
    assert not answer.label.untrusted


def test_contradicting_knowledge_items_are_both_shown(service: Memoryd) -> None:
    one = note(service, "The platypus build needs Python 3.11.")
    two = note(service, "The platypus build fails on Python 3.11; use 3.12.")
    out = recall(service, "platypus").output
    assert one in out
    assert two in out
    assert "Conflict" not in out


def test_every_recall_is_a_retrieval_record_with_a_task_id(
    home: Path, service: Memoryd, clock: Clock
) -> None:
    write_log(home, "chat-turns", [start(), record("user", content="one"), record("user", content="two")])
    ident = note(service, "The dingo cache lives on sdb.", session="chat-turns")
    first = recall(service, "dingo", session="chat-turns")
    assert first.output.endswith("\n\n(retrieval memret-2026-09-24-001)")
    write_log(home, "chat-turns", [record("user", content="three")])
    recall(service, "dingo", session="chat-turns")
    missing = recall(service, "nothingmatchesthis", session="chat-other")
    assert missing.output == '(no matches for "nothingmatchesthis")'
    lines = recall_log(home)
    assert [(r["retrieval_id"], r["task_id"]) for r in lines] == [
        ("memret-2026-09-24-001", "chat-turns#2"),
        ("memret-2026-09-24-002", "chat-turns#3"),
        ("memret-2026-09-24-003", "chat-other#0"),
    ]
    assert lines[0]["memory_item_ids"] == [ident]
    assert lines[0]["use_role"] == "background"
    assert lines[0]["retrieved_at"] == "2026-09-24T21:02:07Z"
    assert lines[2]["memory_item_ids"] == []


def test_the_retrieval_counter_survives_a_restart(home: Path, clock: Clock) -> None:
    for expected in ("memret-2026-09-24-001", "memret-2026-09-24-002"):
        memory = Memoryd(load(None, str(home)), now=clock.now)
        memory.open()
        try:
            assert memory.memory.index.wait_ready(60)
            note(memory, "The koala key is in the drawer.")
            assert recall(memory, "koala").output.endswith(f"(retrieval {expected})")
        finally:
            memory.close()
    clock.advance(days=1)
    memory = Memoryd(load(None, str(home)), now=clock.now)
    memory.open()
    try:
        assert memory.memory.index.wait_ready(60)
        assert recall(memory, "koala").output.endswith("(retrieval memret-2026-09-25-001)")
    finally:
        memory.close()


def test_the_owner_search_shows_item_metadata_and_conflicts(service: Memoryd, clock: Clock) -> None:
    note(service, "The wallaby VPN port is 51820.", kind="state", subject="vpn:port")
    clock.advance(minutes=1)
    note(service, "The wallaby VPN port is 51821.", kind="state", subject="vpn:port")
    reply = service.handle("memory_admin", MemoryAdmin(command="search", arg="wallaby"))
    text = reply.text  # type: ignore[union-attr]
    assert "state vpn:port · active" in text
    assert "Conflict on subject `vpn:port`" in text
    rows = reply.data["hits"]  # type: ignore[union-attr]
    assert {row["kind"] for row in rows} == {"state"}
