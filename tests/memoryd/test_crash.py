"""After a crash at any point of an edit, the journal and the files agree on restart (DESIGN 7).

Two ways: every prefix of a commit's steps (and a torn write inside each) is recovered in-process; and
real memoryd processes are killed with SIGKILL while a client writes, then restarted.
"""

from __future__ import annotations

import json
import random
import signal
import threading
from pathlib import Path
from typing import Any

import pytest

from boxmaker.memoryd.files import chain
from boxmaker.memoryd.files.entries import normalise_newlines, parse_entries
from boxmaker.memoryd.files.journal import Append, Change, Journal, Rewrite, appended, encode_line
from boxmaker.memoryd.files.names import INTENT
from boxmaker.memoryd.files.notes import parse as parse_notes
from boxmaker.proto import fsio, wire
from boxmaker.proto.errors import PeerError
from boxmaker.proto.labels import DataClass
from boxmaker.proto.messages import MemoryCall, ToolRequest, ToolResponse
from conftest import Clock, spawn_memoryd, stop, wait_until_answers


def make_change(memory: Path) -> Change:
    return Change(
        {
            "session": "s",
            "call": "c",
            "action": "consolidate",
            "file": "memory.md",
            "where": "memory.md",
            "before": ["a", "b"],
            "after": ["a"],
            "untrusted": False,
        },
        [Append("notes.md", "§ moved 2026-09-24T21:02Z from memory.md in session s\nb\n\n".encode())],
        Rewrite("memory.md", (memory / "memory.md").read_text(), "a\n"),
    )


def prepare(tmp: Path) -> Path:
    memory = tmp / "memory"
    fsio.ensure_dir(memory / "edits")
    (memory / "memory.md").write_text("a\n§\nb\n")
    (memory / "notes.md").write_text("")
    return memory


def final_state(memory: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(memory)): p.read_bytes()
        for p in sorted(memory.rglob("*"))
        if p.is_file() and not p.name.endswith(".torn")
    }


@pytest.mark.parametrize("cut", range(7))
def test_every_interrupted_commit_is_completed(tmp_path: Path, clock: Clock, cut: int) -> None:
    """Steps: intent, journal append, notes append, identity rewrite, intent removal.

    `cut` stops after some steps, or leaves a torn append inside one.
    """
    reference = prepare(tmp_path / "ref")
    Journal(reference, clock.now).commit(make_change(reference))
    expected = final_state(reference)

    memory = prepare(tmp_path / "crash")
    change = make_change(memory)
    line = {"id": "2026-09-24-0001", "time": "2026-09-24T21:02:07Z", **change.entry}
    line["appended"] = [appended(a, 0) for a in change.appends]  # where each append lands
    # the intent holds the line sealed into the chain (its salt drawn once): the line a recovery
    # writes carries the same salt, commitment and chain value as the reference's
    journal_bytes = expected["edits/2026-09.jsonl"]
    sealed = json.loads(journal_bytes)
    assert {k: v for k, v in sealed.items() if k not in chain.FIELDS} == line
    notes_bytes = change.appends[0].data
    intent = {
        "appends": [
            {"path": "edits/2026-09.jsonl", "offset": 0, "data": journal_bytes.decode()},
            {"path": "notes.md", "offset": 0, "data": notes_bytes.decode()},
        ],
        "rewrite": {"path": "memory.md", "before": "a\n§\nb\n", "after": "a\n"},
    }
    steps = [
        lambda: fsio.atomic_write(memory / INTENT, encode_line(intent)),
        lambda: (memory / "edits" / "2026-09.jsonl").write_bytes(journal_bytes[:10]),  # torn journal
        lambda: (memory / "edits" / "2026-09.jsonl").write_bytes(journal_bytes),
        lambda: (memory / "notes.md").write_bytes(notes_bytes[:7]),  # torn notes
        lambda: (memory / "notes.md").write_bytes(notes_bytes),
        lambda: (memory / "memory.md").write_text("a\n"),
        (memory / INTENT).unlink,
    ]
    for step in steps[: cut + 1]:
        step()
    journal = Journal(memory, clock.now)
    journal.open()
    assert final_state(memory) == expected
    assert not (memory / INTENT).exists()
    assert journal.head == sealed["chain"]  # the next line follows the recovered one


def test_recovery_never_overwrites_a_later_hand_edit(tmp_path: Path, clock: Clock) -> None:
    memory = prepare(tmp_path)
    intent = {"appends": [], "rewrite": {"path": "memory.md", "before": "x\n", "after": "y\n"}}
    fsio.atomic_write(memory / INTENT, encode_line(intent))
    Journal(memory, clock.now).open()
    assert (memory / "memory.md").read_text() == "a\n§\nb\n"


def broker_call(home: Path, arguments: dict[str, Any], call_id: str) -> ToolResponse | None:
    request = ToolRequest(session="chat-crash", call_id=call_id, tool="memory", arguments=arguments)
    try:
        reply = wire.call(
            home / "run" / "broker-memory" / "memory.sock",
            MemoryCall(request=request, taint=DataClass.PRIVATE, untrusted=False),
            timeout=10,
        )
    except PeerError:
        return None
    assert isinstance(reply, ToolResponse)
    return reply


def journal_lines(home: Path) -> list[dict[str, Any]]:
    lines: list[dict[str, Any]] = []
    for path in sorted((home / "memory" / "edits").glob("*.jsonl")):
        lines += [json.loads(x) for x in path.read_text().splitlines() if x.strip()]
    return lines


def test_kill_9_during_writes_then_restart(home: Path) -> None:
    rng = random.Random(20260924)
    admin = home / "run" / "owner-memory" / "admin.sock"
    acknowledged: list[tuple[str, str]] = []
    counter = 0
    for _round in range(6):
        process = spawn_memoryd(home)
        wait_until_answers(process, admin)
        done = threading.Event()

        def writer(done: threading.Event = done) -> None:
            nonlocal counter
            while not done.is_set():
                counter += 1
                n = counter
                if n % 3 == 0:
                    arguments = {"action": "note", "text": f"note {n}"}
                else:
                    arguments = {"action": "add", "file": "user" if n % 2 else "memory", "text": f"e{n}"}
                reply = broker_call(home, arguments, f"c{n}")
                if reply is None:
                    return
                if reply.code in ("ok", "noted"):
                    acknowledged.append((arguments.get("file", "notes"), arguments["text"]))
                if reply.code == "refused:limit":  # make room: consolidate the file down to nothing
                    file = arguments["file"]
                    entries = parse_entries((home / "memory" / f"{file}.md").read_text())
                    items = [{"old": e, "move": True} for e in entries]
                    broker_call(home, {"action": "consolidate", "file": file, "entries": items}, f"k{n}")

        thread = threading.Thread(target=writer)
        thread.start()
        threading.Event().wait(rng.uniform(0.15, 0.6))
        stop(process, signal.SIGKILL)
        done.set()
        thread.join(timeout=30)

    process = spawn_memoryd(home)
    try:
        wait_until_answers(process, admin)
    finally:
        stop(process)

    memory = home / "memory"
    assert not (memory / INTENT).exists()
    lines = journal_lines(home)
    assert len(lines) >= len(acknowledged) > 20
    assert [x["id"] for x in lines] == sorted({x["id"] for x in lines})
    notes_text = normalise_newlines((memory / "notes.md").read_text())
    notes = [n.text for n in parse_notes(notes_text)]
    journalled_notes = [n["text"] for x in lines for n in x.get("notes", [])]
    assert notes == journalled_notes
    for name in ("memory.md", "user.md"):
        entries = parse_entries((memory / name).read_text())
        last = [x for x in lines if x["where"] == name][-1]
        assert entries == last["after"], name
    everything = set(notes) | {
        e for name in ("memory.md", "user.md") for e in parse_entries((memory / name).read_text())
    }
    for where, text in acknowledged:
        assert text in everything, (where, text)
