"""memoryd's side of an import (issue 17): archives under imports/<source>/ in the session-log schema,
indexed with the session walk (a browsing result taints what follows), keyed by the source's id (again:
unchanged is skipped, grown or changed is archived again and indexed once); entries as untrusted notes
and pending changes, a poisoned one refused by the check; erasure deletes an import archive."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import import_exports as exports

from boxmaker.bxctl.imports import chatgpt, hermes
from boxmaker.bxctl.imports.parsed import Parsed
from boxmaker.memoryd.service import Memoryd
from boxmaker.proto.archives import archive_ids, archive_path, import_id, is_import_id
from boxmaker.proto.messages import (
    ImportedConversation,
    ImportedEntry,
    MemoryAdmin,
    MemoryAdminReply,
    MemoryImport,
)


def _body(source: str, parsed: Parsed, **flags: bool) -> MemoryImport:
    return MemoryImport(
        source,  # type: ignore[arg-type]
        "/exports/x",
        [ImportedConversation(c.conversation, c.records, c.title) for c in parsed.conversations],
        [ImportedEntry(e.file, e.text, e.place) for e in parsed.entries],  # type: ignore[arg-type]
        **flags,
    )


def _run(service: Memoryd, body: MemoryImport) -> dict[str, Any]:
    reply = service.handle("memory_import", body)
    assert isinstance(reply, MemoryAdminReply)
    assert isinstance(reply.data, dict)
    return reply.data


def _search(service: Memoryd, query: str) -> list[dict[str, Any]]:
    reply = service.handle("memory_admin", MemoryAdmin(command="search", arg=query))
    assert isinstance(reply, MemoryAdminReply)
    return [h for h in reply.data["hits"] if h["tag"] != "identity"]


QUESTION = "Which weather API did we pick for Harbour?"


def _count(service: Memoryd, text: str) -> int:
    """How many hits hold exactly `text`."""
    return sum(1 for h in _search(service, text) if h["text"] == text)


def _tree(home: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(home)): p.read_bytes()
        for p in sorted(home.rglob("*"))
        if p.is_file() and "index" not in p.parts and "run" not in p.parts and not p.name.startswith(".")
    }


def test_ids_fit_session_ids_and_are_stable() -> None:
    first = import_id("claude-code", "0a1b2c3d-0000-4000-8000-00000000cc01")
    assert first == import_id("claude-code", "0a1b2c3d-0000-4000-8000-00000000cc01")
    assert first.startswith("imp-claude-code-")
    assert len(first) == 42
    assert is_import_id(first)
    assert not is_import_id("imp-hermes")
    assert not is_import_id("chat-abc")


def test_a_conversation_after_a_browsing_result_comes_back_tainted(
    service: Memoryd, home: Path, tmp_path: Path
) -> None:
    parsed = chatgpt.parse(exports.chatgpt_export(tmp_path))
    data = _run(service, _body("chatgpt", parsed))
    (archive,) = data["archives"]
    assert archive["state"] == "new"
    assert archive["records"] == 4
    path = archive_path(home / "imports", archive["id"])
    assert path.parent == home / "imports" / "chatgpt"
    assert path.stat().st_mode & 0o777 == 0o600
    assert path.parent.stat().st_mode & 0o777 == 0o700
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    assert lines[0] == {
        "type": "user",
        "time": "2026-01-01T00:00:00Z",
        "content": "Which weather API did we pick for Harbour?",
    }
    before = _search(service, "weather API Harbour")
    tags = {h["key"]: h["tag"] for h in before}
    assert tags[f"session/{archive['id']}/0/0"] == "memory"  # the owner's question, before the browsing
    after = _search(service, "Stormglass marine endpoint")
    assert after
    assert all(h["tag"] == "memory-tainted" for h in after)
    assert not any("marine endpoint is v2" in h["text"] for h in after)  # the result itself is not indexed
    journal = [
        json.loads(line)
        for p in (home / "memory" / "edits").glob("*.jsonl")
        for line in p.read_text().splitlines()
    ]
    (line,) = [e for e in journal if e["action"] == "import-archives"]
    assert line["where"] == "imports/chatgpt/"
    assert line["archives"][0]["state"] == "new"
    assert "Harbour" not in json.dumps(line)  # the journal names ids and hashes, never the text


def test_a_second_import_changes_nothing_and_a_grown_one_is_indexed_once(
    service: Memoryd, home: Path, tmp_path: Path
) -> None:
    parsed = chatgpt.parse(exports.chatgpt_export(tmp_path))
    _run(service, _body("chatgpt", parsed))
    hermes_parsed = hermes.parse(exports.hermes_home(tmp_path))
    _run(service, _body("hermes", hermes_parsed))
    files = _tree(home)
    again = _run(service, _body("chatgpt", parsed))
    assert [a["state"] for a in again["archives"]] == ["unchanged"]
    again = _run(service, _body("hermes", hermes_parsed))
    assert [a["state"] for a in again["archives"]] == ["unchanged"]
    assert {e["state"] for e in again["entries"]} <= {"imported", "refused"}
    changed = {k for k in _tree(home).keys() | files.keys() if _tree(home).get(k) != files.get(k)}
    assert {k.rsplit("/", 1)[0] for k in changed} == {"memory/edits"}  # only the journal's import lines
    grown = chatgpt.parse(exports.chatgpt_export(tmp_path / "2", extra_turn=True))
    data = _run(service, _body("chatgpt", grown))
    assert [a["state"] for a in data["archives"]] == ["grown"]
    hits = [h for h in _search(service, "quota calls") if "quota" in h["text"]]
    assert len(hits) == 1
    assert hits[0]["tag"] == "memory-tainted"
    assert _count(service, QUESTION) == 1  # never indexed twice


def test_a_changed_branch_replaces_the_archive_in_the_index(service: Memoryd, tmp_path: Path) -> None:
    parsed = chatgpt.parse(exports.chatgpt_export(tmp_path))
    _run(service, _body("chatgpt", parsed))
    parsed.conversations[0].records[-1]["content"] = "Harbour switched to the Openmeteo endpoint."
    data = _run(service, _body("chatgpt", parsed))
    assert [a["state"] for a in data["archives"]] == ["replaced"]
    assert [h["text"] for h in _search(service, "Openmeteo")] == [
        "Harbour switched to the Openmeteo endpoint."
    ]
    assert _search(service, "Stormglass") == []
    assert _count(service, QUESTION) == 1
    parsed.conversations[0].records[-1]["content"] = "Harbour moved to the Tidecast endpoint."
    _run(service, _body("chatgpt", parsed))  # replaced again, maybe while the first rebuild runs
    for thread in list(service.memory.index._background):
        thread.join(30)
    assert _count(service, QUESTION) == 1
    assert [h["text"] for h in _search(service, "Tidecast")] == ["Harbour moved to the Tidecast endpoint."]
    assert _search(service, "Openmeteo") == []


def test_hermes_entries_are_untrusted_notes_and_pending_and_the_poisoned_one_is_refused(
    service: Memoryd, home: Path, tmp_path: Path
) -> None:
    data = _run(service, _body("hermes", hermes.parse(exports.hermes_home(tmp_path))))
    states = [(e["place"], e["state"], e.get("code")) for e in data["entries"]]
    assert states[2] == ("memories/MEMORY.md entry 3", "refused", "refused:phrase")
    assert [s for _, s, _ in states] == ["noted", "noted", "refused", "noted", "noted"]
    assert (home / "memory" / "memory.md").read_text().strip() == ""
    notes = (home / "memory" / "notes.md").read_text()
    assert "in session imp-hermes · private · untrusted · mem-" in notes
    assert "· via import:hermes" in notes
    assert exports.POISON not in notes
    pending = service.handle("memory_admin", MemoryAdmin(command="pending"))
    assert isinstance(pending, MemoryAdminReply)
    assert next(p["origin"] for p in pending.data) == {
        "kind": "import",
        "name": "imp-hermes",
        "class": "private",
        "untrusted": True,
    }
    assert len(pending.data) == 4
    (archive,) = data["archives"]
    assert [h["tag"] for h in _search(service, "launch at dawn")] == ["memory-tainted"]
    assert [h["tag"] for h in _search(service, "kayak trip Skye")][:1] == ["memory"]
    assert archive["id"] in archive_ids(home / "imports")


def test_accept_applies_the_clean_entries_as_the_owners_edits(
    service: Memoryd, home: Path, tmp_path: Path
) -> None:
    data = _run(service, _body("hermes", hermes.parse(exports.hermes_home(tmp_path)), accept=True))
    assert [e["state"] for e in data["entries"]] == [
        "accepted",
        "accepted",
        "refused",
        "accepted",
        "accepted",
    ]
    assert (
        home / "memory" / "user.md"
    ).read_text() == "Owner prefers answers in UTC.\n§\nOwner's cat is called Miso.\n"
    journal = [
        json.loads(line)
        for p in (home / "memory" / "edits").glob("*.jsonl")
        for line in p.read_text().splitlines()
    ]
    accepted = [e for e in journal if e.get("pending") and e["where"] == "user.md"]
    assert accepted[0]["session"] == "owner"
    assert accepted[0]["origin"]["kind"] == "import"
    again = _run(service, _body("hermes", hermes.parse(exports.hermes_home(tmp_path / "2"))))
    assert [e["state"] for e in again["entries"]] == ["present", "present", "refused", "present", "present"]


def test_a_dry_run_and_a_refused_record_change_nothing(service: Memoryd, home: Path, tmp_path: Path) -> None:
    parsed = hermes.parse(exports.hermes_home(tmp_path))
    before = _tree(home)
    data = _run(service, _body("hermes", parsed, dry_run=True))
    assert [a["state"] for a in data["archives"]] == ["new"]
    assert [e["state"] for e in data["entries"]][:3] == ["would-note", "would-note", "refused"]
    assert _tree(home) == before
    assert not (home / "imports").exists()
    parsed.conversations[0].records.append(
        {"type": "usage", "time": "2026-01-01T00:00:00Z", "prompt_n": 1, "cache_n": 0}
    )
    refused = _run(service, _body("hermes", parsed))
    assert refused["code"] == "refused:arguments"
    assert _tree(home) == before
    assert not (home / "imports").exists()


def test_erasure_deletes_an_import_archive_and_its_texts(
    service: Memoryd, home: Path, tmp_path: Path
) -> None:
    data = _run(service, _body("chatgpt", chatgpt.parse(exports.chatgpt_export(tmp_path))))
    archive = data["archives"][0]["id"]
    service.handle(
        "memory_admin", MemoryAdmin(command="note", arg="Which weather API did we pick for Harbour?")
    )
    plan = service.handle(
        "memory_admin", MemoryAdmin(command="erase-plan", args={"sessions": [archive], "reserve": True})
    )
    assert isinstance(plan, MemoryAdminReply), plan
    holders = {h["holder_ref"]: h["holds"] for h in plan.data["holders"]}
    assert holders["imports/"] == 1
    done = service.handle(
        "memory_admin",
        MemoryAdmin(
            command="erase",
            args={"sessions": [archive], "authority": "ticket-17", "erasure_id": plan.data["erasure_id"]},
        ),
    )
    assert isinstance(done, MemoryAdminReply)
    assert done.data.get("code", "ok") == "ok", done
    assert not archive_path(home / "imports", archive).exists()
    assert _search(service, "Harbour") == []
    assert "Which weather API" not in (home / "memory" / "notes.md").read_text()
    again = _run(service, _body("chatgpt", chatgpt.parse(exports.chatgpt_export(tmp_path / "2"))))
    assert [a["state"] for a in again["archives"]] == ["erased"]  # never brought back
    assert not archive_path(home / "imports", archive).exists()


def test_accept_later_applies_what_an_earlier_import_left_pending(
    service: Memoryd, home: Path, tmp_path: Path
) -> None:
    parsed = hermes.parse(exports.hermes_home(tmp_path))
    _run(service, _body("hermes", parsed))
    data = _run(service, _body("hermes", parsed, accept=True))
    assert [e["state"] for e in data["entries"]] == [
        "accepted",
        "accepted",
        "refused",
        "accepted",
        "accepted",
    ]
    assert "Owner's cat is called Miso." in (home / "memory" / "user.md").read_text()
    pending = service.handle("memory_admin", MemoryAdmin(command="pending"))
    assert isinstance(pending, MemoryAdminReply)
    assert pending.data == []


def test_one_withdrawn_record_of_an_archive_is_not_recalled(service: Memoryd, tmp_path: Path) -> None:
    data = _run(service, _body("chatgpt", chatgpt.parse(exports.chatgpt_export(tmp_path))))
    archive = data["archives"][0]["id"]
    done = service.handle(
        "memory_admin",
        MemoryAdmin(
            command="withdraw", args={"sessions": [f"sessions/{archive}/0.jsonl#1"], "reason": "mistaken"}
        ),
    )
    assert isinstance(done, MemoryAdminReply)
    assert done.data["code"] == "ok", done
    assert done.data["not_captured"] == []
    assert _count(service, QUESTION) == 0
    assert _count(service, "Harbour uses the Stormglass marine endpoint.") == 1


def test_a_withdrawn_import_archive_is_not_recalled(service: Memoryd, tmp_path: Path) -> None:
    data = _run(service, _body("chatgpt", chatgpt.parse(exports.chatgpt_export(tmp_path))))
    archive = data["archives"][0]["id"]
    assert _count(service, QUESTION) == 1
    done = service.handle(
        "memory_admin",
        MemoryAdmin(command="withdraw", args={"sessions": [archive], "reason": "mistaken"}),
    )
    assert isinstance(done, MemoryAdminReply)
    assert done.data["code"] == "ok", done
    assert _count(service, QUESTION) == 0
    answer = "Harbour uses the Stormglass marine endpoint."
    assert _count(service, answer) == 0
