"""The journal's hash chain (issue 19, a tamper-evident journal; docs/session-log.md, The edit journal).

Every journal line carries three chain fields, added to its other fields:

- ``salt``: 16 fresh random bytes (32 hex digits), drawn for this line;
- ``commitment``: SHA-256 over a fixed prefix, the salt and the line's canonical bytes (`canonical`: the
  line without its chain fields, as compact ASCII JSON with sorted keys), so the line's content
  cannot change without its commitment changing, and the commitment says nothing of the content once
  the salt is gone;
- ``chain``: SHA-256 over a fixed prefix, the previous line's chain value and this line's commitment
  (`link`). The first chained line follows `GENESIS`; the first line of a month's file follows the
  last line of the month before (the chain runs across the files in name order).

The newest line's chain value is the journal's **head**. An erasure removes a covered line's salt
(its content is scrubbed) and marks it ``erased: ["memerase-…"]``; its commitment and chain value
stay, so the chain, and every head recorded before, still verify (seed 003 section 12.3: no digest of
erased content is kept but the salted commitment). Lines written before the chain existed have none
of these fields: they are accepted as an unchained prefix, and only as a prefix.

`Walk` checks lines one at a time, in order, keeping only the previous chain value: O(1) per line.
"""

from __future__ import annotations

import hashlib
import json
import re
import secrets
from dataclasses import dataclass, field
from typing import Any

from boxmaker.memoryd.sentences import chain as sentences

SALT = "salt"
COMMITMENT = "commitment"
CHAIN = "chain"
ERASED = "erased"
#: The fields the chain adds to a journal line; `canonical` leaves them out.
FIELDS = (SALT, COMMITMENT, CHAIN, ERASED)
#: The value the first chained line follows.
GENESIS = "0" * 64

_LINE_PREFIX = b"boxmaker journal line v1\x00"
_CHAIN_PREFIX = b"boxmaker journal chain v1\x00"
_HEX64 = re.compile(r"^[0-9a-f]{64}\Z")
_HEX32 = re.compile(r"^[0-9a-f]{32}\Z")


def canonical(line: dict[str, Any]) -> bytes:
    """The line's bytes the commitment covers: every field but the chain's (`FIELDS`), as compact
    ASCII JSON with sorted keys."""
    body = {k: v for k, v in line.items() if k not in FIELDS}
    return json.dumps(body, ensure_ascii=True, sort_keys=True, separators=(",", ":")).encode("ascii")


def commitment(salt: str, line: dict[str, Any]) -> str:
    """SHA-256 (hex) of the prefix, the salt's 16 bytes and `canonical(line)`."""
    return hashlib.sha256(_LINE_PREFIX + bytes.fromhex(salt) + canonical(line)).hexdigest()


def link(previous: str, commit: str) -> str:
    """The chain value of a line with commitment `commit` after a line with chain value `previous`."""
    return hashlib.sha256(_CHAIN_PREFIX + bytes.fromhex(previous) + bytes.fromhex(commit)).hexdigest()


def seal(line: dict[str, Any], previous: str) -> dict[str, Any]:
    """`line` with its chain fields after `previous` (a fresh salt; chain fields it had are replaced)."""
    salt = secrets.token_hex(16)
    commit = commitment(salt, line)
    body = {k: v for k, v in line.items() if k not in FIELDS}
    return {**body, SALT: salt, COMMITMENT: commit, CHAIN: link(previous, commit)}


def is_chained(line: dict[str, Any]) -> bool:
    """True when the line carries a chain value (it was written with the chain)."""
    return CHAIN in line or COMMITMENT in line


def head_of(line: dict[str, Any] | None) -> str:
    """The chain value after `line` (the newest line): its ``chain``, or `GENESIS` for no line or an
    unchained one."""
    if line is None:
        return GENESIS
    value = line.get(CHAIN)
    return value if isinstance(value, str) and _HEX64.match(value) else GENESIS


def erase(line: dict[str, Any], erasure_id: str) -> dict[str, Any]:
    """A scrubbed line as an erasure leaves it: without its salt, marked erased by `erasure_id` (after
    any earlier erasure that marked it), its commitment and chain value kept. An unchained line is only
    marked."""
    marks = line.get(ERASED)
    ids = [str(m) for m in marks] if isinstance(marks, list) else []
    if erasure_id not in ids:
        ids.append(erasure_id)
    out = {k: v for k, v in line.items() if k != SALT}
    out[ERASED] = ids
    return out


def is_head(value: str) -> bool:
    """True when `value` has the shape of a chain value (64 lowercase hex digits)."""
    return bool(_HEX64.match(value))


@dataclass(slots=True)
class Walk:
    """Checks journal lines in order (`step`), from the chain value `head` (`GENESIS` at the start of the
    journal, the checkpoint's otherwise).

    Attributes:
        head: the chain value after the last line stepped.
        chained: True once a chained line was stepped (an unchained one after it is a problem).
        lines: lines stepped; unchained: of them, unchained (the prefix).
        erased: (place, erasure ids) of every erased line, for `verify` to report and check.
    """

    head: str = GENESIS
    chained: bool = False
    lines: int = 0
    unchained: int = 0
    erased: list[tuple[str, list[str]]] = field(default_factory=list)
    #: False when the walk starts where the chain value before is unknown (a checkpoint taken before
    #: the chain existed): the first chained line's link is then not checked.
    anchored: bool = True

    def step(self, line: dict[str, Any], place: str) -> str:
        """Check one line (`place` names it in a sentence); returns what is wrong ("" when nothing).
        After a problem, the walk goes on from the line's own chain value (when it has one)."""
        self.lines += 1
        if not is_chained(line):
            self.unchained += 1
            marks = line.get(ERASED)
            if isinstance(marks, list) and marks:  # a line of the prefix an erasure scrubbed
                self.erased.append((place, [str(m) for m in marks]))
            return sentences.unchained_after(place) if self.chained else ""
        self.chained = True
        commit, value, salt = line.get(COMMITMENT), line.get(CHAIN), line.get(SALT)
        for name, got in ((COMMITMENT, commit), (CHAIN, value)):
            if not isinstance(got, str) or not _HEX64.match(got):
                return sentences.malformed(place, name)
        assert isinstance(commit, str)
        assert isinstance(value, str)
        previous, self.head = self.head, value
        marks = line.get(ERASED)
        if salt is None:
            if not isinstance(marks, list) or not marks:
                return sentences.unsalted(place)
            self.erased.append((place, [str(m) for m in marks]))
        elif not isinstance(salt, str) or not _HEX32.match(salt):
            return sentences.malformed(place, SALT)
        elif commitment(salt, line) != commit:
            return sentences.changed(place)
        anchored, self.anchored = self.anchored, True
        if anchored and link(previous, commit) != value:
            return sentences.unlinked(place)
        return ""


@dataclass(frozen=True, slots=True)
class Checked:
    """What the start-up check found of the chain: `lines` checked, from the checkpoint (`since`
    True) or from the start of the journal, the `head` after them, and the first `problem` ("")."""

    lines: int
    since: bool
    head: str
    problem: str = ""

    @property
    def sentence(self) -> str:
        """One sentence for the log and ``bxctl status``."""
        return sentences.checked(self.lines, self.since, self.head, self.problem)

    def data(self) -> dict[str, Any]:
        """As ``bxctl status --json`` shows it (``chain``)."""
        return {
            "lines": self.lines,
            "since_checkpoint": self.since,
            "head": self.head,
            "ok": not self.problem,
        }
