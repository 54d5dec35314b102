"""The memory block appended to the system prompt (M5a section 4; DESIGN 10.4).

Exactly::

    # soul.md
    <blank>
    <soul text>
    <blank>
    # conventions.md (0 of 2,000 characters)
    <blank>
    (empty)
    <blank>
    # memory.md (1,474 of 2,200 characters)
    <blank>
    <entries separated by a line "§">
    <blank>
    # user.md (0 of 1,375 characters)
    <blank>
    (empty)

conventions.md (seed 003 sections 8 and 17: the owner's stable rules, hot) comes right after soul.md.
Counts are of the files' text. Each entry of conventions.md, memory.md and user.md is checked again as the
block is built; an entry that fails is left out and reported (`LeftOut`), so the owner can see it. A
withdrawn entry (seed 003 section 12.2: its text equals a withdrawn item's, or a withdrawn session wrote it;
the caller works that out, `withdrawal.controls.withdrawn_identity`) is left out the same way, with rule
``withdrawn``. soul.md is the owner's and is not checked. Pure: the caller reads the files and refuses a
file over its limit (and soul.md with conventions.md over their shared 3,400, `store.steering_problem`).
"""

from __future__ import annotations

from collections.abc import Sequence, Set
from dataclasses import dataclass

from boxmaker.memoryd.check.phrases import has_injection_phrase
from boxmaker.memoryd.check.rules import check_text
from boxmaker.memoryd.files.entries import render_entries
from boxmaker.memoryd.files.store import IdentityFile

EMPTY = "(empty)"


@dataclass(frozen=True, slots=True)
class LeftOut:
    """An entry the block leaves out: its file, the rule that refused it, and the entry."""

    file: str
    rule: str
    entry: str


@dataclass(frozen=True, slots=True)
class Block:
    """The rendered block and the entries it left out."""

    text: str
    left_out: tuple[LeftOut, ...]


#: The rule a withdrawn entry is left out by.
WITHDRAWN = "withdrawn"


def render(soul: str, files: Sequence[IdentityFile], withdrawn: Set[tuple[str, str]] = frozenset()) -> Block:
    """Render the block from soul.md's text and the files after it, in the order given
    (conventions.md, memory.md, user.md), leaving out the `withdrawn` entries ((file name, text)),
    the entries that fail the write check, and the later entry of an injection phrase split over
    entries (`_split_phrases`)."""
    left_out: list[LeftOut] = []
    kept: list[list[str]] = []
    for file in files:
        kept.append([])
        for entry in file.entries:
            if (file.spec.name, entry) in withdrawn:
                left_out.append(LeftOut(file.spec.name, WITHDRAWN, entry))
                continue
            refusal = check_text(entry)
            if refusal is None:
                kept[-1].append(entry)
            else:
                left_out.append(LeftOut(file.spec.name, refusal.rule, entry))
    left_out += _split_phrases(files, kept)
    parts = ["# soul.md", "", soul or EMPTY, *_sections(files, kept)]
    return Block("\n".join(parts), tuple(left_out))


def _sections(files: Sequence[IdentityFile], kept: Sequence[Sequence[str]]) -> list[str]:
    """The lines of the blocks' sections after soul.md: each file's header and its kept entries."""
    parts: list[str] = []
    for file, entries in zip(files, kept, strict=True):
        header = f"# {file.spec.name} ({file.size:,} of {file.spec.limit:,} characters)"
        parts += ["", header, "", render_entries(entries) if entries else EMPTY]
    return parts


def _split_phrases(files: Sequence[IdentityFile], kept: list[list[str]]) -> list[LeftOut]:
    """Check the block as built (issue 15 item 10): entries that each pass the check can still hold an
    injection phrase between them, across the separator or a section header. Entries are added back
    one at a time, in block order; each whose addition completes a phrase is left out (rule
    ``phrase``), so the later of the entries is the one left out. soul.md is the owner's and is not
    part of the text checked."""
    if not has_injection_phrase("\n".join(_sections(files, kept))):
        return []
    left_out: list[LeftOut] = []
    built: list[list[str]] = [[] for _ in files]
    for index, (file, entries) in enumerate(zip(files, kept, strict=True)):
        for entry in entries:
            built[index].append(entry)
            if has_injection_phrase("\n".join(_sections(files, built))):
                built[index].pop()
                left_out.append(LeftOut(file.spec.name, "phrase", entry))
        kept[index][:] = built[index]
    return left_out
