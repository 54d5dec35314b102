"""kill -9 at random moments while a client writes through memoryd's broker socket, then a restart: every
acknowledged write is there, nothing is torn, the journal and the files agree (and the start-up check
finds nothing), and a write a kill cut off is applied once or not at all (issue 14).

The quick version (in the gate) kills 6 times; ``--long`` kills 60 times over at least 1,000
acknowledged writes. Both record their figures (printed after the run).
"""

from __future__ import annotations

import random
import signal
import threading
from pathlib import Path

import pytest

from boxmaker.memoryd.files.entries import parse_entries
from faultkit import MEMORYD, memory_call, spawn, stop, verify, wait_answers


class Writer:
    """A client writing unique texts (notes, and adds to memory.md and user.md, consolidated into
    notes when a file is full) until memoryd stops answering."""

    def __init__(self, home: Path, start: int) -> None:
        self.home = home
        self.n = start
        self.acknowledged: list[str] = []
        self.cut_off: list[str] = []

    def run(self) -> None:
        while True:
            self.n += 1
            n = self.n
            if n % 3 == 0:
                arguments = {"action": "note", "text": f"note number {n} about the harbour"}
            else:
                arguments = {"action": "add", "file": "user" if n % 2 else "memory", "text": f"fact {n}"}
            reply = memory_call(self.home, arguments, f"c{n}", timeout=10)
            if reply is None:
                self.cut_off.append(str(arguments["text"]))
                return
            if reply.code in ("ok", "noted"):
                self.acknowledged.append(str(arguments["text"]))
            elif reply.code == "refused:limit":
                self.make_room(str(arguments["file"]), n)
            else:
                raise AssertionError(f"unexpected answer {reply.code}: {reply.output}")

    def make_room(self, file: str, n: int) -> None:
        entries = parse_entries((self.home / "memory" / f"{file}.md").read_text(encoding="utf-8"))
        items = [{"old": e, "move": True} for e in entries]
        memory_call(self.home, {"action": "consolidate", "file": file, "entries": items}, f"k{n}")


def test_kill_9_during_writes_loses_nothing(home: Path, request: pytest.FixtureRequest) -> None:
    long = bool(request.config.getoption("--long"))
    kills = 60 if long else 6
    pause = (0.3, 1.4) if long else (0.2, 0.7)
    rng = random.Random(20261202)
    acknowledged: list[str] = []
    cut_off: list[str] = []
    count = 0
    for _ in range(kills):
        process = spawn(MEMORYD, home)
        wait_answers(process, MEMORYD, home)
        writer = Writer(home, count)
        thread = threading.Thread(target=writer.run)
        thread.start()
        threading.Event().wait(rng.uniform(*pause))
        stop(process, signal.SIGKILL)
        thread.join(timeout=30)
        assert not thread.is_alive()
        count = writer.n
        acknowledged += writer.acknowledged
        cut_off += writer.cut_off
    process = spawn(MEMORYD, home)
    try:
        wait_answers(process, MEMORYD, home)
    finally:
        assert stop(process) == 0
    verdict = verify(home, acknowledged)
    assert verdict.clean, verdict
    held = home / "memory"
    texts = [(held / n).read_text(encoding="utf-8") for n in ("notes.md", "memory.md", "user.md")]
    applied = sum(1 for text in cut_off if any(text in t for t in texts))
    figure = (
        f"kill -9 during writes: {len(acknowledged):,} acknowledged writes, {kills} kills: "
        f"{len(verdict.lost)} lost, {len(verdict.torn)} torn, {len(verdict.disagreements)} disagreements "
        f"(of {len(cut_off)} writes cut off by a kill, {applied} applied, {len(cut_off) - applied} not, "
        f"{len(verdict.twice)} twice)"
    )
    request.node.user_properties.append(("figure", figure))
    assert len(acknowledged) >= (1000 if long else 20), figure
