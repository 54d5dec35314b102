"""Capture, kind, Source and supersede end to end (issue 6; seed 003 checklist 3 and 11): `bxctl up`
starts real memoryd, brokerd and loopd against the fake llama-server, the agent writes through the
`memory` tool, and the owner looks with `bxctl memory items`, `item`, `supersede` and `status`.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from boxmaker.memoryd.files.notes import parse
from boxmaker.memoryd.items.store import item_id_of
from fakes.llama_server import FakeReply
from protocol_helpers import Box, note_call, running


@pytest.fixture(scope="module")
def box() -> Iterator[Box]:
    with running("bx-items-") as state:
        yield state


@pytest.fixture(autouse=True)
def home(box: Box, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("BOXMAKER_HOME", str(box.home))
    return box.home


def test_checklist_3_the_agent_writes_a_distilled_note(box: Box) -> None:
    """Seed 003 checklist 3: the agent writes a distilled note through the memory tool; it is an item
    with its kind, its label and a Source memoryd found in the session's own log."""
    done = box.chat(
        "chat-lesson",
        "Remember: the backup failed because the disk was mounted read-only.",
        note_call("Backups fail when the backup disk is mounted read-only.", confidence="confirmed"),
        FakeReply(content="Noted."),
    )
    assert done.stdout.strip() == "Noted."
    [item] = box.items("--kind", "knowledge")
    assert (item["kind"], item["text"], item["confidence"]) == (
        "knowledge",
        "Backups fail when the backup disk is mounted read-only.",
        "confirmed",
    )
    assert item["source"].startswith("sessions/chat-lesson/0.jsonl#")
    record = box.log_line(item["source"])
    assert record["type"] == "assistant"
    assert record["tool_calls"][0]["id"] == item["call"]
    notes = [n for n in parse((box.home / "memory" / "notes.md").read_text()) if n.kind == "noted"]
    assert [item_id_of(n) for n in notes] == [item["id"]]
    shown = box.bxctl("memory", "item", item["id"]).stdout
    assert f"- id: {item['id']}" in shown
    assert "- Confidence-Scheme: epistemic-status-v1" in shown


def test_a_newer_state_value_supersedes_the_old_by_command(box: Box) -> None:
    box.chat(
        "chat-ip1",
        "The NAS is at 10.0.0.7, remember that.",
        note_call("The NAS is at 10.0.0.7.", kind="state", subject="nas:ip"),
        FakeReply(content="Noted."),
    )
    box.chat(
        "chat-ip2",
        "From now on the NAS is at 10.0.0.8.",
        note_call("The NAS is at 10.0.0.8.", kind="state", subject="nas:ip"),
        FakeReply(content="Noted."),
    )
    refused = box.chat(
        "chat-ip3",
        "Remember the router's address is 10.0.0.1.",
        note_call("The router is at 10.0.0.1.", kind="state"),
        FakeReply(content="I need a subject."),
    )
    assert refused.returncode == 0
    old, new = box.items("--subject", "nas:ip")
    assert [old["status"], new["status"]] == ["active", "active"]
    assert old["source"].startswith("sessions/chat-ip1/0.jsonl#")
    assert new["source"].startswith("sessions/chat-ip2/0.jsonl#")
    assert box.bxctl("memory", "supersede", new["id"], old["id"], ok=False).returncode == 1
    done = box.bxctl("memory", "supersede", old["id"], new["id"])
    assert f"{old['id']} is superseded by {new['id']}" in done.stdout
    old, new = box.items("--subject", "nas:ip")
    assert (old["status"], old["superseded_by"], new["status"]) == ("superseded", new["id"], "active")
    table = box.bxctl("memory", "items", "--kind", "state").stdout
    assert f"superseded → {new['id']}" in table
    assert "The router" not in table
    log = json.loads(box.bxctl("memory", "log", "--json").stdout)
    assert log[-1]["action"] == "supersede"


def test_status_and_bad_ids_by_command(box: Box) -> None:
    [item] = box.items("--kind", "knowledge")
    done = box.bxctl("memory", "status", item["id"], "stale")
    assert done.stdout.strip() == f"{item['id']} is now stale (was active)"
    bad = box.bxctl("memory", "item", "mem-nope", ok=False)
    assert bad.returncode != 0
    assert "is not an item id" in bad.stderr
    assert "Traceback" not in bad.stderr
    missing = box.bxctl("memory", "status", "mem-2020-01-01-001", "stale", ok=False)
    assert missing.returncode == 1
    assert "no item mem-2020-01-01-001" in missing.stderr
    wrong = box.bxctl("memory", "status", item["id"], "superseded", ok=False)
    assert wrong.returncode == 2  # click's choice: superseded is set only by supersede


def test_a_credential_is_never_stored(box: Box) -> None:
    box.chat(
        "chat-secret",
        "Remember my token ghp_0123456789abcdefghij0123456789abcdef.",
        note_call("GitHub token: ghp_0123456789abcdefghij0123456789abcdef"),
        FakeReply(content="I will not store that."),
    )
    assert "ghp_0123456789" not in (box.home / "memory" / "notes.md").read_text()
    assert not any("ghp_" in i["text"] for i in box.items())
