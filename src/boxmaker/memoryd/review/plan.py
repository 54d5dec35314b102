"""``bxctl memory review``: a cleanup plan that changes nothing (seed 003 section 16, memory:L4;
checklist 9).

`gather` reads the item store, the controls, the identity files, soul.md (and conventions.md
when there is one), notes.md (only its legacy notes and those holding a legacy marker:
`Store.legacy_or_marked_notes`), index.md and topics/, the journal and feedback.jsonl, and `build`
turns them into sections, in this order, each with its rows and what the owner does about them (a
command; nothing here runs one):

1. ``misleading``: items with repeated misleading feedback (at least `feedback.CANDIDATE_AT`),
   most misleading first (then most by the owner): each is a candidate for a proposal, never changed
   by its feedback (seed 23.3-23.5; self-ratings by sessions are counted apart, as weak evidence);
2. ``index``: index.md's length against about 200 lines (seed 10);
3. ``pending-cleanup``: items marked pending-cleanup, and legacy ``[待清理]``/``[待确认]`` markers
   in notes and identity entries (only the owner clears them, seed 9 and 16);
4. ``duplicates``: items of one kind and topic whose normalised text (NFKC, case folded, punctuation
   and spacing collapsed) is identical, or for knowledge near-identical (`NEAR`, difflib's ratio; two
   state values that differ a little are different values: a conflict, not a duplicate);
5. ``conflicts``: subjects with two or more active state items (seed 15.2.1);
6. ``boundary``: identity entries and active knowledge items that read like standing rules
   (``always``, ``never``, ``from now on``, …: candidates for a proposal into conventions.md), and
   soul.md / conventions.md lines that read like one-off incidents with a date (they belong in memory);
7. ``withdrawals``: withdrawal chains that conflict or are in force (the controls listing), and any
   withdrawn item id still found in index.md or topics/ (which must not happen);
8. ``archive``: archive files with items no ``autodream`` journal line's ``ids`` names (no pass's
   dream-input showed them: `dream.inputs.undistilled`, the scope dream-input pages through); withdrawn
   items are not counted as missing work;
9. ``schema``: items missing kind or Source, and legacy notes (notes.md entries without an item id:
   schema drift, seed 16 items 7-8);
10. ``triggers``: topics whose items give no scope or subject, so index.md can only name the topic.

Withdrawn items (seed 12.2) are left out of every section but the controls' own. Nothing is written:
not memory/, not the index, not the recall log. ``data``: ``{"changed": false, "sections": [{"name",
"title", "count", "do", "rows", "more", "see"}]}``. Each section shows at most `SHOWN` rows, in text and
data (``count`` is every row, ``more`` the rest, ``see`` the command listing them; the text says ``… and
K more; see <command>``), and a row's id list at most `ROW_IDS` (``items_count`` all), so the reply stays
far under the frame limit whatever the home's size; identical duplicates pair with the first item of
their text (not every pair).
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

from boxmaker.memoryd.dream import inputs
from boxmaker.memoryd.files import names
from boxmaker.memoryd.files.entries import CONVENTIONS, IDENTITY_FILES
from boxmaker.memoryd.files.store import FileOverLimit, Store
from boxmaker.memoryd.review.feedback import read_feedback
from boxmaker.memoryd.review.sections import LEGACY_MARKERS, Inputs, Section, build
from boxmaker.memoryd.withdrawal.controls import Controls, withdrawn_identity
from boxmaker.memoryd.write.writer import Writer


def gather(writer: Writer, controls: Controls) -> Inputs:
    """Read what the plan needs (nothing is written): the item store, the files and the journal through
    `writer`, the withdrawals through `controls`.

    Raises:
        OSError, FileUnreadable: a file cannot be read.
    """
    store = writer.store
    folder = store.dir
    exclusion = controls.exclusion()
    chains = controls.chains()
    identity = {spec.name: store.read_identity(spec).entries for spec in IDENTITY_FILES.values()}
    conventions_path = folder / CONVENTIONS.name
    generated = {names.INDEX_FILE: _read(folder / names.INDEX_FILE)}
    topics = folder / names.TOPICS_DIR
    if (exclusion or any(c.state != "reinstated" for c in chains)) and topics.is_dir():
        for page in sorted(topics.glob("*.md")):  # read only when a withdrawn id could show in one
            generated[f"{names.TOPICS_DIR}/{page.name}"] = _read(page)
    withdrawn = bool(exclusion or exclusion.note_keys)
    return Inputs(
        items=writer.items.items(),
        excluded=exclusion.item if withdrawn else _nothing,
        chains=chains,
        identity=identity,
        withdrawn_entries=withdrawn_identity(controls, store, writer.journal, identity),
        soul=_soul(store),
        conventions=_read(conventions_path) if conventions_path.is_file() else None,
        notes=store.legacy_or_marked_notes(LEGACY_MARKERS),
        note_excluded=exclusion.note if withdrawn else _nothing,
        index_text=generated[names.INDEX_FILE],
        generated=generated,
        events=(),
        shown=frozenset(inputs.shown_now(writer.journal.edits_dir)),
        feedback=read_feedback(folder),
    )


def _nothing(found: object) -> bool:
    """What is withdrawn when nothing is (no withdrawal in force): nothing."""
    del found
    return False


def _soul(store: Store) -> str:
    try:
        return store.read_soul()
    except FileOverLimit:
        return store.read_text(store.soul_path)


def _read(path: Path) -> str:
    try:
        return path.read_bytes().decode("utf-8", errors="replace")
    except FileNotFoundError:
        return ""


def render(sections: Iterable[Section]) -> str:
    """The plan as text: a heading, then each section numbered with its rows and what to do."""
    out = ["Review plan: nothing was changed; each step below is a command for you to run.", ""]
    for number, section in enumerate(sections, start=1):
        count = section.summary or (f"{len(section.rows):,}" if section.rows else "none")
        out.append(f"{number}. {section.title}: {count}")
        out += [f"   - {line}" for line in section.text_lines()]
        out.append(f"   Do: {section.do if section.rows else 'nothing to do'}")
    return "\n".join(out)


def review(writer: Writer, controls: Controls) -> tuple[str, dict[str, Any]]:
    """The plan's text and data (`gather`, `build`, `render`).

    Raises:
        OSError, FileUnreadable: a file cannot be read.
    """
    sections = build(gather(writer, controls))
    return render(sections), {"code": "ok", "changed": False, "sections": [s.data() for s in sections]}
