"""What every role's start-up check shares (DESIGN 7; docs/runbook.md): the `Finding` it reports, and
the durable checkpoint that makes it incremental.

At start each role runs one check of its part of the home, in two halves that report the same
`Finding` (one sentence, its runbook entry, what repairs it). First the home's safety
(`proto.homecheck`: owner, group/other write, links), before the lock or any socket: a problem stops
the role (``home-unsafe``). Then content damage, what it owns against what it wrote (memoryd
``memoryd.startcheck``, brokerd ``brokerd.startcheck``, loopd ``loopd.startcheck``), named by `report`:
a role starts anyway, since what it serves from a damaged file is what it served before; the check makes
the damage visible (the log, ``bxctl status``).

The check costs what changed since the last good state, not the history: a `Checkpoint` (a small
JSON file the role writes durably while nothing is known to be damaged) holds, for each file it
covers, its size and the SHA-256 of its last `WINDOW` bytes (`mark`), and where the role's append-only
logs stood. At the next start a file is shorter than its mark, or its bytes before the mark changed
(`changed`), or only what was appended since is read (`lines_since`).
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import logging
import os
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from boxmaker.proto import fsio

#: How many bytes before a mark's end its hash covers.
WINDOW = 4096
#: The checkpoint file's format version.
VERSION = 1


@dataclass(frozen=True, slots=True)
class Finding:
    """One problem a start-up check found in what its role owns.

    Attributes:
        what: what is damaged, as a clause naming the file (``notes.md ends inside its last note``).
        runbook: the runbook entry that explains it.
        repair: what the owner runs or does (``run `bxctl memory repair` to see what it restores``).
        file: the file, relative to the role's folder (what a repair works on).
    """

    what: str
    runbook: str
    repair: str = ""
    file: str = ""

    @property
    def sentence(self) -> str:
        """The one sentence the log and ``bxctl status`` show."""
        repair = f"; {self.repair}" if self.repair else ""
        return f"{self.what}{repair} (runbook: {self.runbook})"


def report(log: logging.Logger, role: str, findings: Sequence[Finding]) -> str:
    """Log the first finding in one sentence (and how many more there are); returns that sentence
    ("" when there is none)."""
    if not findings:
        return ""
    more = f" (and {len(findings) - 1} more)" if len(findings) > 1 else ""
    sentence = f"{role} found damage at start: {findings[0].sentence}{more}"
    log.error("%s", sentence)
    return sentence


# Marks -----------------------------------------------------------------------------------------------


def mark(path: Path) -> dict[str, Any]:
    """A file's mark: ``{"size", "tail"}`` (the SHA-256 of its last `WINDOW` bytes); size 0 when the
    file is missing."""
    try:
        with path.open("rb") as handle:
            size = os.fstat(handle.fileno()).st_size
            handle.seek(max(0, size - WINDOW))
            tail = handle.read(size - max(0, size - WINDOW))
    except OSError:
        return {"size": 0, "tail": hashlib.sha256(b"").hexdigest()}
    return {"size": size, "tail": hashlib.sha256(tail).hexdigest()}


def changed(path: Path, marked: dict[str, Any]) -> str:
    """How `path` differs from its mark ("" when it still holds the marked bytes, perhaps with more
    appended): shorter than it was, or changed before the mark's end."""
    size = int(marked.get("size", 0))
    try:
        with path.open("rb") as handle:
            now = os.fstat(handle.fileno()).st_size
            if now < size:
                return f"is {now:,} bytes, shorter than the {size:,} it had at the last check"
            handle.seek(max(0, size - WINDOW))
            tail = handle.read(size - max(0, size - WINDOW))
    except FileNotFoundError:
        return "" if size == 0 else f"is missing (it had {size:,} bytes at the last check)"
    except OSError as exc:
        return f"cannot be read ({exc.strerror or exc})"
    if hashlib.sha256(tail).hexdigest() != marked.get("tail"):
        return f"changed before byte {size:,} (what it held at the last check)"
    return ""


def lines_since(path: Path, offset: int) -> Iterator[tuple[int, bytes]]:
    """The complete lines of an append-only file from byte `offset` on, with the offset each starts
    at (a torn last line is not yet a line)."""
    try:
        with path.open("rb") as handle:
            handle.seek(offset)
            data = handle.read()
    except OSError:  # missing or unreadable: what `changed` says of it is the finding
        return
    at = offset
    for raw in data.split(b"\n")[:-1]:
        yield at, raw
        at += len(raw) + 1


def json_object(raw: bytes) -> dict[str, Any] | None:
    """A line as a JSON object, or None when it is not one."""
    try:
        value = json.loads(raw)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


# The checkpoint --------------------------------------------------------------------------------------


#: Modification times this close to a checkpoint's moment are read again (clock granularity).
SLACK_NS = 2_000_000_000


def changed_since(checkpoint: Checkpoint | None, path: Path) -> bool:
    """True when `path` was modified since `checkpoint` was taken, within `SLACK_NS` (or there is no
    checkpoint); False for a file that is gone."""
    if checkpoint is None:
        return True
    try:
        return path.stat().st_mtime_ns >= checkpoint.taken_ns - SLACK_NS
    except FileNotFoundError:
        return False


@dataclass(slots=True)
class Checkpoint:
    """The last good state a role verified (`path` holds it as JSON, written durably).

    Attributes:
        files: each covered file's mark, by its path relative to the role's folder.
        positions: where the role's logs stood (e.g. the journal's file and size), role-defined.
        taken: when it was taken (UTC, ``YYYY-MM-DDTHH:MM:SSZ``); taken_ns: the same in ns since the
            epoch, to compare with files' modification times.
    """

    files: dict[str, dict[str, Any]] = field(default_factory=dict)
    positions: dict[str, Any] = field(default_factory=dict)
    taken: str = ""
    taken_ns: int = 0

    @classmethod
    def load(cls, path: Path) -> Checkpoint | None:
        """The checkpoint at `path`, or None when there is none or it cannot be read (then the check
        starts from the beginning of the history)."""
        try:
            data = json.loads(path.read_bytes())
        except (OSError, ValueError):
            return None
        if not isinstance(data, dict) or data.get("version") != VERSION:
            return None
        files, positions = data.get("files"), data.get("positions")
        if not isinstance(files, dict) or not isinstance(positions, dict):
            return None
        return cls(files, positions, str(data.get("taken", "")), int(data.get("taken_ns", 0)))

    @classmethod
    def of(cls, folder: Path, names: Sequence[str], positions: dict[str, Any]) -> Checkpoint:
        """A new checkpoint of `names` (relative to `folder`) as they are now."""
        now = time.time_ns()
        taken = dt.datetime.fromtimestamp(now / 1e9, dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        return cls({name: mark(folder / name) for name in names}, positions, taken, now)

    def save(self, path: Path) -> None:
        """Write it durably (temp file, fsync, rename).

        Raises:
            OSError: when it cannot be written (the old checkpoint stays).
        """
        body = {
            "version": VERSION,
            "taken": self.taken,
            "taken_ns": self.taken_ns,
            "files": self.files,
            "positions": self.positions,
        }
        fsio.atomic_write(path, json.dumps(body, ensure_ascii=True, sort_keys=True).encode("ascii"))

    def changes(self, folder: Path) -> list[tuple[str, str]]:
        """Every covered file that differs from its mark: (name, how)."""
        found = []
        for name, marked in sorted(self.files.items()):
            how = changed(folder / name, marked)
            if how:
                found.append((name, how))
        return found
