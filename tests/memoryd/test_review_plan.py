"""The review plan (seed 003 section 16; checklist 9) and the owner's reconcile, through memoryd's
service and its real files."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

from item_helpers import commit_events, stamp
from test_skeptic import note

from boxmaker.memoryd.review import sections as review_sections
from boxmaker.memoryd.service import Memoryd
from boxmaker.memoryd.write import itemops
from boxmaker.memoryd.write.answer import OWNER
from boxmaker.proto.messages import MemoryAdmin
from conftest import Clock


def snapshot(folder: Path) -> dict[str, str]:
    """Every file under `folder` by relative path, with its bytes' hash."""
    return {
        str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


def admin(service: Memoryd, command: str, arg: str = "", **args: Any) -> Any:
    return service.handle("memory_admin", MemoryAdmin(command=command, arg=arg, args=args))


def sections(service: Memoryd) -> dict[str, dict[str, Any]]:
    data = admin(service, "review").data
    assert data["changed"] is False
    return {s["name"]: s for s in data["sections"]}


def test_checklist_9_review_plans_before_deletion(home: Path, service: Memoryd, clock: Clock) -> None:
    """A store with something for every section gets a plan naming each thing and the owner command
    for it, and memory/ is byte for byte unchanged."""
    (home / "memory" / "soul.md").write_text("You are helpful.\nOn 2026-09-01 the owner lost the VPN key.\n")
    admin(service, "add", file="memory", text="Always answer in UTC.")
    note(service, "The okapi disk is sdb.", kind="state", subject="disk:okapi")
    clock.advance(minutes=1)
    note(service, "The okapi disk is sdc.", kind="state", subject="disk:okapi")
    note(service, "Restart the okapi service after upgrades.")
    note(service, "restart the okapi service, after upgrades!")
    pending = note(service, "The old okapi mirror is slow.")
    assert itemops.set_status(service.memory.writer, pending, "pending-cleanup", OWNER).ok
    withdrawn = note(service, "A failed okapi idea.")
    admin(service, "withdraw", items=[withdrawn], reason="failed-exploration")
    with (home / "memory" / "notes.md").open("a") as handle:
        handle.write("§ noted 2026-09-01T10:00Z in session chat-legacy · private\nA legacy note [待清理]\n\n")
    admin(service, "archive")
    memory_dir = home / "memory"
    before = snapshot(memory_dir)
    reply = admin(service, "review")
    assert snapshot(memory_dir) == before
    text = reply.text
    assert text.startswith("Review plan: nothing was changed")
    found = {s["name"]: s for s in reply.data["sections"]}
    assert [s["name"] for s in reply.data["sections"]] == [
        "misleading", "index", "pending-cleanup", "duplicates", "conflicts", "boundary", "withdrawals",
        "archive", "schema", "triggers",
    ]  # fmt: skip
    assert next(r.get("id") for r in found["pending-cleanup"]["rows"]) == pending
    assert any(r.get("legacy_marker") for r in found["pending-cleanup"]["rows"])
    assert found["duplicates"]["rows"][0]["match"] == "identical"
    [conflict] = found["conflicts"]["rows"]
    assert conflict["subject"] == "disk:okapi"
    assert "bxctl memory reconcile SUBJECT --keep ID" in found["conflicts"]["do"]
    boundary = [(r.get("file"), r["reads_like"]) for r in found["boundary"]["rows"]]
    assert ("memory.md", "standing rule") in boundary
    assert ("soul.md", "one-off incident") in boundary
    assert found["withdrawals"]["rows"][0]["state"] == "in-force"
    [archived] = found["archive"]["rows"]
    assert withdrawn not in archived["items"]
    assert pending in archived["items"]
    assert found["schema"]["rows"][0]["note"].startswith("note/")
    assert [r["topic"] for r in found["triggers"]["rows"]] == ["topics/lessons.md"]
    assert "failed okapi idea" not in text  # withdrawn content is never shown; its id only in the controls
    assert [line for line in text.split("\n") if withdrawn in line] == [
        f"   - in-force: {found['withdrawals']['rows'][0]['heads'][0]} · {withdrawn}"
    ]
    for section in reply.data["sections"]:
        assert section["do"]
    assert "   Do: choose the current value: bxctl memory reconcile SUBJECT --keep ID" in text


def test_misleading_items_come_first_ordered_by_count(service: Memoryd) -> None:
    one = note(service, "The capybara port is 8080.")
    two = note(service, "The capybara user is admin.")
    feedback = []
    for n, (ident, times) in enumerate([(one, 2), (two, 3)]):
        for m in range(times):
            feedback.append(
                {
                    "event_id": f"memfb-2026-09-24-{n}{m:02d}",
                    "memory_item_ids": [ident],
                    "verdict": "misleading",
                    "recorded_by": "session",
                }
            )
    folder = service.config.layout.memory
    import json

    (folder / "feedback.jsonl").write_text("".join(json.dumps(e) + "\n" for e in feedback))
    found = sections(service)
    assert [r["id"] for r in found["misleading"]["rows"]] == [two, one]
    text = admin(service, "review").text
    assert text.split("\n")[2].startswith("1. Items with repeated misleading feedback")
    assert f"{two} · 3 misleading (0 by the owner, 3 self-rated by sessions: weak)" in text


def test_archive_counts_what_no_autodream_line_showed(service: Memoryd, clock: Clock) -> None:
    first = note(service, "The tenrec note one.")
    admin(service, "archive")
    assert sections(service)["archive"]["rows"][0]["items"] == [first]
    clock.advance(minutes=1)
    entry = {"session": "job-autodream-t1", "call": "", "action": "autodream", "file": "items.jsonl",
             "where": "items.jsonl", "before": [], "after": [], "untrusted": False}  # fmt: skip
    entry["ids"] = [first]
    from boxmaker.memoryd.files.journal import Change

    with service.memory.writer.lock:
        service.memory.journal.commit(Change(entry))
    assert sections(service)["archive"]["rows"] == []
    clock.advance(minutes=1)
    later = note(service, "The tenrec note two.")
    admin(service, "archive")
    [row] = sections(service)["archive"]["rows"]
    assert row["items"] == [later]


def test_items_missing_source_are_schema_drift(service: Memoryd) -> None:
    from boxmaker.memoryd.items import store as items

    ident = service.memory.items.next_id(service.memory.now().date())
    event = items.capture_event(
        ident=ident, time=stamp(service), kind="knowledge", subject=None, scope=None, confidence=None,
        text="An imported fact without a Source.", label=OWNER.label, source="", session="owner", call="",
    )  # fmt: skip
    commit_events(service, "note", [event])
    [row] = [r for r in sections(service)["schema"]["rows"] if r.get("id")]
    assert (row["id"], row["missing"]) == (ident, ["Source"])


def test_reconcile_by_the_owner_only_and_journalled(service: Memoryd, clock: Clock, home: Path) -> None:
    a = note(service, "Jump host is serval-1.", kind="state", subject="jump")
    clock.advance(minutes=1)
    b = note(service, "Jump host is serval-2.", kind="state", subject="jump")
    clock.advance(minutes=1)
    c = note(service, "Jump host is serval-3.", kind="state", subject="jump")
    journal = b"".join(p.read_bytes() for p in sorted((home / "memory" / "edits").glob("*.jsonl")))
    for subject, keep, code in [
        ("jump", "mem-2026-01-01-001", "refused:not-found"),
        ("other", a, "refused:subject"),
    ]:
        assert admin(service, "reconcile", subject, keep=keep).data["code"] == code
    session = itemops.Caller("chat-x", "c1", OWNER.label)
    assert itemops.reconcile(service.memory.writer, "jump", a, session).code == "refused:denied"
    assert b"".join(p.read_bytes() for p in sorted((home / "memory" / "edits").glob("*.jsonl"))) == journal
    done = admin(service, "reconcile", "jump", keep=a)  # the owner may keep the older value
    assert done.data["code"] == "ok"
    assert (
        done.text
        == f"reconciled jump: {a} is the current value; {b}, {c} are superseded by it and stay as history"
    )
    found = service.memory.items.items()
    assert (found[a].status, found[b].superseded_by, found[c].superseded_by) == ("active", a, a)
    line = service.memory.journal.find(done.data["edit"])
    assert line is not None
    assert line["action"] == "reconcile"
    assert len(line["events"]) == 2
    assert admin(service, "reconcile", "jump", keep=a).data["code"] == "refused:status"
    # status changes by the owner are journalled too
    status = admin(service, "item-status", a, status="stale")
    assert service.memory.journal.find(status.data["edit"])["action"] == "status"  # type: ignore[index]


def test_reconcile_never_keeps_an_untrusted_value_over_a_trusted_one(service: Memoryd, clock: Clock) -> None:
    trusted = note(service, "DNS is 1.1.1.1.", kind="state", subject="dns")
    clock.advance(minutes=1)
    tainted = note(service, "DNS is 6.6.6.6.", "chat-web", True, kind="state", subject="dns")
    assert admin(service, "reconcile", "dns", keep=tainted).data["code"] == "refused:tainted"
    assert admin(service, "reconcile", "dns", keep=trusted).data["code"] == "ok"
    assert review_sections.INDEX_LINES == 200


def test_review_of_a_large_home_is_bounded_per_section(service: Memoryd) -> None:
    """3,000 pending-cleanup, archived, identical knowledge items that read like rules: every section
    shows at most sections.SHOWN rows and counts the rest, so the reply stays far under the frame limit."""
    import msgspec

    from boxmaker.memoryd.items import store as items_mod
    from boxmaker.proto.labels import DataClass, Label

    total, body = 3000, "Always rotate the backup disks before the weekly run. " * 25
    day = service.memory.now().date()
    events: list[dict[str, Any]] = []
    for n in range(1, total + 1):
        ident = f"mem-{day:%Y-%m-%d}-{n:03d}"
        events.append(
            items_mod.capture_event(
                ident=ident,
                time=stamp(service),
                kind="knowledge",
                subject=None,
                scope=None,
                confidence=None,
                text=body,
                label=Label(DataClass.PRIVATE, False),
                source=f"sessions/chat-a/0.jsonl#{n}",
                session="chat-a",
                call="c1",
            )
        )
        events.append({"event": "status", "time": stamp(service), "id": ident, "status": "pending-cleanup",
                       "prior": "active"})  # fmt: skip
    ids = [e["id"] for e in events if e["event"] == "capture"]
    events.append({"event": "archive", "time": stamp(service), "file": f"archive/{day}.md", "ids": ids})
    for start in range(0, len(events), 500):
        commit_events(service, "note", events[start : start + 500])
    reply = admin(service, "review")
    size = len(msgspec.json.encode(reply))
    assert size < 400_000, size
    found = {s["name"]: s for s in reply.data["sections"]}
    pending = found["pending-cleanup"]
    assert (pending["count"], len(pending["rows"]), pending["more"]) == (
        total,
        review_sections.SHOWN,
        total - review_sections.SHOWN,
    )
    assert pending["see"] == "bxctl memory items --status pending-cleanup"
    assert "   - … and 2,980 more; see bxctl memory items --status pending-cleanup" in reply.text
    assert found["duplicates"]["count"] == total - 1  # each pairs with the first of its text
    [archive] = found["archive"]["rows"]
    assert (len(archive["items"]), archive["items_count"]) == (review_sections.ROW_IDS, total)
    for section in found.values():
        assert len(section["rows"]) <= review_sections.SHOWN


def test_a_plan_after_changes_equals_one_made_from_nothing(service: Memoryd) -> None:
    """Review keeps each topic's near pairs between plans (issue 16);
    after notes, a status change and a withdrawal, the plan is the one computed afresh."""
    note(service, "Restart the okapi service after upgrades.")
    note(service, "restart the okapi service, after upgrades!")
    note(service, "Never deploy the okapi on Fridays.")
    first = sections(service)
    assert first["duplicates"]["count"] == 1
    assert first["boundary"]["count"] == 1
    near = note(service, "Restart the okapi service after the upgrades.")
    ruled = note(service, "From now on the okapi logs rotate daily.")
    assert itemops.set_status(service.memory.writer, near, "stale", OWNER).ok
    admin(service, "withdraw", items=[ruled], reason="failed-exploration")
    note(service, "Restart the okapi services after upgrades.")
    kept = sections(service)
    review_sections._NEAR.clear()
    assert kept == sections(service)
    assert [r["match"] for r in kept["duplicates"]["rows"]] == ["identical", "near-identical"]
    assert kept["boundary"]["count"] == 1  # the withdrawn rule is left out
    assert ruled not in {r.get("id") for r in kept["boundary"]["rows"]}
