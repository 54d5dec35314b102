"""Damage at rest to every file memoryd owns, then a start (issue 14, defect 5): memoryd starts every time,
recall answers, nothing is rewritten behind the owner's back, the damage the journal can see is named
in one sentence with its runbook entry, and ``bxctl memory repair`` restores what the journal holds.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from boxmaker.proto import wire
from boxmaker.proto.errors import PeerError
from boxmaker.proto.messages import MemoryAdmin, MemoryAdminReply, MemoryBlock, MemoryBlockReply, ToolResponse
from conftest import bxctl_ok
from faultkit import MEMORYD, memory_call, spawn, stop, verify, wait_answers

#: Texts the template home holds (all acknowledged).
NOTES = [f"the harbour note {n} about tides and boats" for n in range(6)]
FACTS = ["prefers tea in the morning", "lives near the harbour"]


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A home with notes, identity entries and a withdrawal control, stopped cleanly."""
    home = Path(tmp_path_factory.mktemp("tpl", numbered=True)) / "home"
    home.mkdir()
    process = spawn(MEMORYD, home)
    try:
        wait_answers(process, MEMORYD, home)
        for n, text in enumerate(NOTES):
            _answered(memory_call(home, {"action": "note", "text": text}, f"n{n}"), "noted")
        for n, text in enumerate(FACTS):
            _answered(memory_call(home, {"action": "add", "file": "memory", "text": text}, f"f{n}"), "ok")
        first = json.loads((home / "memory" / "items.jsonl").read_bytes().split(b"\n")[0])["id"]
        _answered(memory_call(home, {"action": "forget", "items": [first], "reason": "mistaken"}, "w1"), "ok")
    finally:
        assert stop(process) == 0
    return home


def _cut_tail(name: str, keep: int) -> Callable[[Path], None]:
    def damage(memory: Path) -> None:
        data = (memory / name).read_bytes()
        (memory / name).write_bytes(data[:-keep])

    return damage


def _append(name: str, data: bytes) -> Callable[[Path], None]:
    def damage(memory: Path) -> None:
        with (memory / name).open("ab") as handle:
            handle.write(data)

    return damage


def _garble(name: str) -> Callable[[Path], None]:
    def damage(memory: Path) -> None:
        data = bytearray((memory / name).read_bytes())
        middle = len(data) // 2
        data[middle : middle + 8] = b"\x00garbage"
        (memory / name).write_bytes(bytes(data))

    return damage


def _journal(memory: Path) -> Path:
    return sorted((memory / "edits").glob("*.jsonl"))[-1]


def _journal_garbage(memory: Path) -> None:
    path = _journal(memory)
    lines = path.read_bytes().split(b"\n")
    lines.insert(2, b"this is not a journal line")
    path.write_bytes(b"\n".join(lines))


def _journal_torn(memory: Path) -> None:
    with _journal(memory).open("ab") as handle:
        handle.write(b'{"id":"2026-12-02-00')


def _index(how: str) -> Callable[[Path], None]:
    def damage(memory: Path) -> None:
        index = memory.parent / "index"
        if how == "missing":
            shutil.rmtree(index)
        elif how == "garbage":
            (index / "memory.sqlite3").write_bytes(b"not a database" * 1000)
        else:
            data = (index / "memory.sqlite3").read_bytes()
            (index / "memory.sqlite3").write_bytes(data[: len(data) // 3])

    return damage


def _write(name: str, data: bytes) -> Callable[[Path], None]:
    def damage(memory: Path) -> None:
        (memory / name).write_bytes(data)

    return damage


def _chmod(memory: Path) -> None:
    os.chmod(memory / "notes.md", 0)


def _delete(name: str) -> Callable[[Path], None]:
    def damage(memory: Path) -> None:
        (memory / name).unlink()

    return damage


#: (the damage, what does it, the file the check names or None, whether repair restores it).
CASES = [
    ("notes.md cut inside its last note", _cut_tail("notes.md", 15), "notes.md", True),
    ("notes.md deleted", _delete("notes.md"), "notes.md", True),
    ("notes.md mode 0000", _chmod, None, False),
    ("items.jsonl garbage", _garble("items.jsonl"), "items.jsonl", True),
    ("items.jsonl cut", _cut_tail("items.jsonl", 40), "items.jsonl", True),
    ("controls.jsonl line appended", _append("controls.jsonl", b'{"x":1}\n'), "controls.jsonl", True),
    ("proposals.jsonl garbage", _append("proposals.jsonl", b"garbage\n"), "proposals.jsonl", True),
    ("feedback.jsonl garbage", _append("feedback.jsonl", b"\xff\xfe\n"), "feedback.jsonl", True),
    ("erasures.jsonl garbage", _append("erasures.jsonl", b"{}\n"), "erasures.jsonl", True),
    ("journal torn last line", _journal_torn, None, False),
    ("journal garbage line", _journal_garbage, "edits", False),
    ("memory.md not UTF-8", _write("memory.md", b"\xff\xfe broken\n"), "memory.md", True),
    ("memory.md over its limit", _write("memory.md", ("x" * 2500 + "\n").encode()), None, False),
    ("soul.md holds NUL bytes", _write("soul.md", b"be kind\x00\x00\x00\n"), "soul.md", False),
    ("index garbage", _index("garbage"), None, False),
    ("index truncated", _index("truncated"), None, False),
    ("index folder missing", _index("missing"), None, False),
    ("intent not JSON", _write(".intent.json", b"{not json"), None, False),
    ("checkpoint garbage", _write(".checkpoint.json", b"\x00\x01"), None, False),
    ("pending.jsonl garbage", _write("pending.jsonl", b"garbage\n"), None, False),
]


def _snapshot(memory: Path) -> dict[str, bytes]:
    skip = (".checkpoint.json", ".lock", "index.md", ".intent.json", ".projections.json")  # derived
    return {
        str(p.relative_to(memory)): p.read_bytes()
        for p in sorted(memory.rglob("*"))
        if p.is_file() and p.name not in skip and "recalls" not in p.parts and "topics" not in p.parts
    }


def _answered(reply: ToolResponse | None, code: str) -> None:
    assert reply is not None
    assert reply.code == code, reply


def _block(home: Path) -> str:
    """ "served", or the error code memoryd answered `memory_block` with."""
    try:
        reply = wire.call(home / MEMORYD.sockets[0], MemoryBlock(), timeout=10)
    except PeerError as exc:
        return exc.code
    return "served" if isinstance(reply, MemoryBlockReply) else "?"


def _admin(home: Path, command: str, **args: object) -> MemoryAdminReply:
    reply = wire.call(home / MEMORYD.sockets[2], MemoryAdmin(command=command, args=dict(args)), timeout=30)
    assert isinstance(reply, MemoryAdminReply)
    return reply


#: The cases in four homes, so memoryd starts four times: damages that can stand side by side (each
#: names its own file) share a home; the ones the check must not name share one.
GROUPS = {
    "journalled files": [
        "notes.md cut inside its last note",
        "items.jsonl garbage",
        "controls.jsonl line appended",
        "proposals.jsonl garbage",
        "feedback.jsonl garbage",
        "erasures.jsonl garbage",
        "index garbage",
    ],
    "cut and unreadable": ["notes.md deleted", "items.jsonl cut", "memory.md not UTF-8", "index truncated"],
    "not repairable": ["journal garbage line", "soul.md holds NUL bytes"],
    "not damage": [
        "notes.md mode 0000",
        "journal torn last line",
        "memory.md over its limit",
        "index folder missing",
        "intent not JSON",
        "checkpoint garbage",
        "pending.jsonl garbage",
    ],
}


def test_every_case_is_in_one_group() -> None:
    grouped = [name for names in GROUPS.values() for name in names]
    assert sorted(grouped) == sorted(c[0] for c in CASES)


@pytest.mark.parametrize("group", list(GROUPS))
def test_damage_at_rest(home: Path, template: Path, group: str) -> None:
    cases = [c for c in CASES if c[0] in GROUPS[group]]
    shutil.rmtree(home, ignore_errors=True)
    shutil.copytree(template, home)
    memory = home / "memory"
    original = _snapshot(memory)
    for _, damage, _, _ in cases:
        damage(memory)
    damaged = _snapshot(memory)
    named = {c[2] for c in cases if c[2] is not None}
    repaired = sorted(c[2] for c in cases if c[3] and c[2] is not None)
    process = spawn(MEMORYD, home)
    try:
        status = wait_answers(process, MEMORYD, home)
        assert isinstance(status, MemoryAdminReply)
        _answered(memory_call(home, {"query": "harbour tides"}, "r1", tool="recall", timeout=30), "ok")
        assert _block(home) in ("served", "memory-unavailable")
        found = {d["file"].split("/")[0] for d in status.data["damage"]}
        assert found == named, status.data["damage"]
        assert all("(runbook: memory-damaged)" in d["text"] for d in status.data["damage"])
        assert ("DAMAGED: " in status.text) == bool(named)
        after_start = _snapshot(memory)
        torn = {k for k in after_start.keys() ^ damaged.keys() if k.endswith(".torn")}
        changed = {k for k in damaged if after_start.get(k) != damaged[k]}
        changed -= {k.removesuffix(".torn") for k in torn}
        changed.discard("notes.md") if "notes.md deleted" in GROUPS[group] else None
        assert not changed, f"rewritten at start: {changed}"
        plan = _admin(home, "repair")
        assert sorted(r["file"] for r in plan.data["restore"]) == repaired, plan.text
        assert len(plan.data["not_restored"]) == len(named) - len(repaired), plan.text
        assert not plan.data["applied"]
        assert _snapshot(memory) == after_start  # a plan changes nothing
        if repaired:
            done = _admin(home, "repair", yes=True)
            assert done.data["applied"], done.text
            assert done.data["left"] == [], done.text
            for name in repaired:
                assert _snapshot(memory).get(name, b"") == original.get(name, b""), name
            assert _admin(home, "status").data["damage"] == []
    finally:
        assert stop(process) == 0
    if repaired:
        assert verify(home, [*NOTES[1:], *FACTS]).clean


def test_bxctl_memory_repair_shows_the_plan_then_restores(home: Path) -> None:
    """The owner's command: a plan (exit 0, nothing changed), the same as JSON, then ``--yes``."""
    process = spawn(MEMORYD, home, "")
    try:
        wait_answers(process, MEMORYD, home)
        for n, text in enumerate(NOTES[:3]):
            _answered(memory_call(home, {"action": "note", "text": text}, f"n{n}"), "noted")
        notes = home / "memory" / "notes.md"
        whole = notes.read_bytes()
        notes.write_bytes(whole[:-12])  # cut inside the last note
        socket = ["--memory-socket", str(home / MEMORYD.sockets[2])]
        plan = bxctl_ok(home, "memory", "repair", *socket)
        assert "notes.md: restore it from the journal" in plan.stdout
        assert "nothing was changed; `bxctl memory repair --yes` restores these" in plan.stdout
        shown = subprocess.run(
            [sys.executable, "-m", "boxmaker.bxctl", "--home", str(home), "status"],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert "memoryd: running" in shown.stdout  # the other roles are down here: exit 1
        assert "DAMAGED: notes.md ends at byte" in shown.stdout
        assert notes.read_bytes() == whole[:-12]
        as_json = json.loads(bxctl_ok(home, "memory", "repair", "--json", *socket).stdout)
        assert [r["file"] for r in as_json["restore"]] == ["notes.md"]
        assert as_json["applied"] is False
        done = bxctl_ok(home, "memory", "repair", "--yes", *socket)
        assert "restored 1 file from the journal" in done.stdout
        assert notes.read_bytes() == whole
        log = bxctl_ok(home, "memory", "log", *socket)
        assert "repair notes.md  by the owner" in log.stdout
    finally:
        assert stop(process) == 0


def test_damage_stays_named_after_a_write_and_a_restart(home: Path, template: Path) -> None:
    """Bytes someone appended to items.jsonl are named at start; memoryd then appends after them, so
    they are no longer the file's tail. The next start must still name them (and repair restore the
    file), not forget them because the checkpoint and the last append now look fine."""
    shutil.rmtree(home, ignore_errors=True)
    shutil.copytree(template, home)
    memory = home / "memory"
    with (memory / "items.jsonl").open("ab") as handle:
        handle.write(b'{"event":"capture","id":"mem-2026-01-01-001","text":"planted"}\n')
    process = spawn(MEMORYD, home)
    try:
        status = wait_answers(process, MEMORYD, home)
        assert isinstance(status, MemoryAdminReply)
        assert [d["file"] for d in status.data["damage"]] == ["items.jsonl"]
        _answered(memory_call(home, {"action": "note", "text": "a note after the damage"}, "n1"), "noted")
    finally:
        assert stop(process) == 0
    process = spawn(MEMORYD, home)
    try:
        status = wait_answers(process, MEMORYD, home)
        assert isinstance(status, MemoryAdminReply)
        assert [d["file"] for d in status.data["damage"]] == ["items.jsonl"], status.text
        assert "that no journal line wrote" in status.data["damage"][0]["text"]
        done = _admin(home, "repair", yes=True)
        assert done.data["applied"], done.text
        assert b"planted" not in (memory / "items.jsonl").read_bytes()
        assert b"a note after the damage" in (memory / "items.jsonl").read_bytes()
        assert _admin(home, "status").data["damage"] == []
    finally:
        assert stop(process) == 0
    process = spawn(MEMORYD, home)
    try:
        status = wait_answers(process, MEMORYD, home)
        assert isinstance(status, MemoryAdminReply)
        assert status.data["damage"] == []
    finally:
        assert stop(process) == 0
