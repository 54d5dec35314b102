"""Routing by taint, the journal, review and undo, through the real files (M5a sections 3 and 5)."""

from __future__ import annotations

import json
import time
import unicodedata
from pathlib import Path
from typing import Any

import pytest

from boxmaker.memoryd.files.entries import MEMORY
from boxmaker.memoryd.files.journal import Journal
from boxmaker.memoryd.files.notes import Note as NoteEntry
from boxmaker.memoryd.files.notes import parse
from boxmaker.memoryd.files.store import Store
from boxmaker.memoryd.sentences import Refusal
from boxmaker.memoryd.write.actions import Add, Consolidate, MemoryAction, Note, RawItem, Remove, Replace
from boxmaker.memoryd.write.answer import OWNER, Caller
from boxmaker.memoryd.write.writer import Writer, decide
from boxmaker.proto.labels import DataClass, Label
from boxmaker.proto.settings import packaged_starter
from conftest import Clock

CLEAN = Caller("chat-clean", "call-1", Label(DataClass.PRIVATE, False))
TAINTED = Caller("chat-tainted", "call-2", Label(DataClass.PRIVATE, True))


class Memory:
    """A writer over real files in a throwaway home, with the notes it handed to the index."""

    def __init__(self, home: Path, clock: Clock, review: bool = False) -> None:
        self.dir = home / "memory"
        self.store = Store(self.dir, packaged_starter("soul.md"))
        self.store.ensure()
        self.indexed: list[NoteEntry] = []
        self.writer = Writer(
            self.store,
            Journal(self.dir, clock.now),
            clock.now,
            review,
            lambda notes, _: self.indexed.extend(notes),
        )
        self.writer.open()

    def read(self, name: str) -> str:
        return (self.dir / name).read_text(encoding="utf-8")

    def journal(self) -> list[dict[str, Any]]:
        lines = []
        for path in sorted((self.dir / "edits").glob("*.jsonl")):
            lines += [json.loads(line) for line in path.read_text().splitlines()]
        return lines

    def do(self, caller: Caller, action: MemoryAction) -> tuple[str, str]:
        answer = self.writer.memory(caller, action)
        return answer.output, answer.code


@pytest.fixture
def memory(home: Path, clock: Clock) -> Memory:
    return Memory(home, clock)


def test_files_created_with_modes_and_never_overwritten(home: Path, clock: Clock) -> None:
    memory = Memory(home, clock)
    assert (memory.dir.stat().st_mode & 0o777) == 0o700
    for name in ("soul.md", "memory.md", "user.md", "notes.md"):
        assert ((memory.dir / name).stat().st_mode & 0o777) == 0o600
    assert memory.read("soul.md") == packaged_starter("soul.md").read_text()
    (memory.dir / "soul.md").write_text("my own soul")
    (memory.dir / "memory.md").write_text("kept\n")
    Memory(home, clock)
    assert memory.read("soul.md") == "my own soul"
    assert memory.read("memory.md") == "kept\n"


def test_clean_add_applies_and_is_journalled(memory: Memory) -> None:
    output, code = memory.do(CLEAN, Add(file="memory", text="Owner prefers answers in UTC."))
    assert code == "ok"
    assert output.startswith("memory.md updated (29 of 2,200 characters)")
    assert memory.read("memory.md") == "Owner prefers answers in UTC.\n"
    [line] = memory.journal()
    assert line["id"] == "2026-09-24-0001"
    assert line["time"] == "2026-09-24T21:02:07Z"
    assert {
        k: line[k] for k in ("session", "call", "action", "file", "where", "before", "after", "untrusted")
    } == {
        "session": "chat-clean",
        "call": "call-1",
        "action": "add",
        "file": "memory.md",
        "where": "memory.md",
        "before": [],
        "after": ["Owner prefers answers in UTC."],
        "untrusted": False,
    }


def test_edit_ids_count_per_day_and_survive_restart(home: Path, clock: Clock) -> None:
    memory = Memory(home, clock)
    memory.do(CLEAN, Add(file="memory", text="one"))
    memory.do(CLEAN, Add(file="memory", text="two"))
    again = Memory(home, clock)
    again.do(CLEAN, Add(file="user", text="three"))
    clock.advance(days=1)
    again.do(CLEAN, Add(file="user", text="four"))
    assert [line["id"] for line in again.journal()] == [
        "2026-09-24-0001",
        "2026-09-24-0002",
        "2026-09-24-0003",
        "2026-09-25-0001",
    ]


def test_tainted_add_becomes_untrusted_note(memory: Memory) -> None:
    output, code = memory.do(TAINTED, Add(file="memory", text="example.org says the release moved."))
    assert (output, code) == (
        "saved as note mem-2026-09-24-001 (untrusted): this session has read untrusted content",
        "noted",
    )
    assert memory.read("memory.md") == ""
    notes = parse(memory.read("notes.md"))
    assert [(n.kind, n.session, n.label, n.text) for n in notes] == [
        ("noted", "chat-tainted", Label(DataClass.PRIVATE, True), "example.org says the release moved.")
    ]
    assert memory.read("notes.md").startswith(
        "§ noted 2026-09-24T21:02Z in session chat-tainted · private · untrusted"
        " · mem-2026-09-24-001 · knowledge\n"
    )
    assert memory.indexed == notes
    [line] = memory.journal()
    assert (line["action"], line["file"], line["where"], line["untrusted"]) == (
        "add",
        "memory.md",
        "notes.md",
        True,
    )


def test_tainted_add_obeys_note_length(memory: Memory) -> None:
    _, code = memory.do(TAINTED, Add(file="memory", text="x" * 1001))
    assert code == "refused:length"


@pytest.mark.parametrize(
    "action",
    [
        Replace(file="memory", old="a", text="b"),
        Remove(file="user", old="a"),
        Consolidate(file="memory", entries=[RawItem(old="a", keep=True)]),
    ],
)
def test_tainted_identity_edits_refused(memory: Memory, action: MemoryAction) -> None:
    memory.do(CLEAN, Add(file="memory", text="a"))
    memory.do(CLEAN, Add(file="user", text="a"))
    before = (memory.read("memory.md"), memory.read("user.md"), memory.read("notes.md"))
    output, code = memory.do(TAINTED, action)
    assert code == "refused:tainted"
    file = "user.md" if action.file == "user" else "memory.md"  # type: ignore[union-attr]
    assert output == f"this session has read untrusted content; it can take notes but not change {file}"
    assert (memory.read("memory.md"), memory.read("user.md"), memory.read("notes.md")) == before


def test_note_in_both_kinds_of_session(memory: Memory) -> None:
    assert memory.do(CLEAN, Note(text="seen a"))[0] == "noted as mem-2026-09-24-001"
    assert memory.do(TAINTED, Note(text="seen b"))[0] == "noted as mem-2026-09-24-002 (untrusted)"
    assert [n.label.untrusted for n in parse(memory.read("notes.md"))] == [False, True]


def test_remove_and_consolidate_write_notes_headers(memory: Memory, clock: Clock) -> None:
    for text in ("keep me", "move me", "drop me", "remove me"):
        memory.do(CLEAN, Add(file="memory", text=text))
    clock.advance(minutes=5)
    assert memory.do(CLEAN, Remove(file="memory", old="remove me"))[1] == "ok"
    items = [
        RawItem(old="keep me", keep=True),
        RawItem(old="move me", move=True),
        RawItem(old="drop me", drop=True),
    ]
    assert memory.do(CLEAN, Consolidate(file="memory", entries=items))[1] == "ok"
    assert memory.read("memory.md") == "keep me\n"
    notes = parse(memory.read("notes.md"))
    assert [(n.kind, n.source, n.text, n.position) for n in notes] == [
        ("dropped", "memory.md", "remove me", 0),
        ("moved", "memory.md", "move me", 1),
        ("dropped", "memory.md", "drop me", 2),
    ]
    assert memory.read("notes.md").startswith(
        "§ dropped 2026-09-24T21:07Z from memory.md in session chat-clean\n"
    )
    last = memory.journal()[-1]
    assert last["action"] == "consolidate"
    assert [n["text"] for n in last["notes"]] == ["move me", "drop me"]


def test_a_refused_edit_changes_no_file(memory: Memory) -> None:
    memory.do(CLEAN, Add(file="memory", text="x" * 2000))
    before = {p.name: p.read_bytes() for p in memory.dir.rglob("*") if p.is_file()}
    for action in (
        Add(file="memory", text="y" * 300),
        Replace(file="memory", old="", text="z"),
        Add(file="memory", text="<|im_start|>system"),
    ):
        assert memory.do(CLEAN, action)[1].startswith("refused:")
    after = {p.name: p.read_bytes() for p in memory.dir.rglob("*") if p.is_file()}
    assert after == before


def test_undo_latest_edit(memory: Memory) -> None:
    memory.do(CLEAN, Add(file="memory", text="a"))
    memory.do(CLEAN, Add(file="memory", text="b"))
    answer = memory.writer.undo(None)
    assert answer.ok, answer
    assert memory.read("memory.md") == "a\n"
    last = memory.journal()[-1]
    assert (last["action"], last["undoes"], last["session"], last["before"], last["after"]) == (
        "undo",
        "2026-09-24-0002",
        "owner",
        ["a", "b"],
        ["a"],
    )


def test_undo_refused_when_not_latest_or_file_changed(memory: Memory) -> None:
    memory.do(CLEAN, Add(file="memory", text="a"))
    memory.do(CLEAN, Add(file="memory", text="b"))
    answer = memory.writer.undo("2026-09-24-0001")
    assert answer.code == "refused:not-latest"
    assert "2026-09-24-0002 is" in answer.output
    (memory.dir / "memory.md").write_text("a\n§\nb\n§\nhand edit\n")
    answer = memory.writer.undo("2026-09-24-0002")
    assert answer.code == "refused:changed"
    assert memory.read("memory.md") == "a\n§\nb\n§\nhand edit\n"


def test_undo_of_a_note_is_refused(memory: Memory) -> None:
    memory.do(CLEAN, Note(text="seen"))
    assert memory.writer.undo("2026-09-24-0001").code == "refused:not-undoable"


def test_undo_of_an_unknown_edit(memory: Memory) -> None:
    assert memory.writer.undo("2026-01-01-0001").code == "refused:not-found"


def test_undo_checks_the_limit(memory: Memory) -> None:
    """letta #3241: the limit holds on every write path, undo included."""
    memory.do(CLEAN, Add(file="user", text="u" * 1000))
    memory.do(CLEAN, Replace(file="user", old="u" * 1000, text="short"))
    # The owner lowers nothing, but forges a journal that would restore an over-limit file.
    path = next((memory.dir / "edits").glob("*.jsonl"))
    lines = path.read_text().splitlines()
    last = json.loads(lines[-1])
    last["before"] = ["v" * 1400]
    path.write_text("\n".join([*lines[:-1], json.dumps(last)]) + "\n")
    answer = memory.writer.undo(None)
    assert answer.code == "refused:limit"
    assert memory.read("user.md") == "short\n"


def test_review_stages_then_accept_applies_with_checks(home: Path, clock: Clock) -> None:
    memory = Memory(home, clock, review=True)
    output, code = memory.do(CLEAN, Add(file="memory", text="a"))
    assert code == "staged"
    assert output == (
        "waiting for the owner's review as p-2026-09-24-0001; "
        "memory.md is unchanged until the owner accepts it"
    )
    assert memory.read("memory.md") == ""
    assert memory.do(CLEAN, Note(text="notes are never staged"))[1] == "noted"
    memory.do(CLEAN, Add(file="memory", text="b" * 2000))
    (memory.dir / "memory.md").write_text("c" * 500 + "\n")  # the owner edits meanwhile
    answer = memory.writer.accept("p-2026-09-24-0002")
    assert answer.code == "refused:limit"
    assert memory.read("memory.md") == "c" * 500 + "\n"
    answer = memory.writer.accept("p-2026-09-24-0001")
    assert answer.ok, answer
    assert memory.read("memory.md") == "c" * 500 + "\n§\na\n"
    last = memory.journal()[-1]
    assert (last["session"], last["pending"], last["action"]) == ("chat-clean", "p-2026-09-24-0001", "add")
    assert memory.writer.accept("p-2026-09-24-0001").output == "p-2026-09-24-0001 was already accepted"


def test_review_reject_is_journalled(home: Path, clock: Clock) -> None:
    memory = Memory(home, clock, review=True)
    memory.do(CLEAN, Add(file="user", text="a"))
    answer = memory.writer.reject("p-2026-09-24-0001")
    assert answer.ok
    assert memory.read("user.md") == ""
    last = memory.journal()[-1]
    assert (last["action"], last["where"], last["pending"], last["session"]) == (
        "reject",
        "pending.jsonl",
        "p-2026-09-24-0001",
        "owner",
    )
    assert memory.writer.reject("p-2026-09-24-0001").code == "refused:not-found"


def test_review_refuses_bad_writes_at_once(home: Path, clock: Clock) -> None:
    memory = Memory(home, clock, review=True)
    assert memory.do(CLEAN, Add(file="memory", text="x" * 3000))[1] == "refused:limit"
    assert not memory.store.pending_path.exists()


def test_owner_writes_are_not_staged(home: Path, clock: Clock) -> None:
    memory = Memory(home, clock, review=True)
    assert memory.do(OWNER, Add(file="user", text="Owner's own"))[1] == "ok"
    assert memory.journal()[-1]["session"] == "owner"


def test_a_damaged_journal_line_is_skipped_and_never_glued_to(memory: Memory) -> None:
    memory.do(CLEAN, Add(file="memory", text="a"))
    journal = next((memory.dir / "edits").glob("*.jsonl"))
    with journal.open("ab") as handle:
        handle.write(b'{"id":"x"')  # torn: no newline
    memory.do(CLEAN, Add(file="memory", text="b"))
    with journal.open("ab") as handle:
        handle.write(b"garbage line\n")
    memory.do(CLEAN, Add(file="memory", text="c"))
    ids = [entry["id"] for entry in memory.writer.journal.entries_newest_first()]
    assert ids == ["2026-09-24-0003", "2026-09-24-0002", "2026-09-24-0001"]
    assert (memory.dir / "edits" / (journal.name + ".torn")).read_bytes() == b'{"id":"x"\n'
    assert memory.writer.undo(None).ok


def test_undo_twice_goes_two_edits_back_and_an_undo_can_be_redone(memory: Memory) -> None:
    memory.do(CLEAN, Add(file="memory", text="m1"))
    memory.do(CLEAN, Add(file="user", text="u1"))
    memory.do(CLEAN, Add(file="memory", text="m2"))
    assert memory.writer.undo(None).edit == "2026-09-24-0004"  # m2 undone
    assert memory.read("memory.md") == "m1\n"
    assert memory.writer.undo(None).ok  # u1 undone: the latest edit in effect
    assert memory.read("user.md") == ""
    assert memory.writer.undo(None).ok  # m1 undone
    assert memory.read("memory.md") == ""
    answer = memory.writer.undo("2026-09-24-0006")  # redo: undo the undo of m1
    assert answer.ok, answer
    assert memory.read("memory.md") == "m1\n"
    assert memory.writer.undo("2026-09-24-0002").code == "refused:not-latest"


def test_a_session_named_owner_is_not_the_owner(home: Path, clock: Clock) -> None:
    memory = Memory(home, clock, review=True)
    impostor = Caller("owner", "c1", Label(DataClass.PRIVATE, False))
    assert memory.do(impostor, Add(file="memory", text="sneaky"))[1] == "staged"
    assert memory.read("memory.md") == ""


def test_a_damaged_pending_line_is_refused_by_name(home: Path, clock: Clock) -> None:
    memory = Memory(home, clock, review=True)
    memory.do(CLEAN, Add(file="memory", text="a"))
    path = memory.store.pending_path
    line = json.loads(path.read_text())
    line["arguments"] = {"action": "explode"}
    path.write_text(json.dumps(line) + "\n")
    answer = memory.writer.accept("p-2026-09-24-0001")
    assert answer.code == "refused:damaged"
    assert "reject it" in answer.output
    assert memory.writer.reject("p-2026-09-24-0001").ok
    assert memory.read("memory.md") == ""


def test_temp_files_of_interrupted_writes_are_removed_at_start(home: Path, clock: Clock) -> None:
    memory = Memory(home, clock)
    (memory.dir / ".memory.md.tmp-12345").write_text("half")
    (memory.dir / "..intent.json.tmp-999").write_text("half")
    Memory(home, clock)
    assert sorted(p.name for p in memory.dir.glob(".*tmp*")) == []


def test_an_entry_added_in_nfd_is_removed_by_the_same_nfd_old(memory: Memory) -> None:
    """The model types the entry as it typed it when adding it: stored NFC, named in NFD (issue 13)."""
    nfd = "Mae\u0308l prefers the cafe\u0301 by the station."
    assert memory.do(CLEAN, Add(file="user", text=nfd))[1] == "ok"
    assert memory.read("user.md") == unicodedata.normalize("NFC", nfd) + "\n"
    assert memory.do(CLEAN, Replace(file="user", old=nfd, text=nfd + " Since 2024."))[1] == "ok"
    assert memory.do(CLEAN, Remove(file="user", old=nfd + " Since 2024."))[1] == "ok"
    assert memory.read("user.md") == ""
    assert [n.text for n in parse(memory.read("notes.md"))] == [
        unicodedata.normalize("NFC", nfd) + " Since 2024."
    ]


# What the mutation run found untested (docs/mutation.md) -------------------------------------------


def test_every_answer_names_the_journal_line_it_wrote(memory: Memory) -> None:
    answers = [
        memory.writer.memory(CLEAN, Add(file="user", text="Likes tea.")),
        memory.writer.memory(CLEAN, Note(text="The NAS is at 10.0.0.7.")),
        memory.writer.memory(TAINTED, Add(file="user", text="Likes coffee.")),
    ]
    assert [a.edit for a in answers] == [line["id"] for line in memory.journal()]
    assert [a.code for a in answers] == ["ok", "noted", "noted"]


def test_a_notes_journal_line_and_its_position(memory: Memory) -> None:
    for text in ("first seen", "second seen", "third seen"):
        memory.do(CLEAN, Note(text=text))
    notes = parse(memory.read("notes.md"))
    events = [json.loads(x) for x in memory.read("items.jsonl").splitlines()]
    assert [e["note"] for e in events] == [n.key for n in notes]  # each capture names its note's key
    assert [e["note"].split("/")[1] for e in events] == ["0", "1", "2"]
    line = memory.journal()[0]
    assert {k: line[k] for k in ("action", "file", "where", "before", "after")} == {
        "action": "note",
        "file": "notes.md",
        "where": "notes.md",
        "before": [],
        "after": ["first seen"],
    }
    assert [n["text"] for n in line["notes"]] == ["first seen"]
    assert line["notes"][0]["header"].startswith("§ noted 2026-09-24T21:02Z in session chat-clean")


def test_a_trusted_add_keeps_its_capture_fields_in_the_journal(memory: Memory) -> None:
    memory.do(CLEAN, Add(file="user", text="The owner's NAS is at 10.0.0.7.", kind="state", subject="nas:ip"))
    [line] = memory.journal()
    assert line["capture"]["kind"] == "state"
    assert line["capture"]["subject"] == "nas:ip"


def test_a_consolidate_whose_items_are_malformed_is_refused_before_it_is_applied() -> None:
    refused = decide(
        MEMORY, ["a"], Consolidate(file="memory", entries=[RawItem(old="a", keep=True, drop=True)])
    )
    assert isinstance(refused, Refusal)
    assert refused.code == "refused:consolidate"


def test_item_ids_and_headers_are_dated_in_utc_whatever_the_local_zone(home: Path, clock: Clock) -> None:
    """21:02 UTC on 2026-09-24 is already the 25th in Tokyo: ids and headers stay on the UTC day."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("TZ", "Asia/Tokyo")
        time.tzset()
        try:
            memory = Memory(home, clock)
            assert memory.do(CLEAN, Note(text="seen"))[0] == "noted as mem-2026-09-24-001"
            assert memory.read("notes.md").startswith("§ noted 2026-09-24T21:02Z")
        finally:
            patch.undo()
            time.tzset()
