"""The identity-write rule (issue 15 item 1): labels only get stricter through identity.

A session that read data above private (or untrusted content) never writes memory.md or user.md
itself: its add is a labelled note and a pending change carrying its origin; its other edits are
refused; the owner's accept of such a change needs --yes, names the origin and is journalled as the
owner's with the origin and the class.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from test_writer import CLEAN, TAINTED, Memory

from boxmaker.memoryd.files.notes import parse
from boxmaker.memoryd.files.provenance import unclassed_entries
from boxmaker.memoryd.write.actions import Add, Consolidate, MemoryAction, RawItem, Remove, Replace
from boxmaker.memoryd.write.answer import Caller
from boxmaker.memoryd.write.origin import Origin, identity_rule, needs_confirmation
from boxmaker.proto import wire
from boxmaker.proto.labels import DataClass, Label
from boxmaker.proto.messages import MemoryBlock, MemoryBlockReply, MemoryCall, ToolRequest, ToolResponse
from conftest import Clock, bxctl_ok, record

SECRET = Caller("chat-secret", "call-9", Label(DataClass.SECRET, False))
SECRET_TAINTED = Caller("chat-both", "call-8", Label(DataClass.SECRET, True))
PUBLIC = Caller("chat-public", "call-7", Label(DataClass.PUBLIC, False))


@pytest.fixture
def memory(home: Path, clock: Clock) -> Memory:
    return Memory(home, clock)


def _pending(memory: Memory) -> list[dict[str, object]]:
    path = memory.dir / "pending.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


@pytest.mark.parametrize(
    ("origin", "applies", "reason"),
    [
        (Origin("owner", "owner", Label(DataClass.PRIVATE, False)), True, ""),
        (Origin("session", "s", Label(DataClass.PUBLIC, False)), True, ""),
        (Origin("session", "s", Label(DataClass.PRIVATE, False)), True, ""),
        (Origin("session", "s", Label(DataClass.SECRET, False)), False, "class"),
        (Origin("session", "s", Label(DataClass.PUBLIC, True)), False, "tainted"),
        (Origin("session", "s", Label(DataClass.SECRET, True)), False, "tainted"),
        (Origin("mcp", "claude-code", Label(DataClass.PRIVATE, False)), False, "client"),
        (Origin("mcp", "claude-code", Label(DataClass.PRIVATE, False), client_trusted=True), True, ""),
        (Origin("mcp", "claude-code", Label(DataClass.SECRET, False), client_trusted=True), False, "class"),
        (Origin("import", "hermes", Label(DataClass.PRIVATE, False)), False, "import"),
    ],
)
def test_the_rule_decides_by_origin(origin: Origin, applies: bool, reason: str) -> None:
    verdict = identity_rule(origin)
    assert (verdict.applies, verdict.reason) == (applies, reason)


def test_confirmation_is_needed_above_private_or_untrusted() -> None:
    assert not needs_confirmation(Label(DataClass.PRIVATE, False))
    assert not needs_confirmation(Label(DataClass.PUBLIC, False))
    assert needs_confirmation(Label(DataClass.SECRET, False))
    assert needs_confirmation(Label(DataClass.PUBLIC, True))


@pytest.mark.parametrize("file", ["memory", "user"])
def test_a_secret_session_add_is_a_secret_note_and_a_pending_change(memory: Memory, file: str) -> None:
    text = "The staging database password rotates on Mondays (from vault/ops.txt)."
    output, code = memory.do(SECRET, Add(file=file, text=text))  # type: ignore[arg-type]
    assert (output, code) == (
        "saved as note mem-2026-09-24-001 (secret): this session has read secret data",
        "noted",
    )
    assert memory.read(f"{file}.md") == ""
    [note] = parse(memory.read("notes.md"))
    assert (note.label, note.text) == (Label(DataClass.SECRET, False), text)
    [staged] = _pending(memory)
    assert staged["origin"] == {
        "kind": "session",
        "name": "chat-secret",
        "class": "secret",
        "untrusted": False,
    }
    assert staged["arguments"] == {"action": "add", "file": file, "text": text}


def test_a_public_session_still_writes_identity(memory: Memory) -> None:
    assert memory.do(PUBLIC, Add(file="memory", text="Builds run on Fridays."))[1] == "ok"
    assert memory.read("memory.md") == "Builds run on Fridays.\n"
    assert memory.journal()[-1]["class"] == "public"


@pytest.mark.parametrize(
    "action",
    [
        Replace(file="memory", old="a", text="b"),
        Remove(file="user", old="a"),
        Consolidate(file="memory", entries=[RawItem(old="a", keep=True)]),
    ],
)
def test_a_secret_session_cannot_change_identity(memory: Memory, action: MemoryAction) -> None:
    memory.do(CLEAN, Add(file="memory", text="a"))
    memory.do(CLEAN, Add(file="user", text="a"))
    before = {p.name: p.read_bytes() for p in memory.dir.rglob("*") if p.is_file()}
    output, code = memory.do(SECRET, action)
    file = "user.md" if action.file == "user" else "memory.md"  # type: ignore[union-attr]
    assert (output, code) == (
        f"this session has read secret data; it can take notes but not change {file}",
        "refused:class",
    )
    assert {p.name: p.read_bytes() for p in memory.dir.rglob("*") if p.is_file()} == before


def test_untrusted_wins_over_class_for_the_refusal(memory: Memory) -> None:
    memory.do(CLEAN, Add(file="memory", text="a"))
    assert memory.do(SECRET_TAINTED, Remove(file="memory", old="a"))[1] == "refused:tainted"
    assert memory.do(SECRET_TAINTED, Add(file="memory", text="b"))[0].endswith("has read untrusted content")


def test_accepting_a_held_change_needs_yes_and_is_the_owners_edit(memory: Memory) -> None:
    text = "Deploy key lives in ops/keys (owner checked)."
    memory.do(SECRET, Add(file="memory", text=text))
    [staged] = _pending(memory)
    pid = str(staged["id"])
    refused = memory.writer.accept(pid)
    assert (refused.code, refused.output) == (
        "refused:confirm",
        f"{pid} comes from session chat-secret (secret); accepting it puts its text into every "
        "session's prompt; nothing was changed; to accept it, run again with --yes",
    )
    assert memory.read("memory.md") == ""
    done = memory.writer.accept(pid, confirmed=True)
    assert done.code == "ok"
    assert done.output.startswith(f"{pid} accepted as {done.edit} (from session chat-secret (secret)): ")
    assert memory.read("memory.md") == text + "\n"
    line = memory.journal()[-1]
    assert (line["session"], line["pending"], line["class"]) == ("owner", pid, "secret")
    assert line["origin"] == {"kind": "session", "name": "chat-secret", "class": "secret", "untrusted": False}
    assert memory.writer.accept(pid, confirmed=True).code == "refused:not-found"


def test_an_untrusted_add_is_staged_too_and_needs_yes(memory: Memory) -> None:
    memory.do(TAINTED, Add(file="user", text="Owner likes green tea."))
    [staged] = _pending(memory)
    assert memory.writer.accept(str(staged["id"])).code == "refused:confirm"
    assert memory.writer.accept(str(staged["id"]), confirmed=True).code == "ok"
    assert memory.journal()[-1]["origin"]["untrusted"] is True


def test_accept_still_runs_the_write_check(memory: Memory) -> None:
    memory.do(SECRET, Add(file="memory", text="x" * 900))
    memory.do(CLEAN, Add(file="memory", text="y" * 1500))
    [staged] = _pending(memory)
    answer = memory.writer.accept(str(staged["id"]), confirmed=True)
    assert answer.code == "refused:limit"
    assert memory.read("memory.md") == "y" * 1500 + "\n"


def test_a_review_mode_change_keeps_the_seed_journal_line(home: Path, clock: Clock) -> None:
    memory = Memory(home, clock, review=True)
    assert memory.do(CLEAN, Add(file="memory", text="Owner prefers UTC."))[1] == "staged"
    [staged] = _pending(memory)
    answer = memory.writer.accept(str(staged["id"]))
    assert answer.output.startswith(f"{staged['id']} accepted as ")
    line = memory.journal()[-1]
    assert (line["session"], line["class"]) == ("chat-clean", "private")
    assert "origin" not in line


def test_a_held_add_is_not_an_identity_edit_to_undo(memory: Memory) -> None:
    memory.do(SECRET, Add(file="memory", text="secret-ish text"))
    held = memory.journal()[-1]
    assert held["where"] == "notes.md"
    answer = memory.writer.undo(held["id"])
    assert answer.code == "refused:not-undoable"
    assert memory.writer.undo(None).code == "refused:not-found"


def test_undo_of_an_accepted_change_keeps_its_class(memory: Memory) -> None:
    memory.do(SECRET, Add(file="memory", text="from the secret session"))
    [staged] = _pending(memory)
    accepted = memory.writer.accept(str(staged["id"]), confirmed=True)
    undone = memory.writer.undo(accepted.edit)
    assert undone.code == "ok"
    assert memory.read("memory.md") == ""
    assert memory.journal()[-1]["class"] == "secret"


def test_old_entries_written_by_a_secret_session_are_named(home: Path, clock: Clock, memory: Memory) -> None:
    """Journal lines from before the rule carry no class: the session log says the class."""
    sessions = home / "sessions"
    for session, result_class in (("chat-old", "secret"), ("chat-fine", "private")):
        folder = sessions / session
        folder.mkdir(parents=True)
        records = [
            record(
                "tool_result", call="read_file", tool_call_id="c0", content="k", **{"class": result_class}
            ),
            record("assistant", content=None, tool_calls=[{"id": "c1", "name": "memory", "arguments": "{}"}]),
            record("tool_result", call="read_file", tool_call_id="c2", content="x", **{"class": "secret"}),
        ]
        for r in records:
            r.setdefault("untrusted", False)
        records[1].pop("untrusted")
        (folder / "0.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))

    def line(ident: str, session: str, where: str, before: list[str], after: list[str]) -> dict[str, object]:
        return {"id": ident, "session": session, "call": "c1", "action": "add", "where": where} | {
            "before": before,
            "after": after,
        }

    lines = [
        line("e1", "chat-old", "memory.md", [], ["leak"]),
        line("e2", "chat-fine", "memory.md", ["leak"], ["leak", "fine"]),
        line("e3", "chat-old", "user.md", [], ["gone"]),
        line("e4", "chat-old", "memory.md", [], ["new"]) | {"class": "private"},
    ]
    found = unclassed_entries(lines, {"memory.md": ("leak", "fine", "new"), "user.md": ()}, sessions)
    assert [(u.file, u.entry, u.edit, u.session, u.data_class) for u in found] == [
        ("memory.md", "leak", "e1", "chat-old", DataClass.SECRET)
    ]


@pytest.mark.usefixtures("daemon")
def test_through_memoryd_and_bxctl_a_secret_session_never_reaches_the_block(home: Path) -> None:
    """The red team's path: a session labelled secret by brokerd asks memoryd to add what it read."""
    run = home / "run"
    text = "AWS root account recovery codes are in finance/recovery.txt"
    request = ToolRequest(
        session="chat-leak",
        call_id="c1",
        tool="memory",
        arguments={"action": "add", "file": "user", "text": text},
    )
    reply = wire.call(
        run / "broker-memory" / "memory.sock",
        MemoryCall(request=request, taint=DataClass.SECRET, untrusted=False),
    )
    assert isinstance(reply, ToolResponse)
    assert reply.code == "noted"
    block = wire.call(run / "loop-memory" / "memory.sock", MemoryBlock())
    assert isinstance(block, MemoryBlockReply)
    assert text not in block.text
    listing = bxctl_ok(home, "memory", "pending").stdout
    assert "from session chat-leak (secret)" in listing
    pid = listing.split()[0]
    refused = subprocess.run(
        [sys.executable, "-m", "boxmaker.bxctl", "--home", str(home), "memory", "accept", pid],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert refused.returncode != 0
    assert "run again with --yes" in refused.stdout + refused.stderr
    assert "(from session chat-leak (secret))" in bxctl_ok(home, "memory", "accept", "--yes", pid).stdout
    block = wire.call(run / "loop-memory" / "memory.sock", MemoryBlock())
    assert isinstance(block, MemoryBlockReply)
    assert text in block.text
