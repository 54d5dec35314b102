"""Replay the operation log: rebuild memory's files from the edit journal alone (seed 003 section 7.1
capability 5, "it must be replayable"; DESIGN 8).

`replay(journal_lines, into)` takes the journal lines oldest first and writes, under `into` (a
``memory/``-like folder), from each line:

- ``notes`` ([{header, text}]): the notes.md entries it appended, rendered as the writer renders them;
- ``after``, on a line whose ``where`` is memory.md, user.md or conventions.md (an identity edit, an
  accepted proposal, an undo, a ``revert`` of any of them: `write.revert`): that file's whole text;
- ``proposals``: the proposal and decision events appended to proposals.jsonl (`proposals`; a revert
  of an accepted proposal's rule carries its ``reverted`` decision here);
- ``controls``: the WithdrawalRecords appended to controls.jsonl;
- ``events``: the item events appended to items.jsonl (autodream's ``cool``, ``warm``, ``merge`` and
  ``assign`` too: the fold gives them their meaning); for each ``archive`` event, the archive file's
  append, rendered from the fold as it stood before the event with the archive's own renderer
  (`archive.render_append`);
- ``feedback``: the metamemory feedback events appended to feedback.jsonl (`review.feedback`);
- ``tombstone`` and ``identity``, on an erasure's line: the tombstone appended to erasures.jsonl, and
  memory.md and user.md as the erasure left them;

then the projections (`projections.render`) from the final fold, with the exclusion `exclusion_for`
gives for `into` (memoryd passes its controls' exclusion; nothing excluded by default).

What the journal does not hold is not rebuilt: soul.md, conventions.md as typed by hand (until an
accepted proposal's line records its whole text), text typed into notes.md by hand, pending.jsonl,
dream/ (staged autodream passes), recalls/ and the index. An erasure scrubs the journal with the
files, so a replay after one reproduces the scrubbed files.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from boxmaker.memoryd.files import names
from boxmaker.memoryd.files.entries import BY_NAME, CONVENTIONS, file_content
from boxmaker.memoryd.files.journal import Journal, encode_line
from boxmaker.memoryd.files.names import (
    CONTROLS_FILE,
    ERASURES_FILE,
    FEEDBACK_FILE,
    ITEMS_FILE,
    PROPOSALS_FILE,
)
from boxmaker.memoryd.items import archive, projections
from boxmaker.memoryd.items.store import Item, apply_logged
from boxmaker.memoryd.sentences import Refusal
from boxmaker.memoryd.sentences import files as files_sentences
from boxmaker.proto import fsio

ExclusionFor = Callable[[Path], Callable[[Item], bool]]


def _nothing(folder: Path) -> Callable[[Item], bool]:
    del folder
    return projections.nothing_excluded


def replay(
    journal_lines: Iterable[dict[str, Any]], into: Path, exclusion_for: ExclusionFor = _nothing
) -> None:
    """Rebuild items.jsonl, controls.jsonl, proposals.jsonl, notes.md, memory.md, user.md, conventions.md,
    archive/ and the projections under `into` (created 0700 when missing; it should be empty) from
    `journal_lines`, oldest first.

    Raises:
        OSError: when a file cannot be written.
    """
    fsio.ensure_dir(into)
    for name in ("conventions.md", "memory.md", "user.md", "notes.md"):
        fsio.ensure_file(into / name)
    state: dict[str, Item] = {}  # the fold so far, one event at a time (a fold per archive was quadratic)
    applied = 0
    for line in journal_lines:
        notes = line.get("notes")
        if isinstance(notes, list) and notes:
            data = "".join(f"{n['header']}\n{n['text']}\n\n" for n in notes).encode("utf-8")
            if not fsio.ends_with_newline(into / "notes.md"):
                data = b"\n" + data
            fsio.append_bytes(into / "notes.md", data)
        where, after = line.get("where"), line.get("after")
        if where in (*BY_NAME, CONVENTIONS.name) and isinstance(after, list):
            fsio.atomic_write(into / str(where), file_content([str(a) for a in after]).encode("utf-8"))
        identity = line.get("identity")
        if isinstance(identity, dict):
            for name, entries in identity.items():
                if name in BY_NAME and isinstance(entries, list):
                    content = file_content([str(e) for e in entries])
                    fsio.atomic_write(into / str(name), content.encode("utf-8"))
        tombstone = line.get("tombstone")
        if isinstance(tombstone, dict):
            fsio.append_bytes(into / ERASURES_FILE, encode_line(tombstone) + b"\n")
        proposed = line.get("proposals")
        if isinstance(proposed, list) and proposed:
            fsio.append_bytes(into / PROPOSALS_FILE, b"".join(encode_line(p) + b"\n" for p in proposed))
        feedback = line.get("feedback")
        if isinstance(feedback, list) and feedback:
            fsio.append_bytes(into / FEEDBACK_FILE, b"".join(encode_line(e) + b"\n" for e in feedback))
        controls = line.get("controls")
        if isinstance(controls, list) and controls:
            fsio.append_bytes(into / CONTROLS_FILE, b"".join(encode_line(c) + b"\n" for c in controls))
        new = line.get("events")
        if not isinstance(new, list) or not new:
            continue
        for event in new:
            if event.get("event") == "archive":
                found = [state[i] for i in event.get("ids", []) if i in state]
                file = str(event["file"])
                fsio.ensure_dir(into / names.ARCHIVE_DIR)
                fsio.append_bytes(into / file, archive.render_append(into, file, found))
            applied += 1
            apply_logged(state, event, applied)
        fsio.append_bytes(into / ITEMS_FILE, b"".join(encode_line(e) + b"\n" for e in new))
    rendered = projections.render(state.values(), exclusion_for(into))
    projections.write(into, rendered)


def replay_into(journal: Journal, folder: Path, exclusion_for: ExclusionFor) -> list[str] | Refusal:
    """Replay the whole journal into `folder` (new or empty; ``bxctl memory replay --into``); returns the
    files written there, relative to it, or the refusal (a folder that is not empty, or a write that
    failed)."""
    if folder.exists() and (not folder.is_dir() or any(folder.iterdir())):
        return files_sentences.replay_not_empty(str(folder))
    folder = folder.resolve()  # the owner's own link to the folder is followed once; files inside never
    lines = list(journal.entries_newest_first())
    lines.reverse()
    try:
        replay(lines, folder, exclusion_for)
    except OSError as exc:
        return files_sentences.unwritable(str(folder), exc.strerror or str(exc))
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file())
