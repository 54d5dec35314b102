"""A full disk under a running memoryd (issue 14, defects 2 and 3): a small tmpfs holds the home (or only
its index), a filler takes every free byte, and writes go on. Every answer is a `tool_response` the model
reads (``noted``/``ok``, or ``refused:disk-full``: nothing was written), never an error; after space comes
back and a restart, every acknowledged write is there, nothing is torn and the journal and the files
agree. A note committed while the index's disk is full is answered ``noted`` and recalled once there is
room again.

Mounting a tmpfs needs root (CI runs as root); otherwise the tests are skipped, saying why.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from boxmaker.proto import wire
from boxmaker.proto.errors import PeerError
from boxmaker.proto.labels import DataClass
from boxmaker.proto.messages import MemoryAdmin, MemoryAdminReply, MemoryCall, ToolRequest, ToolResponse
from faultkit import MEMORYD, spawn, stop, verify, wait_answers


@contextlib.contextmanager
def tmpfs(path: Path, size: str) -> Iterator[Path]:
    """A tmpfs of `size` mounted at `path` (created), unmounted after; skips the test when it cannot."""
    if os.geteuid() != 0:
        pytest.skip("a full disk needs a small tmpfs, and mounting one needs root (CI runs as root)")
    path.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size},mode=0700", "tmpfs", str(path)],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.strip()}")
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], check=False)


def fill(folder: Path) -> Path:
    """Take every free byte of `folder`'s file system with one file; returns it."""
    filler = folder / "filler"
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    try:
        for size in (65536, 4096, 512, 64, 1):
            with contextlib.suppress(OSError):
                while True:
                    os.write(fd, b"\0" * size)
    finally:
        os.close(fd)
    return filler


def ask(home: Path, arguments: dict[str, object], call_id: str, tool: str = "memory") -> ToolResponse | str:
    """The answer, or the code of the `error` frame that came instead."""
    request = ToolRequest(session="chat-full", call_id=call_id, tool=tool, arguments=arguments)
    body = MemoryCall(request=request, taint=DataClass.PRIVATE, untrusted=False)
    try:
        reply = wire.call(home / MEMORYD.sockets[1], body, timeout=20)
    except PeerError as exc:
        return f"error {exc.code}"
    assert isinstance(reply, ToolResponse)
    return reply


def status(home: Path) -> MemoryAdminReply:
    reply = wire.call(home / MEMORYD.sockets[2], MemoryAdmin(command="status"), timeout=10)
    assert isinstance(reply, MemoryAdminReply)
    return reply


def test_a_full_disk_refuses_writes_cleanly_and_loses_nothing(
    home: Path, request: pytest.FixtureRequest
) -> None:
    with tmpfs(home.parent / "disk", "6m") as disk:
        home = disk / "home"
        home.mkdir()
        acknowledged, answers = [], []
        process = spawn(MEMORYD, home)
        try:
            wait_answers(process, MEMORYD, home)
            for n in range(10):
                reply = ask(home, {"action": "note", "text": f"before the disk filled, note {n}"}, f"a{n}")
                assert isinstance(reply, ToolResponse)
                assert reply.code == "noted"
                acknowledged.append(f"before the disk filled, note {n}")
            filler = fill(disk)
            full = filler.stat().st_size
            for n in range(40):
                if n % 10 == 0:  # a few pages free now and then, so each step of a commit meets the end
                    os.truncate(filler, full - (n // 10) * 8192)
                text = f"while the disk is full, write {n} " + "x" * 300
                arguments = {"action": "note", "text": text}
                if n % 2 == 0:
                    arguments = {"action": "add", "file": "user", "text": text[:90]}
                reply = ask(home, arguments, f"f{n}")
                answers.append(reply if isinstance(reply, str) else reply.code)
                if not isinstance(reply, str) and reply.code in ("ok", "noted"):
                    acknowledged.append(str(arguments["text"]))
            recall = ask(home, {"query": "disk filled"}, "r1", tool="recall")
            assert not isinstance(recall, str), recall
            filler.unlink()
            for n in range(5):
                reply = ask(home, {"action": "note", "text": f"after space came back, note {n}"}, f"b{n}")
                assert isinstance(reply, ToolResponse)
                assert reply.code == "noted", reply
                acknowledged.append(f"after space came back, note {n}")
        finally:
            assert stop(process) == 0
        assert all(a in ("ok", "noted", "refused:disk-full", "refused:limit") for a in answers), answers
        refused = answers.count("refused:disk-full")
        assert refused > 0, answers  # the disk was full
        process = spawn(MEMORYD, home)
        try:
            wait_answers(process, MEMORYD, home)
            assert status(home).data["damage"] == []
        finally:
            assert stop(process) == 0
        verdict = verify(home, acknowledged)
        assert verdict.clean, verdict
    figure = (
        f"full disk: {len(answers)} writes on a full tmpfs, {refused} refused disk-full, "
        f"{len(answers) - refused} acknowledged; after space came back {len(verdict.lost)} lost, "
        f"{len(verdict.torn)} torn, {len(verdict.disagreements)} disagreements"
    )
    request.node.user_properties.append(("figure", figure))


def test_a_note_committed_while_the_index_disk_is_full_is_answered_and_recalled_later(home: Path) -> None:
    home.mkdir(parents=True, exist_ok=True)
    with tmpfs(home / "index", "2m") as index:
        process = spawn(MEMORYD, home)
        try:
            wait_answers(process, MEMORYD, home)
            first = ask(home, {"action": "note", "text": "the harbour master is Ines"}, "n0")
            assert isinstance(first, ToolResponse)
            filler = fill(index)
            behind = None
            for n in range(1, 20):
                text = f"the lighthouse keeper {n} is Ada " + "y" * 900
                reply = ask(home, {"action": "note", "text": text}, f"n{n}")
                assert isinstance(reply, ToolResponse), reply  # never an error frame
                assert reply.code == "noted", reply
                behind = status(home).data["index_behind"]
                if behind:
                    break
            assert behind, "the index never ran out of room"
            assert "INDEX BEHIND" in status(home).text
            shown = subprocess.run(
                [sys.executable, "-m", "boxmaker.bxctl", "--home", str(home), "status"],
                capture_output=True,
                text=True,
                timeout=60,
                check=False,
            )
            assert "INDEX BEHIND: notes were written that the index could not take" in shown.stdout
            assert "index: PROBLEM - behind: notes were written that it could not take" in shown.stdout
            filler.unlink()
            recalled = ask(home, {"query": "lighthouse keeper Ada"}, "r1", tool="recall")
            assert isinstance(recalled, ToolResponse)
            assert recalled.code == "ok", recalled
            assert "lighthouse keeper" in recalled.output
            assert status(home).data["index_behind"] is None
        finally:
            assert stop(process) == 0
