"""Revert any edit (issue 19): ``revert EDIT`` takes back any journalled edit of memory.md, user.md or
conventions.md whose entries are still as it left them, through a real memoryd service and real files;
the per-entry plan (`files.revert`) is tested as the pure function it is."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from item_helpers import capture, withdraw
from test_proposals import proposal_id, propose

from boxmaker.memoryd.erase import run
from boxmaker.memoryd.files.revert import Blocked, Restore, erased_in, plan
from boxmaker.memoryd.sentences import Refusal
from boxmaker.memoryd.service import Memoryd
from boxmaker.memoryd.write.actions import Add, parse_memory
from boxmaker.memoryd.write.answer import OWNER, Caller
from boxmaker.proto.errors import InvalidBody
from boxmaker.proto.labels import DataClass, Label
from boxmaker.proto.messages import MemoryAdmin, MemoryAdminReply


def admin(memory: Memoryd, command: str, arg: str = "", **args: Any) -> MemoryAdminReply:
    reply = memory.handle("memory_admin", MemoryAdmin(command=command, arg=arg, args=args))
    assert isinstance(reply, MemoryAdminReply)
    return reply


def edit(memory: Memoryd, command: str, **args: Any) -> str:
    """An owner edit that must apply; its edit id."""
    reply = admin(memory, command, **args)
    assert reply.data["code"] == "ok", reply.text
    return str(reply.data["edit"])


def files(home: Path) -> dict[str, bytes]:
    """Every file under memory/ (the journal included), by path."""
    root = home / "memory"
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def entries(home: Path, name: str = "memory.md") -> list[str]:
    text = (home / "memory" / name).read_text(encoding="utf-8").strip()
    return [e.strip() for e in text.split("\n§\n")] if text else []


def journal(home: Path) -> list[dict[str, Any]]:
    lines: list[dict[str, Any]] = []
    for path in sorted((home / "memory" / "edits").glob("*.jsonl")):
        lines += [json.loads(line) for line in path.read_text().splitlines()]
    return lines


def add(memory: Memoryd, text: str, file: str = "memory") -> str:
    return edit(memory, "add", file=file, text=text)


# The plan, pure -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("before", "after", "current", "expected"),
    [
        # nothing since: the revert gives `before` exactly (a consolidate's reorder included)
        (["a", "b", "c"], ["b", "a", "c2"], ["b", "a", "c2"], ["a", "b", "c"]),
        (["x", "y"], ["x2", "y"], ["x2", "y"], ["x", "y"]),
        # later edits of other entries stay where they are; what comes back takes its old place
        (["a", "b", "c"], ["a", "b2", "c"], ["b2", "c", "d"], ["b", "c", "d"]),
        (["a", "b"], ["a"], ["z", "a", "w"], ["z", "a", "b", "w"]),
        (["a", "b"], ["b"], ["w"], ["w", "a"]),  # no neighbour left: at the end
        # a later reorder is not undone
        (["a", "b", "c"], ["b", "a", "c"], ["c", "a", "b"], ["c", "a", "b"]),
    ],
)
def test_the_plan_puts_entries_back_at_their_old_place(
    before: list[str], after: list[str], current: list[str], expected: list[str]
) -> None:
    outcome = plan(before, after, current)
    if expected == current:
        assert outcome == Blocked("nothing")
    else:
        assert isinstance(outcome, Restore)
        assert list(outcome.entries) == expected


_ENTRY = st.sampled_from([f"Entry {c}." for c in "abcdefgh"])


@settings(max_examples=300, deadline=None)
@given(
    before=st.lists(_ENTRY, unique=True, max_size=6),
    after=st.lists(_ENTRY, unique=True, max_size=6),
    others=st.lists(st.sampled_from([f"Later {c}." for c in "xyz"]), unique=True, max_size=3),
    seed=st.randoms(use_true_random=False),
)
def test_a_revert_gives_before_back_around_later_entries(
    before: list[str], after: list[str], others: list[str], seed: Any
) -> None:
    """Whatever the edit, with later edits that only added other entries, the revert puts the edit's
    entries back in `before`'s order and keeps every later entry."""
    current = list(after)
    for entry in others:
        current.insert(seed.randint(0, len(current)), entry)
    outcome = plan(before, after, current)
    if before == after:
        assert outcome == Blocked("nothing")
        return
    assert isinstance(outcome, Restore)
    assert [e for e in outcome.entries if e not in others] == before
    assert sorted(e for e in outcome.entries if e in others) == sorted(others)
    if not others:
        assert list(outcome.entries) == before  # nothing followed: before exactly


def test_the_plan_is_blocked_per_entry() -> None:
    assert plan(["a"], ["a", "b"], ["a"]) == Blocked("gone", "b")
    assert plan(["a", "b"], ["a"], ["a", "b"]) == Blocked("present", "b")
    assert plan(["a"], ["a", "b"], ["a", "b", "c"]) == Restore(("a", "c"), (), ("b",))
    assert plan(["a"], ["a", "b"], ["a", "b\u0301"]) == Blocked("gone", "b")  # NFC: not the same entry
    assert erased_in(["x", "y [erased memerase-2026-09-24-001] z"]) == "memerase-2026-09-24-001"
    assert erased_in(["The [erased] tag is mine."]) is None  # only an erasure's marker, with its id
    assert erased_in(["erased"]) is None


# Through the service ------------------------------------------------------------------------------


def test_an_older_edit_is_reverted_while_later_edits_of_other_entries_stand(
    home: Path, service: Memoryd
) -> None:
    for text in ("Alpha.", "Bravo.", "Charlie."):
        add(service, text)
    replaced = edit(service, "replace", file="memory", old="Bravo.", text="Bravo two.")
    add(service, "Delta.")
    edit(service, "remove", file="memory", old="Alpha.")
    assert entries(home) == ["Bravo two.", "Charlie.", "Delta."]
    log = admin(service, "log", "3")
    assert [line["revertable"] for line in log.data] == [True, True, True]
    assert "(revertable)" in log.text

    reply = admin(service, "revert", replaced)
    assert reply.data["code"] == "ok", reply.text
    new = reply.data["edit"]
    assert reply.text == (
        f"reverted {replaced} as {new}: memory.md updated (26 of 2,200 characters); the change takes "
        "effect in the next session"
    )
    assert entries(home) == ["Bravo.", "Charlie.", "Delta."]
    last = journal(home)[-1]
    assert (last["action"], last["reverts"], last["session"], last["class"]) == (
        "revert",
        replaced,
        "owner",
        "private",
    )
    assert (last["before"], last["after"]) == (
        ["Bravo two.", "Charlie.", "Delta."],
        ["Bravo.", "Charlie.", "Delta."],
    )
    # the same edit again: its entry is gone, taken out by the revert itself
    again = admin(service, "revert", replaced)
    assert again.data["code"] == "refused:conflict"
    assert (
        again.text
        == f"{replaced} was already taken back by {new}; revert {new} to bring it back; nothing was reverted"
    )
    # the revert is revertable: it redoes the replace
    redo = admin(service, "revert", new)
    assert redo.data["code"] == "ok", redo.text
    assert entries(home) == ["Bravo two.", "Charlie.", "Delta."]
    # the journal's chain and replay agree with the files after two reverts (the two halves of issue 19)
    checked = admin(service, "verify")
    assert checked.data["intact"], checked.text
    assert "memory.md" in checked.data["checked_by_replay"]


def test_a_conflict_names_the_later_edit_and_changes_nothing(home: Path, service: Memoryd) -> None:
    first = add(service, "Echo.")
    add(service, "Foxtrot.")
    later = edit(service, "replace", file="memory", old="Echo.", text="Echo two.")
    before = files(home)
    reply = admin(service, "revert", first)
    assert reply.data == {"code": "refused:conflict", "edit": None}
    assert reply.text == (
        f"{later} changed an entry of memory.md that {first} wrote or took out; revert {later} first, "
        "or edit memory.md by hand; nothing was reverted"
    )
    assert files(home) == before
    log = {line["id"]: line["revertable"] for line in admin(service, "log").data}
    assert log[first] is False
    assert log[later] is True
    # a restored duplicate: what the edit took out was typed again by hand
    (home / "memory" / "memory.md").write_text("Echo two.\n§\nFoxtrot.\n§\nEcho.\n")
    removed = admin(service, "revert", later)
    assert removed.data["code"] == "refused:duplicate", removed.text


def test_a_consolidate_is_reverted_and_its_moved_notes_stay(home: Path, service: Memoryd) -> None:
    for text in ("Golf.", "Hotel.", "India."):
        add(service, text)
    items = [
        {"old": "Hotel.", "keep": True},
        {"old": "Golf.", "text": "Golf, rewritten."},
        {"old": "India.", "move": True},
    ]
    action = parse_memory({"action": "consolidate", "file": "memory", "entries": items})
    assert not isinstance(action, Refusal), action
    answer = service.memory.writer.memory(OWNER, action)
    assert answer.ok, answer.output
    add(service, "Juliett.")
    notes = (home / "memory" / "notes.md").read_bytes()
    assert b"India." in notes
    reply = admin(service, "revert", answer.edit)
    assert reply.data["code"] == "ok", reply.text
    assert entries(home) == ["Golf.", "Hotel.", "India.", "Juliett."]
    assert (home / "memory" / "notes.md").read_bytes() == notes  # append-only: nothing taken, nothing added


def test_what_comes_back_passes_the_limit_and_the_check(home: Path, service: Memoryd) -> None:
    big = "Kilo " * 200
    add(service, big.strip())
    removed = edit(service, "remove", file="memory", old=big.strip())
    add(service, "Lima " * 250)
    before = files(home)
    reply = admin(service, "revert", removed)
    assert reply.data["code"] == "refused:limit"
    assert reply.text.startswith(f"{removed} was not reverted: memory.md would be 2,251 of 2,200 characters")
    assert files(home) == before
    # an entry typed by hand that the write check refuses does not come back through a revert
    (home / "memory" / "user.md").write_text("Mike \x1b[31m red.\n")
    taken = edit(service, "remove", file="user", old="Mike \x1b[31m red.")
    before = files(home)
    reply = admin(service, "revert", taken)
    assert reply.data["code"] == "refused:control", reply.text
    assert reply.text.startswith(f"{taken} was not reverted: refused (control)")
    assert files(home) == before


def test_erased_and_withdrawn_text_does_not_come_back(home: Path, service: Memoryd) -> None:
    gone = Caller("chat-gone", "c1", Label(DataClass.PRIVATE, False))
    written = service.memory.writer.memory(gone, Add(file="user", text="November is the code."))
    removed = edit(service, "remove", file="user", old="November is the code.")
    planned = run.plan(service.memory.holdings, {"sessions": ["chat-gone"], "texts": [], "reserve": True})
    assert isinstance(planned, dict)
    args = {"sessions": ["chat-gone"], "texts": [], "authority": "ticket-7"}
    assert isinstance(
        run.execute(service.memory.holdings, {**args, "erasure_id": planned["erasure_id"]}), dict
    )
    before = files(home)
    for ident in (written.edit, removed):
        reply = admin(service, "revert", ident)
        assert reply.data["code"] == "refused:erased", reply.text
        assert reply.text == (
            f"{ident} touched text that erasure {planned['erasure_id']} erased; erased text never comes "
            "back; nothing was reverted"
        )
    assert files(home) == before

    # two erased entries leave the same marker in a later edit's before and after: still erased
    for text in ("Papa is the first code.", "Quebec is the second code."):
        assert service.memory.writer.memory(gone, Add(file="memory", text=text)).edit
    second = edit(service, "remove", file="memory", old="Papa is the first code.")
    planned = run.plan(service.memory.holdings, {"sessions": ["chat-gone"], "texts": [], "reserve": True})
    assert isinstance(planned, dict)
    args = {"sessions": ["chat-gone"], "texts": [], "authority": "ticket-8"}
    assert isinstance(
        run.execute(service.memory.holdings, {**args, "erasure_id": planned["erasure_id"]}), dict
    )
    before = files(home)
    reply = admin(service, "revert", second)
    assert reply.data["code"] == "refused:erased", reply.text
    assert files(home) == before

    add(service, "Oscar moved to rack 9.")
    dropped = edit(service, "remove", file="memory", old="Oscar moved to rack 9.")
    withdraw(service, capture(service, "Oscar moved to rack 9."))
    before = files(home)
    reply = admin(service, "revert", dropped)
    assert reply.data["code"] == "refused:withdrawn", reply.text
    assert files(home) == before
    assert {line["id"]: line["revertable"] for line in admin(service, "log").data}[dropped] is False
    # an entry a withdrawn session wrote: withdrawn however it came back since (an undo passes it on)
    trusted = Caller("chat-wrong", "c2", Label(DataClass.PRIVATE, False))
    service.memory.writer.memory(trusted, Add(file="memory", text="Quay 4 is the loading dock."))
    taken = edit(service, "remove", file="memory", old="Quay 4 is the loading dock.")
    assert admin(service, "undo", taken).data["code"] == "ok"
    taken = edit(service, "remove", file="memory", old="Quay 4 is the loading dock.")
    assert admin(service, "withdraw", sessions=["chat-wrong"], reason="mistaken").data["code"] == "ok"
    reply = admin(service, "revert", taken)
    assert reply.data["code"] == "refused:withdrawn", reply.text
    assert reply.text == (
        f"reverting {taken} would put back an entry of memory.md that is withdrawn; reinstate it first "
        "(bxctl memory controls), or edit by hand; nothing was reverted"
    )


def test_text_from_an_above_private_origin_needs_yes(home: Path, service: Memoryd) -> None:
    secret = Caller("chat-secret", "c9", Label(DataClass.SECRET, False))
    service.memory.writer.memory(secret, Add(file="memory", text="Papa holds the vault."))
    pending = json.loads((home / "memory" / "pending.jsonl").read_text().splitlines()[0])["id"]
    assert admin(service, "accept", pending, yes=True).data["code"] == "ok"
    removed = edit(service, "remove", file="memory", old="Papa holds the vault.")
    reply = admin(service, "revert", removed)
    assert reply.data["code"] == "refused:confirm"
    assert "session chat-secret (secret)" in reply.text
    assert "--yes" in reply.text
    reply = admin(service, "revert", removed, yes=True)
    assert reply.data["code"] == "ok", reply.text
    assert entries(home) == ["Papa holds the vault."]
    assert journal(home)[-1]["class"] == "secret"  # the class is never lost by reverting


def test_a_reverted_proposal_is_a_review_decision_and_replay_gives_the_same_bytes(
    home: Path, service: Memoryd, tmp_path: Path
) -> None:
    ref = capture(service, "A red backup broke a deploy.")
    ident = proposal_id(propose(service, [ref]))
    accepted = admin(service, "proposal-accept", ident).data["edit"]
    add(service, "Quebec.")
    first = add(service, "Romeo.")
    add(service, "Sierra.", file="user")
    reply = admin(service, "revert", accepted)
    assert reply.data["code"] == "ok", reply.text
    assert entries(home, "conventions.md") == []
    listed = admin(service, "proposals", all=True).data
    assert (listed[0]["status"], listed[0]["edit"]) == ("reverted", reply.data["edit"])
    assert journal(home)[-1]["proposals"][0]["status"] == "reverted"
    again = admin(service, "revert", reply.data["edit"])
    assert again.data["code"] == "ok", again.text
    assert entries(home, "conventions.md") == ["Deploys wait for a green backup check."]
    assert admin(service, "proposals", all=True).data[0]["status"] == "accepted"
    assert admin(service, "revert", first).data["code"] == "ok"

    replayed = tmp_path / "replayed"
    assert admin(service, "replay", str(replayed)).data["code"] == "ok"
    for name in ("memory.md", "user.md", "conventions.md", "notes.md", "proposals.jsonl"):
        assert (replayed / name).read_bytes() == (home / "memory" / name).read_bytes(), name


def test_what_revert_refuses_to_name(home: Path, service: Memoryd) -> None:
    reply = admin(service, "note", "Tango.")
    assert reply.data["code"] == "noted"
    refused = admin(service, "revert", reply.data["edit"])
    assert refused.data["code"] == "refused:not-undoable"
    assert "notes.md is append-only" in refused.text
    assert admin(service, "revert", "2026-01-01-0001").data["code"] == "refused:not-found"
    with pytest.raises(InvalidBody):
        admin(service, "revert", "yesterday")
