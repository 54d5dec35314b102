"""Authorised erasure end to end (seed 003 section 12.3, checklist 21): `bxctl up` starts real memoryd,
brokerd and loopd processes against the fake llama-server; the owner chats, then runs
`bxctl memory erase` (the plan, then `--yes`) and searches every byte of the home afterwards.
"""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from fakes.llama_server import FakeLlamaServer, FakeReply
from protocol_helpers import holding, home_files

SECRET = "ZEBRA-7741-QUOKKA"
SAID = f"Please remember this: my Schließfach code is {SECRET}"
NOTED = f"Owner's Schließfach code is {SECRET}."
ADDED = f"Locker code is {SECRET}."


@dataclass
class Ran:
    code: int
    output: str
    stderr: str


@dataclass
class Box:
    home: Path
    model: FakeLlamaServer

    def bxctl(self, *args: str, ok: bool = True) -> Ran:
        done = subprocess.run(
            [sys.executable, "-m", "boxmaker.bxctl", "--home", str(self.home), *args],
            capture_output=True,
            text=True,
            timeout=180,
            check=False,
        )
        if ok:
            assert done.returncode == 0, done.stdout + done.stderr
        return Ran(done.returncode, done.stdout, done.stderr)

    def chat(self, session: str, text: str, *replies: FakeReply) -> Ran:
        self.model.script(*replies)
        return self.bxctl("chat", "--session", session, "-m", text)

    def tool_result(self, session: str) -> str:
        """The content of the session's last tool result."""
        rows = (self.home / "sessions" / session / "0.jsonl").read_text(encoding="ascii").splitlines()
        return str([r for r in map(json.loads, rows) if r["type"] == "tool_result"][-1]["content"])

    def files(self, skip_run: bool = False) -> dict[str, bytes]:
        return home_files(self.home, skip_run)

    def holding(self, *needles: str) -> list[str]:
        return holding(self.home, *needles)


@pytest.fixture(scope="module")
def box() -> Iterator[Box]:
    root = Path(tempfile.mkdtemp(prefix="bx-erase-", dir="/tmp"))
    home = root / "home"
    with FakeLlamaServer(n_ctx=16384, slots=2) as model:
        state = Box(home, model)
        state.bxctl("up", "--model-url", model.url)
        try:
            yield state
        finally:
            state.bxctl("down", ok=False)


@pytest.fixture(autouse=True)
def home(box: Box, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("BOXMAKER_HOME", str(box.home))
    return box.home


def erase(box: Box, *args: str, ok: bool = True) -> tuple[Ran, dict[str, Any]]:
    ran = box.bxctl("memory", "erase", *args, "--json", ok=ok)
    return ran, json.loads(ran.output)


def results(tombstone: dict[str, Any]) -> dict[str, tuple[str, str | None]]:
    return {h["holder_ref"]: (h["result"], h["limitation_ref"]) for h in tombstone["holders"]}


def test_checklist_21_erasure_receipt_and_byte_search(box: Box) -> None:
    box.chat(
        "chat-secret",
        SAID,
        FakeReply(tool_calls=[("memory", {"action": "note", "text": NOTED})]),
        FakeReply(content="Noted it."),
    )
    box.chat(
        "chat-secret",
        f"remember that my locker code is {SECRET}",
        FakeReply(tool_calls=[("memory", {"action": "add", "file": "user", "text": ADDED})]),
        FakeReply(content="Saved."),
    )
    box.chat(  # another session: its baseline has user.md, and a recall quotes the note
        "chat-other",
        "What is my locker code?",
        FakeReply(tool_calls=[("recall", {"query": "locker code"})]),
        FakeReply(content="See above."),
    )
    assert set(box.holding(SECRET)) >= {
        "memory/notes.md",
        "memory/user.md",
        "sessions/chat-secret/0.jsonl",
        "sessions/chat-other/0.baseline.json",
        "sessions/chat-other/0.jsonl",
    }
    assert SECRET in box.bxctl("memory", "search", SECRET).output

    before = box.files(skip_run=True)
    plan = box.bxctl("memory", "erase", "--session", "chat-secret", "--authority", "ticket-42")
    assert "nothing has changed" in plan.output
    for ref in ("memory/notes.md", "sessions/chat-secret/", "broker/audit/", "model-server:slot-cache"):
        assert ref in plan.output
    assert SECRET not in plan.output
    assert box.files(skip_run=True) == before, "the plan changed files"

    _, done = erase(box, "--session", "chat-secret", "--authority", "ticket-42", "--yes")
    tombstone = done["tombstone"]
    assert tombstone["record_type"] == "erasure-tombstone-v1"
    assert set(tombstone) == {
        "erasure_id",
        "record_type",
        "scope_refs",
        "authority_ref",
        "decided_at",
        "executed_at",
        "holders",
    }
    assert tombstone["erasure_id"].startswith("memerase-")
    # the session and the item its note became (captured there, so erased with it)
    assert tombstone["scope_refs"][-1] == "chat-secret"
    assert [r[:4] for r in tombstone["scope_refs"][:-1]] == ["mem-"]
    assert tombstone["authority_ref"] == "ticket-42"
    got = results(tombstone)
    for ref in (
        "memory/notes.md",
        "memory/user.md",
        "memory/items.jsonl",
        "memory/edits/",
        "memory/recalls/",
        "index/memory.sqlite3",
        "sessions/chat-secret/",
        "sessions/",
        "broker/sessions/chat-secret.json",
        "broker/audit/",
        "model-server:slot-cache",
    ):
        assert got[ref] == ("completed", None), (ref, got[ref])
    assert sorted(box.model.erased[-2:]) == [0, 1]

    assert box.holding(SECRET, "Schließfach", "quokka") == []
    assert not (box.home / "sessions" / "chat-secret").exists()
    stored = (box.home / "memory" / "erasures.jsonl").read_bytes()
    for text in (SECRET, SAID, NOTED, ADDED, f"remember that my locker code is {SECRET}"):
        assert hashlib.sha256(text.encode()).hexdigest().encode() not in stored
        assert text.encode() not in stored
    marker = f"[erased {tombstone['erasure_id']}]"
    assert marker in (box.home / "memory" / "notes.md").read_text(encoding="utf-8")

    again = box.chat("chat-other", "And now?")  # it still opens: its baseline's new hash is in its log
    assert again.output.strip() == "ok: And now?"
    box.bxctl("reindex")  # a rebuild from the files does not bring it back
    assert box.holding(SECRET, "Schließfach", "quokka") == []
    # and nothing finds it (these searches log their own queries, so they come last)
    assert "no matches" in box.bxctl("memory", "search", SECRET).output
    assert "no matches" in box.bxctl("memory", "search", "Schließfach").output
    box.chat(
        "chat-after",
        "Do you know my locker code?",
        FakeReply(tool_calls=[("recall", {"query": SECRET})]),
        FakeReply(content="No."),
    )
    assert "no matches" in box.tool_result("chat-after")
    listed = json.loads(box.bxctl("memory", "erasures", "--json").output)
    assert listed[-1]["erasure_id"] == tombstone["erasure_id"]


def test_an_item_scoped_erasure_leaves_the_id_and_nothing_of_the_text(box: Box) -> None:
    phrase = "The vault PIN is OKAPI-3390-WOMBAT"
    box.chat(
        "chat-item",
        "Note the vault PIN please.",
        FakeReply(tool_calls=[("memory", {"action": "note", "text": phrase})]),
        FakeReply(content="Noted."),
    )
    item = "mem-2026-01-02-001"  # the capture event as memoryd's capture writes it (items.jsonl)
    event = {
        "event": "capture",
        "id": item,
        "time": "2026-01-02T10:00:00Z",
        "kind": "knowledge",
        "subject": None,
        "scope": None,
        "confidence": None,
        "confidence_scheme": None,
        "text": phrase,
        "label": {"class": "private", "untrusted": False},
        "source": "sessions/chat-item/0.jsonl#3",
        "session": "chat-item",
        "call": "c1",
        "corroborating_refs": [],
        "inspired_by": None,
        "note": "",
        "edit": "",
    }
    items = box.home / "memory" / "items.jsonl"
    with items.open("a", encoding="ascii") as handle:
        handle.write(json.dumps(event, separators=(",", ":")) + "\n")
    assert "OKAPI-3390-WOMBAT" in box.bxctl("memory", "search", "OKAPI").output
    before = box.files(skip_run=True)
    plan = box.bxctl("memory", "erase", "--item", item, "--authority", "ticket-43")
    assert "memory/items.jsonl" in plan.output
    assert box.files(skip_run=True) == before

    _, done = erase(box, "--item", item, "--authority", "ticket-43", "--yes")
    tombstone = done["tombstone"]
    assert tombstone["scope_refs"] == [item]
    assert results(tombstone)["memory/items.jsonl"] == ("completed", None)
    assert box.holding("OKAPI-3390-WOMBAT", "okapi") == []
    lines = [json.loads(line) for line in items.read_text(encoding="ascii").splitlines()]
    capture = next(e for e in lines if e.get("id") == item)
    # the erasure marker, as replay renders it (commit 094167e: an erased capture keeps the marker)
    assert capture["text"] == f"[erased {tombstone['erasure_id']}]"
    assert lines[-1] == {
        "event": "erase",
        "time": lines[-1]["time"],
        "erasure": tombstone["erasure_id"],
        "ids": [item],
    }
    assert (box.home / "sessions" / "chat-item").is_dir()  # an item erasure keeps the session
    box.bxctl("reindex")
    assert "no matches" in box.bxctl("memory", "search", "OKAPI").output
    assert box.holding("OKAPI-3390-WOMBAT", "okapi") == []
    # a re-run cannot search for a text it no longer knows: refused, not "completed"
    before = box.files(skip_run=True)
    again = box.bxctl("memory", "erase", "--item", item, "--authority", "ticket-43", "--yes", ok=False)
    assert again.code == 1
    assert (
        f"item {item} was erased by {tombstone['erasure_id']} and its text is no longer known, so its "
        "copies cannot be searched for"
    ) in again.stderr
    assert box.files(skip_run=True) == before


def test_a_bad_authority_or_an_empty_scope_is_refused_and_nothing_changes(box: Box) -> None:
    before = box.files(skip_run=True)
    bad = box.bxctl(
        "memory", "erase", "--session", "chat-other", "--authority", "the owner said so", ok=False
    )
    assert bad.code == 2
    assert "--authority" in bad.stderr
    empty = box.bxctl("memory", "erase", "--authority", "ticket-1", ok=False)
    assert empty.code == 2
    unknown = box.bxctl(
        "memory", "erase", "--item", "mem-2026-01-02-099", "--authority", "t-1", "--yes", ok=False
    )
    assert unknown.code == 1
    assert "no item mem-2026-01-02-099" in unknown.stderr
    assert box.files(skip_run=True) == before


def test_a_live_session_is_partially_completed(box: Box) -> None:
    phrase = "KIWI-5521-NARWHAL"
    box.chat(
        "chat-teller",
        "remember the gate code",
        FakeReply(tool_calls=[("memory", {"action": "add", "file": "user", "text": f"Gate code {phrase}."})]),
        FakeReply(content="Saved."),
    )
    entered, release = threading.Event(), threading.Event()

    def slow(body: dict[str, Any]) -> FakeReply:
        del body
        entered.set()
        release.wait(60)
        return FakeReply(content=f"finally: I have 'Gate code {phrase}.'")  # logged after the erase

    box.model.script(slow)
    live = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "boxmaker.bxctl",
            "--home",
            str(box.home),
            "chat",
            "--session",
            "chat-live",
            "-m",
            "hi",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert entered.wait(60)
        assert phrase in (box.home / "sessions" / "chat-live" / "0.baseline.json").read_text(encoding="utf-8")
        _, done = erase(box, "--session", "chat-teller", "--authority", "ticket-44", "--yes")
    finally:
        release.set()
        out, err = live.communicate(timeout=60)
    got = results(done["tombstone"])
    assert got["sessions/"] == ("partially-completed", "live-session-context")
    assert got["model-server:slot-cache"] == ("unevaluated", "slot-busy")
    assert got["sessions/chat-teller/"] == ("completed", None)
    assert live.returncode == 0, out + err
    assert phrase in out  # the owner saw the reply; loopd scrubbed it from the log before memoryd read it
    assert box.holding(phrase) == []
    marker = f"[erased {done['tombstone']['erasure_id']}]"
    assert marker in (box.home / "sessions" / "chat-live" / "0.jsonl").read_text(encoding="ascii")
    # and after the next turn too (loopd still knows the texts, in memory only)
    box.chat("chat-live", "again", FakeReply(content=f"still: Gate code {phrase}."))
    assert box.holding(phrase) == []
    assert "no matches" in box.bxctl("memory", "search", phrase).output
    # a re-run of the erased session cannot claim completed: it names what was not completed
    again = box.bxctl("memory", "erase", "--session", "chat-teller", "--authority", "ticket-44", ok=False)
    assert again.code == 1
    assert "session chat-teller was erased by memerase-" in again.stderr
    assert "sessions/ (partially-completed, live-session-context)" in again.stderr
    assert "model-server:slot-cache (unevaluated, slot-busy)" in again.stderr


def _stop(box: Box, role: str, socket: str) -> None:
    pid = int((box.home / "run" / f"{role}.pid").read_text().strip())
    os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + 20
    while (box.home / "run" / socket).exists() and time.monotonic() < deadline:
        time.sleep(0.1)


def test_roles_that_are_down_refuse_the_erasure_unless_allowed_and_a_rerun_is_true(box: Box) -> None:
    box.chat(
        "chat-down",
        "remember the bike lock",
        FakeReply(tool_calls=[("memory", {"action": "note", "text": "Bike lock is TAPIR-1188-MOOSE"})]),
        FakeReply(content="Noted."),
    )
    _stop(box, "brokerd", "owner-broker/admin.sock")
    _stop(box, "loopd", "owner-loop/chat.sock")
    try:
        tombstones = box.home / "memory" / "erasures.jsonl"
        before, known = box.files(skip_run=True), tombstones.exists() and tombstones.read_bytes()
        ran = box.bxctl("memory", "erase", "--session", "chat-down", "--authority", "t-45", "--yes", ok=False)
        assert ran.code == 1
        assert "refused (role-down): loopd and brokerd do not answer" in ran.stderr
        assert "bxctl up" in ran.stderr
        assert box.files(skip_run=True) == before
        assert (tombstones.exists() and tombstones.read_bytes()) == known

        ran, done = erase(
            box, "--session", "chat-down", "--authority", "t-45", "--yes", "--allow-unevaluated", ok=False
        )
        assert ran.code == 1
        got = results(done["tombstone"])
        assert got["broker/audit/"] == ("unevaluated", "role-down")
        assert got["broker/sessions/chat-down.json"] == ("unevaluated", "role-down")
        assert got["sessions/chat-down/"] == ("unevaluated", "role-down")
        assert got["memory/notes.md"] == ("completed", None)
        assert set(done["down"]) == {"loopd", "brokerd"}
        assert "cannot find the texts erased now" in done["not_kept"]
        assert box.holding("TAPIR-1188-MOOSE") != []  # its session folder still holds it
    finally:
        box.bxctl("up", "--model-url", box.model.url)
    # the session's folder still shows its texts, so a run now finds and erases them
    _, done = erase(box, "--session", "chat-down", "--authority", "t-46", "--yes")
    got = results(done["tombstone"])
    assert got["sessions/chat-down/"] == ("completed", None)
    assert got["index/memory.sqlite3"] == ("completed", None)
    assert box.holding("TAPIR-1188-MOOSE") == []


def test_the_plan_reads_as_expected_and_a_session_never_held_is_refused(box: Box) -> None:
    before = box.files(skip_run=True)
    plan = box.bxctl("memory", "erase", "--session", "chat-other", "--authority", "t-47")
    assert "would be completed" in plan.output
    assert not [line for line in plan.output.splitlines() if line.strip().startswith("completed")]
    planned = json.loads(
        box.bxctl("memory", "erase", "--session", "chat-other", "--authority", "t-47", "--json").output
    )
    rows = [row for group in planned["holders"].values() for row in group]
    assert rows
    assert all("expected" in row and "result" not in row for row in rows)

    ran = box.bxctl("memory", "erase", "--session", "chat-nonexist", "--authority", "x", "--yes", ok=False)
    assert ran.code == 1
    assert "nothing of chat-nonexist is held; nothing was erased" in ran.stderr

    bogus = str(box.home.parent / "nothing.sock")
    ran = box.bxctl(
        "memory",
        "erase",
        "--session",
        "chat-other",
        "--authority",
        "t-48",
        "--yes",
        "--memory-socket",
        bogus,
        ok=False,
    )
    assert ran.code == 1
    assert "memoryd does not answer" in ran.stderr
    ran = box.bxctl(
        "memory",
        "erase",
        "--session",
        "chat-other",
        "--authority",
        "t-48",
        "--yes",
        "--loop-socket",
        bogus,
        "--broker-socket",
        bogus,
        ok=False,
    )
    assert ran.code == 1
    assert "loopd and brokerd do not answer" in ran.stderr
    assert box.files(skip_run=True) == before
    assert "chat-nonexist" not in box.bxctl("memory", "erasures").output


def test_exports_outside_the_home_are_unevaluated_and_inside_are_scrubbed(box: Box) -> None:
    phrase = "Boat key is LLAMA-2207-OTTER"
    box.chat(
        "chat-export",
        "note the boat key",
        FakeReply(tool_calls=[("memory", {"action": "note", "text": phrase})]),
        FakeReply(content="Noted."),
    )
    outside = Path(tempfile.mkdtemp(prefix="bx-export-", dir="/tmp")) / "bundle.json"
    inside = box.home / "bundle.json"
    box.bxctl("memory", "export", str(outside))
    box.bxctl("memory", "export", str(inside))
    assert b"LLAMA-2207-OTTER" in outside.read_bytes()
    assert b"LLAMA-2207-OTTER" in inside.read_bytes()
    _, done = erase(box, "--session", "chat-export", "--authority", "t-49", "--yes")
    exports = sorted(
        (h["result"], h["limitation_ref"])
        for h in done["tombstone"]["holders"]
        if h["holder_ref"].startswith("export:")
    )
    assert exports == [("completed", None), ("unevaluated", "outside-home")]
    assert b"LLAMA-2207-OTTER" in outside.read_bytes()  # not touched, and not claimed
    assert box.holding("LLAMA-2207-OTTER") == []
