"""The journal's hash chain and ``verify`` (issue 19, a tamper-evident journal; `files.chain`,
`startcheck.verify`): a chain over notes, an identity add, a supersede and an erasure; each kind of
tampering named with nothing changed; a pre-chain prefix; a head printed before an erasure verifies
after it; the start-up check names a broken chain."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from boxmaker.memoryd import admin
from boxmaker.memoryd.config import load
from boxmaker.memoryd.erase import run
from boxmaker.memoryd.files import chain
from boxmaker.memoryd.service import Memoryd
from boxmaker.memoryd.write.actions import Add
from boxmaker.memoryd.write.answer import Caller
from boxmaker.proto.labels import DataClass, Label
from boxmaker.proto.messages import MemoryAdmin
from conftest import Clock

SECRET = "The alarm code is HERON-4410-BISON"
LABEL = Label(DataClass.PRIVATE, False)
JOURNAL = "edits/2026-09.jsonl"


def owner(service: Memoryd, command: str, arg: str = "", **args: Any) -> Any:
    return admin.handle(service.memory, MemoryAdmin(command=command, arg=arg, args=args))


def verify(service: Memoryd, head: str = "") -> Any:
    return owner(service, "verify", head=head) if head else owner(service, "verify")


def build(service: Memoryd) -> str:
    """Notes (two state items of one subject, and one a session later erased), an identity add and a
    supersede; returns the edit id of the supersede."""
    writer = service.memory.writer
    assert (
        owner(service, "note", "The kettle is blue.", kind="state", subject="kettle").data["code"] == "noted"
    )
    writer.note(Caller("chat-gone", "c2", LABEL), SECRET, "note")
    assert (
        owner(service, "note", "The kettle is green.", kind="state", subject="kettle").data["code"] == "noted"
    )
    assert writer.memory(
        Caller("chat-a", "c4", LABEL), Add(file="memory", text="Deploys go out on Tuesdays.")
    ).edit
    old, _, new = sorted(service.memory.items.items())
    done = owner(service, "supersede", old=old, new=new)
    assert done.data["code"] == "ok", done.text
    return str(done.data.get("edit", ""))


def erase_gone(service: Memoryd) -> str:
    holdings = service.memory.holdings
    planned = run.plan(holdings, {"sessions": ["chat-gone"], "texts": [], "reserve": True})
    assert isinstance(planned, dict)
    args = {
        "sessions": ["chat-gone"],
        "texts": [],
        "authority": "ticket-7",
        "erasure_id": planned["erasure_id"],
        "holders": [],
    }
    tombstone = run.execute(holdings, args)
    assert isinstance(tombstone, dict)
    return str(tombstone["erasure_id"])


def snapshot(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def lines(memory: Path) -> list[dict[str, Any]]:
    return [json.loads(raw) for raw in (memory / JOURNAL).read_text().splitlines()]


def test_a_chain_over_notes_an_add_a_supersede_and_an_erasure_verifies(service: Memoryd) -> None:
    memory = service.config.layout.memory
    build(service)
    before = verify(service)
    assert before.data["intact"], before.text
    head = before.data["head"]
    assert head == service.memory.journal.head
    written = lines(memory)
    assert all(chain.is_chained(line) for line in written)
    assert written[-1]["chain"] == head
    erasure_id = erase_gone(service)

    after = verify(service, head)
    assert after.data["intact"], after.text
    assert after.data["head"] != head  # the erasure's own line follows
    assert "the history up to it is unchanged" in after.text
    [erased] = after.data["erased"]
    assert erased["erasures"] == [erasure_id]
    assert f"by {erasure_id}" in after.text
    scrubbed = [line for line in lines(memory) if line.get("erased")]
    assert len(scrubbed) == 1
    assert "salt" not in scrubbed[0]
    assert "HERON" not in (memory / JOURNAL).read_text()
    assert "items.jsonl" in after.data["checked_by_replay"]
    assert "memory.md" in after.data["checked_by_replay"]


def test_an_erased_entry_another_session_dropped_into_notes_keeps_the_replay_and_the_head(
    service: Memoryd,
) -> None:
    """An identity entry the erased session wrote and the owner later removed: the dropped note in
    notes.md (the owner's, so not erased whole) keeps its blank line, so notes.md stays what the
    journal's replay gives and the head recorded before still verifies, and the next note is apart."""
    memory = service.config.layout.memory
    writer = service.memory.writer
    assert writer.memory(Caller("chat-gone", "c1", LABEL), Add(file="memory", text=SECRET)).edit
    removed = owner(service, "remove", file="memory", old=SECRET)
    assert removed.data["code"] == "ok", removed.text
    before = verify(service)
    assert before.data["intact"], before.text
    erase_gone(service)

    after = verify(service, before.data["head"])
    assert after.data["intact"], after.text
    assert "HERON" not in (memory / "notes.md").read_text()
    assert (memory / "notes.md").read_text().endswith("]\n\n")
    assert owner(service, "note", "The kettle is blue.").data["code"] == "noted"
    assert verify(service).data["intact"]


def _change_line(memory: Path) -> str:
    data = (memory / JOURNAL).read_text()
    (memory / JOURNAL).write_text(data.replace("Deploys go out on Tuesdays.", "Deploys go out on Fridays."))
    return "does not match its commitment"


def _remove_line(memory: Path) -> str:
    raw = (memory / JOURNAL).read_text().splitlines(keepends=True)
    (memory / JOURNAL).write_text("".join(raw[:2] + raw[3:]))
    return "line 3 (edit"


def _reorder_lines(memory: Path) -> str:
    raw = (memory / JOURNAL).read_text().splitlines(keepends=True)
    raw[1], raw[2] = raw[2], raw[1]
    (memory / JOURNAL).write_text("".join(raw))
    return "line 2 (edit"


def _change_memory_file(memory: Path) -> str:
    (memory / "memory.md").write_text("Deploys go out on Fridays.\n")
    return "memory.md is not what the journal's replay gives"


def _change_items(memory: Path) -> str:
    data = (memory / "items.jsonl").read_text()
    (memory / "items.jsonl").write_text(data.replace("The kettle is blue.", "The kettle is red."))
    return "items.jsonl is not what the journal's replay gives (line 1 differs)"


def _forge_erasure(memory: Path) -> str:
    """A changed line passed off as erased: its salt dropped, an erasure id that no erase line has."""
    raw = (memory / JOURNAL).read_text().splitlines()
    line = json.loads(raw[2])
    line["after"] = ["The kettle is red."]
    del line["salt"]
    line["erased"] = ["memerase-2026-09-24-009"]
    raw[2] = json.dumps(line)
    (memory / JOURNAL).write_text("\n".join(raw) + "\n")
    return "is marked erased by memerase-2026-09-24-009, but no later erasure line of the journal records it"


@pytest.mark.parametrize(
    "tamper", [_change_line, _remove_line, _reorder_lines, _change_memory_file, _change_items, _forge_erasure]
)
def test_each_tampering_is_named_with_exit_data_and_nothing_changed(
    service: Memoryd, tamper: Callable[[Path], str]
) -> None:
    memory = service.config.layout.memory
    build(service)
    named = tamper(memory)
    files = snapshot(memory)
    found = verify(service)
    assert found.data["intact"] is False
    assert found.text.startswith("DISAGREES: ")
    assert named in found.data["problems"][0]["text"], found.text
    assert snapshot(memory) == files  # verify changes nothing


def test_a_pre_chain_journal_is_an_unchained_prefix(home: Path, clock: Clock) -> None:
    memory = home / "memory"
    (memory / "edits").mkdir(parents=True)
    old = [
        {"id": f"2026-08-01-000{n}", "time": "2026-08-01T10:00:00Z", "session": "owner", "call": "",
         "action": "add", "file": "memory.md", "where": "memory.md", "before": [], "after": after,
         "untrusted": False}
        for n, after in ((1, ["Tea at four."]), (2, ["Tea at four.", "Ship on Tuesdays."]))
    ]  # fmt: skip
    (memory / "edits" / "2026-08.jsonl").write_text("".join(json.dumps(line) + "\n" for line in old))
    (memory / "memory.md").write_text("Tea at four.\n§\nShip on Tuesdays.\n")
    service = Memoryd(load(None, str(home)), now=clock.now)
    service.open()
    try:
        assert service.memory.checkpoints.findings == []
        assert owner(service, "note", "The kettle is blue.").data["code"] == "noted"
        found = verify(service)
        assert found.data["intact"], found.text
        prefix = found.data["unchained_prefix"]
        assert prefix["lines"] == 2
        assert prefix["last"].startswith("edits/2026-08.jsonl line 2")
        assert "unchained prefix: 2 lines written before the chain" in found.text
        assert found.data["chained"] == found.data["lines"] - 2 == len(lines(memory))
        new = lines(memory)[0]  # the first chained line follows the genesis value, in the next month
        assert new["chain"] == chain.link(chain.GENESIS, new["commitment"])
        # a line stripped of its chain fields after chained lines is not a prefix
        raw = (memory / JOURNAL).read_text().splitlines()
        stripped = {k: v for k, v in json.loads(raw[0]).items() if k not in chain.FIELDS}
        (memory / JOURNAL).write_text("\n".join([*raw, json.dumps(stripped)]) + "\n")
        again = verify(service)
        assert not again.data["intact"]
        assert "has no chain fields, but lines before it are chained" in again.text
    finally:
        service.close()


def test_the_first_line_of_a_month_follows_the_month_before(service: Memoryd, clock: Clock) -> None:
    assert owner(service, "note", "The kettle is blue.").data["code"] == "noted"
    before = service.memory.journal.head
    clock.advance(days=10)
    assert owner(service, "note", "The kettle is green.").data["code"] == "noted"
    october = (service.config.layout.memory / "edits" / "2026-10.jsonl").read_text().splitlines()
    line = json.loads(october[0])
    assert line["chain"] == chain.link(before, line["commitment"])
    (service.config.layout.memory / JOURNAL).unlink()  # a whole month removed
    found = verify(service)
    assert not found.data["intact"]
    assert "edits/2026-10.jsonl line 1" in found.data["problems"][0]["text"]


def test_a_head_not_in_the_journal_and_a_malformed_head(service: Memoryd) -> None:
    build(service)
    head = verify(service).data["head"]
    _change_line(service.config.layout.memory)  # a line before the recorded head
    found = verify(service, head)
    assert "but a line up to it disagrees: the history before the head was changed" in found.text
    assert found.data["head_at"] is None
    found = verify(service, "ab" * 32)
    assert not found.data["intact"]
    assert "is not the chain value of any line" in found.text
    with pytest.raises(Exception, match="64 hex digits"):
        verify(service, "not a head")


def test_the_start_up_check_follows_the_chain_and_names_a_break(home: Path, clock: Clock) -> None:
    service = Memoryd(load(None, str(home)), now=clock.now)
    service.open()
    build(service)
    head = service.memory.journal.head
    service.close()

    again = Memoryd(load(None, str(home)), now=clock.now)
    again.open()
    checked = again.memory.checkpoints.chain
    assert checked is not None
    assert not checked.problem
    assert checked.head == head
    written = len(lines(home / "memory"))  # the checkpoint of the first start came before them all
    assert checked.lines == written
    assert checked.since
    status = owner(again, "status")
    assert status.data["chain"]["ok"]
    assert f"journal chain checked at start: {written} journal lines since the last checkpoint" in status.text
    assert (
        owner(again, "note", "The kettle is teal.").data["code"] == "noted"
    )  # after this start's checkpoint
    again.close()

    memory = home / "memory"
    data = (memory / JOURNAL).read_text()
    (memory / JOURNAL).write_text(data.replace("The kettle is teal.", "The kettle is pink."))
    broken = Memoryd(load(None, str(home)), now=clock.now)
    broken.open()
    try:
        [finding] = [f for f in broken.memory.checkpoints.findings if f.file == JOURNAL]
        assert "does not match its commitment" in finding.sentence
        status = owner(broken, "status")
        assert status.data["chain"]["ok"] is False
        assert "journal chain BROKEN" in status.text
        assert "DAMAGED" in status.text
    finally:
        broken.close()


def test_a_line_that_is_not_a_journal_line_breaks_the_chain_at_start(home: Path, clock: Clock) -> None:
    """A line inserted into the journal that is not a journal line: the start-up check's chain line
    (the log, ``bxctl status``) says BROKEN naming it, as `verify` does, never "intact"."""
    service = Memoryd(load(None, str(home)), now=clock.now)
    service.open()
    build(service)
    service.close()
    memory = home / "memory"
    kept = (memory / JOURNAL).read_text().splitlines(keepends=True)
    (memory / JOURNAL).write_text("".join([*kept[:2], "{not a journal line\n", *kept[2:]]))

    damaged = Memoryd(load(None, str(home)), now=clock.now)
    damaged.open()
    try:
        checked = damaged.memory.checkpoints.chain
        assert checked is not None
        assert "is not a journal line" in checked.problem
        status = owner(damaged, "status")
        assert status.data["chain"]["ok"] is False
        assert "journal chain BROKEN" in status.text
        assert "intact" not in status.data["chain"]["text"]
        assert verify(damaged).data["intact"] is False
    finally:
        damaged.close()


def test_a_checkpoint_taken_before_the_chain_existed(home: Path, clock: Clock) -> None:
    """An upgraded home: its checkpoint has no chain value, so the first line since is not linked to
    one; the lines after it still are."""
    service = Memoryd(load(None, str(home)), now=clock.now)
    service.open()
    for text in ("The kettle is blue.", "The kettle is teal."):
        assert owner(service, "note", text).data["code"] == "noted"
    service.close()
    mark = home / "memory" / ".checkpoint.json"
    old = json.loads(mark.read_text())
    del old["positions"]["journal"]["chain"]
    mark.write_text(json.dumps(old))

    again = Memoryd(load(None, str(home)), now=clock.now)
    again.open()
    try:
        checked = again.memory.checkpoints.chain
        assert checked is not None
        assert checked.problem == ""
        assert again.memory.checkpoints.findings == []
    finally:
        again.close()
