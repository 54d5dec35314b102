"""The content checks of memoryd's start-up check (`startcheck` lists them and what each finds).

Each takes the `State` (read once) and returns `Finding`s: a clause naming the file
(`sentences.damage`), the runbook entry ``memory-damaged`` and what repairs it. What they read is
bounded by what was written since the checkpoint: the journal lines since it, the bytes each of those
lines appended, and a window of each file at the checkpoint's mark.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from boxmaker.memoryd.files import chain, checkpoint
from boxmaker.memoryd.files.entries import BY_NAME, CONVENTIONS
from boxmaker.memoryd.files.journal import Journal
from boxmaker.memoryd.files.names import ERASING, NOTES_FILE, SOUL_FILE
from boxmaker.memoryd.sentences import chain as chain_sentences
from boxmaker.memoryd.sentences import damage
from boxmaker.proto.startcheck import Checkpoint, Finding, json_object, lines_since

#: The files that only memoryd writes, by appending: bytes past the last append are not its own.
ONLY_MEMORYD = tuple(name for name in checkpoint.APPEND_ONLY if name != NOTES_FILE)
#: The files `bxctl memory repair` can restore from the journal.
REPAIRABLE = frozenset({*checkpoint.APPEND_ONLY, *BY_NAME, CONVENTIONS.name})
#: Files the owner edits, which the journal does not hold as they are (checked for damage only).
IDENTITY = (SOUL_FILE, *BY_NAME, CONVENTIONS.name)


@dataclass(frozen=True, slots=True)
class Record:
    """One append a journal line records (``appended``): edit `edit` wrote `size` bytes with hash
    `sha256` to `file` at byte `at`."""

    edit: str
    file: str
    at: int
    size: int
    sha256: str

    @property
    def end(self) -> int:
        """The byte after the append."""
        return self.at + self.size


@dataclass(slots=True)
class State:
    """What the checks read, once: memory/, the last checkpoint, the journal since it.

    Attributes:
        interrupted: the id of an erasure a crash interrupted, else None.
        bad_lines: (journal file, byte) of each line since the checkpoint that is not a journal line.
        records: each append the journal recorded since the checkpoint, oldest first; appends before
            a line that rewrote files in place (an erasure: all; a repair: its file) are left out,
            since the rewrite moved them.
        rewritten: the files rewritten in place since the checkpoint ("*" for every file).
        walk: the journal's chain followed over the lines since the checkpoint (from its chain value).
        broken: (journal file, sentence) of the first line since the checkpoint the chain rejects.
    """

    memory_dir: Path
    checkpoint: Checkpoint | None
    interrupted: str | None
    bad_lines: list[tuple[str, int]] = field(default_factory=list)
    records: list[Record] = field(default_factory=list)
    rewritten: set[str] = field(default_factory=set)
    walk: chain.Walk = field(default_factory=chain.Walk)
    broken: tuple[str, str] | None = None

    @classmethod
    def read(cls, memory_dir: Path, journal: Journal) -> State:
        """Read the checkpoint and the journal lines written since it (all of them without one)."""
        del journal  # the journal's files are read directly, from the checkpoint's position
        state = cls(memory_dir, checkpoint.load(memory_dir), checkpoint.erasing(memory_dir))
        state.walk = _walk_from(state.checkpoint)
        for name, at, raw in _journal_since(memory_dir, state.checkpoint):
            line = json_object(raw)
            if line is None or "id" not in line:
                state.bad_lines.append((name, at))
                continue
            problem = state.walk.step(line, chain_sentences.byte_place(name, at, str(line["id"])))
            if problem and state.broken is None:
                state.broken = (name, problem)
            state.take(line)
        return state

    @property
    def checked(self) -> chain.Checked:
        """What the chain check did (for the log and ``bxctl status``); a line that is not a journal
        line breaks the chain as much as a changed one does (`verify` says so too)."""
        problem = self.broken[1] if self.broken else ""
        if self.bad_lines and not problem:
            problem = damage.not_a_journal_line(*self.bad_lines[0])
        return chain.Checked(self.walk.lines, self.checkpoint is not None, self.walk.head, problem)

    def take(self, line: dict[str, Any]) -> None:
        """Note one journal line: its appends, and a rewrite in place."""
        action = line.get("action")
        if action == "erase":
            self.records.clear()
            self.rewritten.add("*")
        elif action == "repair":
            file = str(line.get("file"))
            self.records = [r for r in self.records if r.file != file]
            self.rewritten.add(file)
        appended = line.get("appended")
        for item in appended if isinstance(appended, list) else []:
            record = _record(str(line["id"]), item)
            if record is not None:
                self.records.append(record)

    def moved(self, file: str) -> bool:
        """True when `file` was rewritten in place since the checkpoint."""
        return "*" in self.rewritten or file in self.rewritten


def _record(edit: str, item: object) -> Record | None:
    if not isinstance(item, dict):
        return None
    file, at, size, sha = item.get("file"), item.get("at"), item.get("bytes"), item.get("sha256")
    if (
        not isinstance(file, str)
        or not isinstance(at, int)
        or not isinstance(size, int)
        or not isinstance(sha, str)
    ):
        return None
    return Record(edit, file, at, size, sha)


def _walk_from(last: Checkpoint | None) -> chain.Walk:
    """A chain walk from the checkpoint's chain value (from `chain.GENESIS` without a checkpoint; not
    anchored when the checkpoint was taken before the chain existed)."""
    if last is None:
        return chain.Walk()
    position = last.positions.get("journal", {})
    value = position.get("chain") if isinstance(position, dict) else None
    if not isinstance(value, str) or not chain.is_head(value):
        return chain.Walk(anchored=False)
    return chain.Walk(head=value, chained=value != chain.GENESIS)


def _journal_since(memory_dir: Path, last: Checkpoint | None) -> list[tuple[str, int, bytes]]:
    """The journal's complete lines after the checkpoint's position, oldest first: (file, byte, line)."""
    position = last.positions.get("journal", {}) if last is not None else {}
    start_file = str(position.get("file", "")) if isinstance(position, dict) else ""
    start_size = int(position.get("size", 0)) if isinstance(position, dict) else 0
    found = []
    for name in checkpoint.journal_files(memory_dir):
        if name < start_file:
            continue
        offset = start_size if name == start_file else 0
        found += [(name, at, raw) for at, raw in lines_since(memory_dir / name, offset)]
    return found


def _finding(what: str, file: str) -> Finding:
    if file in REPAIRABLE:
        repair = damage.REPAIR
    elif file == SOUL_FILE:
        repair = damage.RESTORE_SOUL
    else:
        repair = damage.RESTORE_JOURNAL
    return Finding(what, damage.RUNBOOK, repair, file)


# The checks ------------------------------------------------------------------------------------------


def erasure(state: State) -> list[Finding]:
    """An erasure a crash interrupted: its marker is still there."""
    if state.interrupted is None:
        return []
    what = damage.erasure_interrupted(state.interrupted)
    return [Finding(what, damage.RUNBOOK, damage.ERASE_AGAIN, ERASING)]


def marks(state: State) -> list[Finding]:
    """Files shorter than at the checkpoint, or changed before its mark (not those rewritten in place
    since, by an erasure or a repair)."""
    if state.checkpoint is None:
        return []
    return [
        _finding(damage.since_check(name, how), name)
        for name, how in state.checkpoint.changes(state.memory_dir)
        if not state.moved(name)
    ]


def journal(state: State) -> list[Finding]:
    """Lines of the journal since the checkpoint that are not journal lines (the first per file; none
    in a file `marks` names, whose position the checkpoint no longer knows)."""
    moved = {name for name, _ in state.checkpoint.changes(state.memory_dir)} if state.checkpoint else set()
    found: dict[str, Finding] = {}
    for name, at in state.bad_lines:
        if name not in moved and name not in found:
            found[name] = _finding(damage.not_a_journal_line(name, at), name)
    return list(found.values())


def appends(state: State) -> list[Finding]:
    """Each append since the checkpoint that its file no longer holds (the first per file); reads only
    the bytes those appends wrote."""
    found: list[Finding] = []
    by_file: dict[str, list[Record]] = {}
    for record in state.records:
        by_file.setdefault(record.file, []).append(record)
    for name, records in by_file.items():
        what = _first_missing(state.memory_dir / name, records)
        if what:
            found.append(_finding(what, name))
    return found


def _first_missing(path: Path, records: list[Record]) -> str:
    """How `path` fails the first of `records` it does not hold ("" when it holds them all)."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        first = records[0]
        return damage.cut(first.file, 0, first.edit, first.at, first.end)
    except OSError:
        return damage.altered(records[0].file, records[0].edit, records[0].at)
    try:
        size = os.fstat(fd).st_size
        for record in records:
            if size < record.end:
                return damage.cut(record.file, size, record.edit, record.at, record.end)
            data = os.pread(fd, record.size, record.at)
            if hashlib.sha256(data).hexdigest() != record.sha256:
                return damage.altered(record.file, record.edit, record.at)
    finally:
        os.close(fd)
    return ""


def tails(state: State) -> list[Finding]:
    """Bytes after the last append the journal (or the checkpoint) knows of, in a file only memoryd
    writes."""
    found = []
    for name in ONLY_MEMORYD:
        ends = [r.end for r in state.records if r.file == name]
        if ends:
            end = max(ends)
        elif state.checkpoint is not None and name in state.checkpoint.files and not state.moved(name):
            end = int(state.checkpoint.files[name].get("size", 0))
        else:
            continue
        try:
            size = (state.memory_dir / name).stat().st_size
        except FileNotFoundError:
            continue
        if size > end:
            found.append(_finding(damage.trailing(name, size - end, end), name))
    return found


def chained(state: State) -> list[Finding]:
    """The first line since the checkpoint that the journal's hash chain rejects (a line changed,
    removed, inserted or moved; `files.chain`); the lines before the checkpoint are not read again."""
    if state.broken is None:
        return []
    name, problem = state.broken
    return [Finding(problem, damage.RUNBOOK, chain_sentences.RESTORE_CHAIN, name)]


def gaps(state: State) -> list[Finding]:
    """Bytes between the appends the journal records since the checkpoint (or between the checkpoint's
    mark and the first of them), in a file only memoryd writes: memoryd appends each after the last, so
    a gap is bytes someone else put there (and `tails` no longer sees them once memoryd appended after
    them). The first gap per file."""
    found = []
    for name in ONLY_MEMORYD:
        expected: int | None = None
        if state.checkpoint is not None and name in state.checkpoint.files and not state.moved(name):
            expected = int(state.checkpoint.files[name].get("size", 0))
        for record in (r for r in state.records if r.file == name):
            if expected is not None and record.at > expected:
                found.append(_finding(damage.gap(name, record.at - expected, expected, record.edit), name))
                break
            expected = record.end
    return found


def identity(state: State) -> list[Finding]:
    """soul.md, memory.md, user.md and conventions.md: readable, UTF-8, no NUL byte."""
    found = []
    for name in IDENTITY:
        path = state.memory_dir / name
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            continue
        except OSError as exc:
            found.append(_finding(damage.identity_damaged(name, f"cannot be read ({exc.strerror})"), name))
            continue
        try:
            data.decode("utf-8")
        except UnicodeDecodeError as exc:
            found.append(
                _finding(damage.identity_damaged(name, f"is not UTF-8 (at byte {exc.start:,})"), name)
            )
            continue
        if b"\x00" in data:
            at = data.index(b"\x00")
            found.append(_finding(damage.identity_damaged(name, f"holds NUL bytes (from byte {at:,})"), name))
    return found
