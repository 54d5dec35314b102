"""The fault suite's helpers: the three roles as real processes, raw frames, and the invariants a home
keeps whatever happened to it (issue 14).

Standard library and the project only. Every wait is bounded.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import struct
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from boxmaker.memoryd.files.entries import normalise_newlines, parse_entries
from boxmaker.memoryd.files.journal import Journal
from boxmaker.memoryd.files.names import INTENT
from boxmaker.memoryd.files.notes import parse as parse_notes
from boxmaker.memoryd.startcheck import check as memory_check
from boxmaker.proto import wire
from boxmaker.proto.errors import PeerError
from boxmaker.proto.labels import DataClass
from boxmaker.proto.messages import Body, MemoryAdmin, MemoryCall, Status, ToolRequest, ToolResponse


@dataclass(frozen=True, slots=True)
class Role:
    """How a role runs here: its module, its sockets (relative to the home), its status request."""

    name: str
    sockets: tuple[str, ...]
    status_socket: str

    def socket(self, home: Path, name: str | None = None) -> Path:
        return home / (name or self.status_socket)

    def status(self) -> Body:
        return MemoryAdmin(command="status") if self.name == "memoryd" else Status()


MEMORYD = Role(
    "memoryd",
    ("run/loop-memory/memory.sock", "run/broker-memory/memory.sock", "run/owner-memory/admin.sock"),
    "run/owner-memory/admin.sock",
)
BROKERD = Role(
    "brokerd", ("run/loop-broker/broker.sock", "run/owner-broker/admin.sock"), "run/owner-broker/admin.sock"
)
LOOPD = Role("loopd", ("run/owner-loop/chat.sock",), "run/owner-loop/chat.sock")
ROLES = (MEMORYD, BROKERD, LOOPD)


def config_path(role: Role, home: Path) -> Path:
    return home.parent / f"{role.name}.toml"


def spawn(role: Role, home: Path, config: str = "") -> subprocess.Popen[bytes]:
    """Start `role` on `home` with ``[paths] home`` and `config` (more TOML) as its config; its output
    goes to ``<home>/../<role>.log``."""
    path = config_path(role, home)
    path.write_text(f'[paths]\nhome = "{home}"\n{config}', encoding="utf-8")
    command = [sys.executable, "-m", f"boxmaker.{role.name}", "serve", "--config", str(path)]
    with (home.parent / f"{role.name}.log").open("ab") as log:
        return subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=log, stderr=log)


def log_of(role: Role, home: Path) -> str:
    path = home.parent / f"{role.name}.log"
    return path.read_text(errors="replace") if path.exists() else ""


def wait_answers(process: subprocess.Popen[bytes], role: Role, home: Path, timeout: float = 30.0) -> Body:
    """Wait until `role` answers its status request; fail with its log if it exits."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise AssertionError(f"{role.name} exited with {process.returncode}: {log_of(role, home)}")
        try:
            return wire.call(role.socket(home), role.status(), timeout=5.0)
        except PeerError:
            time.sleep(0.05)
    raise AssertionError(f"{role.name} did not answer within {timeout:g} s: {log_of(role, home)}")


def stop(process: subprocess.Popen[bytes], sig: int = signal.SIGTERM, timeout: float = 20.0) -> int:
    """Signal a process and wait for it; returns its exit status (killed after `timeout`)."""
    if process.poll() is None:
        process.send_signal(sig)
    try:
        process.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
    return process.returncode


def memory_call(
    home: Path, arguments: dict[str, Any], call_id: str, *, tool: str = "memory", timeout: float = 10.0
) -> ToolResponse | None:
    """One `memory_call` on memoryd's broker socket as brokerd sends it; None when no answer came."""
    request = ToolRequest(session="chat-faults", call_id=call_id, tool=tool, arguments=arguments)
    body = MemoryCall(request=request, taint=DataClass.PRIVATE, untrusted=False)
    try:
        reply = wire.call(home / MEMORYD.sockets[1], body, timeout=timeout)
    except PeerError:
        return None
    assert isinstance(reply, ToolResponse), reply
    return reply


# Raw frames ------------------------------------------------------------------------------------------


def frame(payload: bytes) -> bytes:
    return struct.pack(">I", len(payload)) + payload


def exchange(path: Path, data: bytes, *, shut: bool = True, timeout: float = 15.0) -> bytes | None:
    """Send raw `data` on `path` (then shut the write side when `shut`) and read whatever comes back
    until the server closes; None when the server sent nothing."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(timeout)
        sock.connect(str(path))
        try:
            sock.sendall(data)
            if shut:
                sock.shutdown(socket.SHUT_WR)
        except (BrokenPipeError, ConnectionResetError):
            pass
        chunks = []
        while True:
            try:
                chunk = sock.recv(65536)
            except ConnectionResetError:
                break
            if not chunk:
                break
            chunks.append(chunk)
    reply = b"".join(chunks)
    return reply or None


def reply_kind(reply: bytes) -> tuple[str, dict[str, Any]]:
    """The kind and body of one framed reply."""
    (size,) = struct.unpack(">I", reply[:4])
    value = json.loads(reply[4 : 4 + size])
    return value["kind"], value["body"]


# The invariants of a memory home ---------------------------------------------------------------------


@dataclass(slots=True)
class Verdict:
    """What a home holds after faults, against what was acknowledged.

    Attributes:
        lost: acknowledged writes whose text is nowhere in the files.
        torn: files whose last line (or note) is incomplete.
        disagreements: places the files and the journal disagree (and the start-up check's findings).
        twice: acknowledged texts that appear more than once.
    """

    lost: list[str] = field(default_factory=list)
    torn: list[str] = field(default_factory=list)
    disagreements: list[str] = field(default_factory=list)
    twice: list[str] = field(default_factory=list)

    @property
    def clean(self) -> bool:
        return not (self.lost or self.torn or self.disagreements or self.twice)


def journal_lines(home: Path) -> list[dict[str, Any]]:
    lines: list[dict[str, Any]] = []
    for path in sorted((home / "memory" / "edits").glob("*.jsonl")):
        lines += [json.loads(x) for x in path.read_bytes().split(b"\n") if x.strip()]
    return lines


def verify(home: Path, acknowledged: list[str]) -> Verdict:
    """The invariants after a restart: no intent left; every journal, notes.md and items.jsonl line
    whole; notes.md's notes and items.jsonl's events exactly the journal's, in order; memory.md and
    user.md as the journal's last edit of each left them; the start-up check finds nothing; every
    acknowledged text present, and none twice."""
    memory = home / "memory"
    verdict = Verdict()
    if (memory / INTENT).exists():
        verdict.disagreements.append("an intent is left")
    for path in [*sorted((memory / "edits").glob("*.jsonl")), memory / "items.jsonl"]:
        data = path.read_bytes() if path.exists() else b""
        if data and not data.endswith(b"\n"):
            verdict.torn.append(path.name)
    lines = journal_lines(home)
    notes_text = normalise_newlines((memory / "notes.md").read_text(encoding="utf-8"))
    notes = [n.text for n in parse_notes(notes_text)]
    journalled = [n["text"] for x in lines for n in x.get("notes", [])]
    if notes != journalled:
        verdict.disagreements.append(f"notes.md has {len(notes)} notes, the journal {len(journalled)}")
    if notes_text and not notes_text.endswith("\n\n"):
        verdict.torn.append("notes.md")
    events = [json.loads(x) for x in (memory / "items.jsonl").read_bytes().split(b"\n") if x.strip()]
    if events != [e for x in lines for e in x.get("events", [])]:
        verdict.disagreements.append("items.jsonl differs from the journal's events")
    held: list[str] = list(notes)
    for name in ("memory.md", "user.md"):
        entries = parse_entries((memory / name).read_text(encoding="utf-8"))
        edits = [x for x in lines if x.get("where") == name and isinstance(x.get("after"), list)]
        if edits and entries != edits[-1]["after"]:
            verdict.disagreements.append(f"{name} differs from its last journal line")
        held += entries
    verdict.disagreements += [f.sentence for f in memory_check(memory, Journal(memory, _never))]
    verdict.lost = [text for text in acknowledged if text not in held]
    verdict.twice = sorted({text for text in acknowledged if held.count(text) > 1})
    return verdict


def _never() -> Any:
    raise AssertionError("the check reads the journal only")


def pids_alive(*processes: subprocess.Popen[bytes]) -> bool:
    return all(p.poll() is None for p in processes)


def kill_quietly(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        os.kill(process.pid, signal.SIGKILL)
        process.wait()
