"""``bxctl memory verify``: the journal's hash chain, and the files against the journal's replay (issue
19, a tamper-evident journal; `files.chain`; docs/runbook.md ``memory-damaged``).

`verify` reads every journal line, oldest first, and:

- **by the chain** (the journal itself, ``edits/*.jsonl``): each line's commitment from its salt and
  content, and its chain value from the line before (across month files); an erased line (no salt,
  ``erased``) keeps only its link, and each erasure that marks a line must have its own ``erase`` line
  later in the journal; lines without chain fields are accepted only as a prefix (written before the
  chain), and named as such;
- **by replay** (`REPLAYED`): the journal is replayed into a scratch folder (``memory/.verify``, removed
  after; `items.replay`) and each file the journal holds is compared byte for byte with memory/'s:
  items.jsonl, controls.jsonl, proposals.jsonl, feedback.jsonl, erasures.jsonl, notes.md, memory.md,
  user.md, archive/*.md, and conventions.md once a journal line has written it;
- not checked (`NOT_CHECKED`): what the journal does not hold (soul.md, pending.jsonl, recalls/,
  dream/, the index) and what memoryd derives again (index.md, topics/).

It names the first line or file that disagrees, and changes nothing in memory/. With a `head` the owner
recorded earlier, it also says whether that head is the chain value of a line before which nothing
disagrees: then the history up to it is what it was when the head was printed (erasures aside, which
keep every commitment). A process running as the owner can rewrite the whole chain: only a head kept
outside the home proves anything (README, What memoryd guarantees).
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from boxmaker.memoryd.files import chain, checkpoint
from boxmaker.memoryd.files.entries import BY_NAME, CONVENTIONS
from boxmaker.memoryd.files.names import (
    ARCHIVE_DIR,
    CONTROLS_FILE,
    ERASURES_FILE,
    FEEDBACK_FILE,
    ITEMS_FILE,
    NOTES_FILE,
    PROPOSALS_FILE,
    VERIFY_DIR,
)
from boxmaker.memoryd.items.replay import ExclusionFor, replay
from boxmaker.memoryd.sentences import chain as sentences
from boxmaker.memoryd.sentences import damage
from boxmaker.proto import fsio
from boxmaker.proto.startcheck import json_object

#: The files compared with the journal's replay (conventions.md only once the journal wrote it).
REPLAYED = (ITEMS_FILE, CONTROLS_FILE, PROPOSALS_FILE, FEEDBACK_FILE, ERASURES_FILE, NOTES_FILE, *BY_NAME)
#: What verify does not check, and why (the journal does not hold it, or memoryd derives it again).
NOT_CHECKED = (
    "soul.md, pending.jsonl, recalls/, dream/ and the index (the journal does not hold them); "
    "index.md and topics/ (memoryd renders them again from items.jsonl)"
)


@dataclass(frozen=True, slots=True)
class Problem:
    """One thing that disagrees: the file it is in, and the sentence naming it."""

    file: str
    text: str


@dataclass(slots=True)
class Report:
    """What `verify` found.

    Attributes:
        files: the journal's month files, oldest first.
        walk: the chain followed over every line (its head, counts, erased lines).
        prefix: the places of the first and last line of the unchained prefix (empty: none).
        replayed: the files compared with the replay.
        problems: everything that disagrees, the first first.
        head_given / head_at: the head the owner passed, and the line whose chain value it is ("" when
            none is, or none was passed).
    """

    files: list[str]
    walk: chain.Walk
    prefix: list[str] = field(default_factory=list)
    replayed: list[str] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)
    head_given: str = ""
    head_at: str = ""

    @property
    def intact(self) -> bool:
        """True when nothing disagrees."""
        return not self.problems

    def lines(self) -> list[str]:
        """The report as bxctl prints it."""
        walk = self.walk
        out = []
        if self.problems:
            out.append(f"DISAGREES: {self.problems[0].text}")
            out += [f"also: {p.text}" for p in self.problems[1:]]
        span = self.files[0] if len(self.files) == 1 else f"{self.files[0]} to {self.files[-1]}"
        count = f"{len(self.files):,} file{'s' if len(self.files) != 1 else ''}"
        out.append(f"journal: {walk.lines:,} lines in {count} ({span if self.files else 'none'})")
        if self.prefix:
            out.append(
                f"unchained prefix: {walk.unchained:,} lines written before the chain ({self.prefix[0]} to "
                f"{self.prefix[-1]}): accepted, not covered by the chain"
            )
        out.append(f"checked by the chain: {walk.lines - walk.unchained:,} lines of edits/*.jsonl")
        out += [f"erased: {place} by {', '.join(ids)}" for place, ids in walk.erased]
        archive = [name for name in self.replayed if name.startswith(f"{ARCHIVE_DIR}/")]
        named = [name for name in self.replayed if name not in archive]
        named += [f"{ARCHIVE_DIR}/*.md ({len(archive):,} files)"] if archive else []
        out.append(f"checked by replay: {', '.join(named)}")
        out.append(f"not checked: {NOT_CHECKED}")
        if self.head_given and self.head_at:
            out.append(f"recorded head {self.head_given}: {self.head_at}; the history up to it is unchanged")
        out.append(f"head: {walk.head}")
        if self.intact:
            out.append("intact: record the head elsewhere; `bxctl memory verify --head HEAD` proves it later")
        return out

    def data(self) -> dict[str, Any]:
        """The report as ``--json`` prints it."""
        walk = self.walk
        return {
            "code": "ok",
            "intact": self.intact,
            "head": walk.head,
            "files": self.files,
            "lines": walk.lines,
            "chained": walk.lines - walk.unchained,
            "unchained_prefix": {"lines": walk.unchained, "first": self.prefix[0], "last": self.prefix[-1]}
            if self.prefix
            else None,
            "erased": [{"line": place, "erasures": ids} for place, ids in walk.erased],
            "checked_by_chain": self.files,
            "checked_by_replay": self.replayed,
            "not_checked": NOT_CHECKED,
            "problems": [{"file": p.file, "text": p.text} for p in self.problems],
            "head_given": self.head_given or None,
            "head_at": self.head_at or None,
        }


def verify(memory_dir: Path, exclusion_for: ExclusionFor, head: str = "") -> Report:
    """Check the journal's chain and the files against its replay (the caller holds the write lock);
    `head`, when given, a chain value the owner recorded. Changes no file of memory/ (the scratch
    folder is removed).

    Raises:
        OSError: when the scratch folder cannot be written.
    """
    report = Report(checkpoint.journal_files(memory_dir), chain.Walk())
    lines = _walk(memory_dir, report, head)
    scratch = memory_dir / VERIFY_DIR
    shutil.rmtree(scratch, ignore_errors=True)
    try:
        replay(lines, scratch, exclusion_for)
        _compare(memory_dir, scratch, report, lines)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return report


def _walk(memory_dir: Path, report: Report, head: str) -> list[dict[str, Any]]:
    """Follow the chain over every line (problems into `report`); returns the lines, oldest first."""
    walk = report.walk
    found: list[dict[str, Any]] = []
    erasures: dict[str, int] = {}  # erasure id -> index of its erase line
    marked: list[tuple[int, str, str, list[str]]] = []  # (index, file, place, ids) of erased lines
    report.head_given = head
    seen = ""
    for name in report.files:
        try:
            raw_lines, _ = fsio.complete_lines(fsio.read_bytes(memory_dir / name))
        except OSError as exc:
            report.problems.append(Problem(name, f"{name} cannot be read ({exc.strerror or exc})"))
            continue
        for number, raw in enumerate(raw_lines, start=1):
            line = json_object(raw)
            if line is None or "id" not in line:
                report.problems.append(
                    Problem(name, damage.not_a_journal_line(name, _offset(raw_lines, number)))
                )
                continue
            place = sentences.line_place(name, number, str(line["id"]))
            erased_before = len(walk.erased)
            problem = walk.step(line, place)
            if problem:
                report.problems.append(Problem(name, problem))
            elif not chain.is_chained(line):
                report.prefix[1:] = [place]  # the first and the last line of the prefix
            if len(walk.erased) > erased_before:
                marked.append((len(found), name, place, walk.erased[-1][1]))
            tombstone = line.get("tombstone")
            if line.get("action") == "erase" and isinstance(tombstone, dict):
                erasures[str(tombstone.get("erasure_id"))] = len(found)
            if head and walk.head == head and chain.is_chained(line) and not (report.head_at or seen):
                seen = place
                if not report.problems:
                    report.head_at = f"the chain value of {place}"
            found.append(line)
    for index, name, place, ids in marked:
        for erasure_id in ids:
            if erasures.get(erasure_id, -1) <= index:
                report.problems.append(Problem(name, sentences.erased_by_unknown(place, erasure_id)))
    if head and not report.head_at:
        text = sentences.head_before_problem(head, seen) if seen else sentences.head_not_found(head)
        report.problems.append(Problem(report.files[-1] if report.files else "edits/", text))
    return found


def _offset(raw_lines: list[bytes], number: int) -> int:
    return sum(len(r) + 1 for r in raw_lines[: number - 1])


def _compare(memory_dir: Path, scratch: Path, report: Report, lines: list[dict[str, Any]]) -> None:
    """Compare each replayed file with memory/'s (problems into `report`)."""
    names = list(REPLAYED)
    if any(line.get("where") == CONVENTIONS.name and isinstance(line.get("after"), list) for line in lines):
        names.append(CONVENTIONS.name)
    archive = sorted(
        {str(p.relative_to(d)) for d in (memory_dir, scratch) for p in (d / ARCHIVE_DIR).glob("*.md")}
    )
    for name in [*names, *archive]:
        report.replayed.append(name)
        how = _differs(memory_dir / name, scratch / name)
        if how:
            report.problems.append(Problem(name, sentences.file_disagrees(name, how)))


def _differs(actual: Path, replayed: Path) -> str:
    """Where `actual` first differs from `replayed` ("" when they hold the same bytes; a missing file
    reads as empty)."""
    try:
        have = fsio.read_bytes(actual)
    except FileNotFoundError:
        have = b""
    except OSError as exc:
        return f"it cannot be read: {exc.strerror or exc}"
    want = replayed.read_bytes() if replayed.exists() else b""
    if have == want:
        return ""
    mine, theirs = have.split(b"\n"), want.split(b"\n")
    for number, (a, b) in enumerate(zip(mine, theirs, strict=False), start=1):
        if a != b:
            return f"line {number:,} differs"
    if len(mine) > len(theirs):
        return f"{len(mine) - len(theirs):,} lines more than the replay, after line {len(theirs) - 1:,}"
    return f"it ends after line {len(mine) - 1:,}, where the replay has {len(theirs) - 1:,} lines"
