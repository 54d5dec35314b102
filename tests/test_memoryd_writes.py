"""memoryd writes only its own folders (M5a section 12: "memoryd ... never writes `sessions/`, grants or
the audit log"; DESIGN 2 and 10; issue 13, item 4).

Every role runs as its own process under `bxctl up`, against the fake llama-server, with a write
recorder loaded into each Python process (``tests/fakes/write_audit/sitecustomize.py``: an audit hook
that logs every open for writing, rename, remove, mkdir, chmod, SQLite database and socket bind, with the
process's argv). A workload goes through every role and every kind of memoryd write: a chat that adds
to memory.md, notes and recalls; the owner's note; reindex; the archive; a maintenance job (autodream);
an export; an authorised erasure; and the roles stopping. Then every path memoryd's processes wrote must
lie in what DESIGN gives memoryd: ``memory/``, ``index/``, its sockets ``run/<peer>-memory/``, the home
and ``run/`` folders themselves (made if missing), and the one file the owner named for the export.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from fakes.llama_server import FakeReply
from protocol_helpers import Box, call, note_call, run_job, running

RECORDER = Path(__file__).resolve().parent / "fakes" / "write_audit"


def writes(folder: Path) -> list[dict[str, Any]]:
    """Every record the write recorder made, all processes."""
    lines: list[dict[str, Any]] = []
    for path in sorted(folder.glob("*.jsonl")):
        lines += [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]
    return lines


def role(record: dict[str, Any]) -> str:
    """The role whose process made the record (``-m boxmaker.<role>``), else its argv[0]."""
    argv0 = str(record["argv"][0]) if record["argv"] else ""
    parts = argv0.split("/")
    return parts[-2] if argv0.endswith("/__main__.py") and parts[-3:-2] == ["boxmaker"] else argv0


def is_memoryd(record: dict[str, Any]) -> bool:
    return role(record) == "memoryd"


def allowed(home: Path, export: Path, path: Path, event: str) -> bool:
    """Whether DESIGN gives memoryd `path` for `event`: the export's own temp file is written beside
    it and renamed over it (DESIGN 7)."""
    if path.is_relative_to(home / "memory") or path.is_relative_to(home / "index"):
        return True
    if path == export or (path.parent == export.parent and path.name.startswith(f".{export.name}.tmp-")):
        return True
    if path in (home, home / "run"):
        return event == "os.mkdir"  # a missing home or run/ is made (DESIGN 10.1)
    sockets = [home / "run" / f"{peer}-memory" for peer in ("loop", "broker", "owner", "mcp")]
    return any(folder in (path, path.parent) for folder in sockets)


def workload(box: Box, export: Path) -> None:
    """Every kind of memoryd write, through the roles as the owner and the model use them."""
    box.chat(
        "chat-writes",
        "Remember that I deploy on Thursdays; the NAS is at 10.0.0.7.",
        call(action="add", file="user", text="The owner deploys on Thursdays."),
        note_call("The NAS is at 10.0.0.7.", kind="state", subject="nas:ip"),
        FakeReply(tool_calls=[("recall", {"query": "deploy Thursdays"})]),
        FakeReply(content="Noted."),
    )
    box.bxctl("memory", "note", "Backups run at 02:00 UTC.")
    box.bxctl("reindex")
    box.bxctl("memory", "archive")
    results = run_job(
        box.home,
        box.model,
        "dream",
        call(action="dream-input"),
        note_call("Thursday deploys need a green backup."),
        FakeReply(content="Pass done."),
    )
    assert results
    assert not [r.content for r in results if r.content.startswith("refused")]
    box.bxctl("memory", "export", str(export))
    box.bxctl("memory", "erase", "--session", "chat-writes", "--authority", "ticket-7", "--yes")


@dataclass(frozen=True)
class Run:
    """The workload's home, the export file the owner named, and every write record."""

    home: Path
    export: Path
    records: list[dict[str, Any]]


@pytest.fixture(scope="module")
def run() -> Iterator[Run]:
    """The workload once, with the write recorder loaded into every process it starts."""
    folder = Path(tempfile.mkdtemp(prefix="bx-writes-log-", dir="/tmp"))
    made = [folder]
    try:
        with pytest.MonkeyPatch.context() as patch:
            patch.setenv("BOXMAKER_TEST_WRITES", str(folder))
            patch.setenv(
                "PYTHONPATH", os.pathsep.join(filter(None, [str(RECORDER), os.environ.get("PYTHONPATH")]))
            )
            with running("bx-writes-") as box:
                made.append(box.home.parent)
                export = box.home.parent / "export.json"
                workload(box, export)
        yield Run(box.home, export, writes(folder))
    finally:
        for path in made:
            shutil.rmtree(path, ignore_errors=True)


def test_memoryd_writes_only_memory_index_and_its_sockets(run: Run) -> None:
    home, export = run.home, run.export
    written = {(Path(p), str(r["event"])) for r in run.records if is_memoryd(r) for p in r["paths"]}
    # the recorder saw memoryd's writes of every kind the workload made
    for expected in (
        home / "memory" / "user.md",
        home / "memory" / "notes.md",
        home / "memory" / "items.jsonl",
        home / "memory" / "erasures.jsonl",
        home / "index" / "memory.sqlite3",
        home / "run" / "owner-memory" / "admin.sock",
        export,
    ):
        assert any(path == expected for path, _ in written), expected
    for folder in ("recalls", "archive", "edits"):
        assert any(p.parent == home / "memory" / folder for p, _ in written), folder
    outside = sorted({(str(p), e) for p, e in written if not allowed(home, export, p, e)})
    assert outside == [], outside
    for forbidden in ("sessions", "grants", "broker", "jobs", "config"):
        assert not any(p.is_relative_to(home / forbidden) for p, _ in written), forbidden


def test_no_other_role_writes_memory_or_index(run: Run) -> None:
    """The other side of the boundary: loopd, brokerd and bxctl never write memoryd's folders."""
    others = [r for r in run.records if not is_memoryd(r)]
    assert {role(r) for r in others} >= {"loopd", "brokerd", "bxctl"}
    for record in others:
        for path in map(Path, record["paths"]):
            inside = path.is_relative_to(run.home / "memory") or path.is_relative_to(run.home / "index")
            assert not inside, (role(record), record["event"], str(path))
