"""The tiering listing: each identity entry and note with how often recall found it (M5d section 4.4;
DESIGN 10.4 and 11).

What is counted: every line of the recall log (``recalls/YYYY-MM.jsonl``) made by an agent session
names its hits by their stable source keys; an item's count is how many such lines name its key, and
its last-found time is the ``time`` of the newest of them (``YYYY-MM-DDTHH:MM:SSZ``). Lines marked
``owner`` or ``bench``, and lines of the session ``owner``, do not count. A line that is not a JSON
object with ``time``, ``session``, ``hits``, ``owner`` and ``bench`` of the right types is skipped
and counted as damaged, never fatal.

Notes are named by `notes.Note.key` (``note/<position>/<header time>``), the key recall logs them by.
Identity entries are not indexed, so recall never names them: their key is
``entry/<file>/<first 16 hex digits of the SHA-256 of the text>`` and their count is 0 unless a log
line names that key.

The listing's label is the strictest label of what it shows (DESIGN 11): at least private; the class
of every note whose text is shown; untrusted only when an untrusted note's text is shown. Untrusted
notes are listed by key and header only unless the caller asks for their text.

In ``text`` every header starts a line and every body line is indented by two spaces and escaped
(`proto.escape`), so no entry or note can pass for another item's header.

Pure functions.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from boxmaker.memoryd.files.notes import Note
from boxmaker.memoryd.sentences.review import more_notes
from boxmaker.proto.escape import escape, escape_line
from boxmaker.proto.labels import DataClass, Label

_TIME = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}Z")
#: Indent of every body line in ``text``.
INDENT = "  "


@dataclass(frozen=True, slots=True)
class Found:
    """How often agent recalls named one key, and the time of the newest ("" for never)."""

    count: int = 0
    last: str = ""


@dataclass(frozen=True, slots=True)
class Tally:
    """The recall log read: `found` by source key, and how many lines were skipped as damaged."""

    found: dict[str, Found]
    damaged: int = 0


def tally(lines: Iterable[str]) -> Tally:
    """Count the hits of agent sessions' recalls, by source key, over recall-log lines."""
    counts: dict[str, int] = {}
    newest: dict[str, str] = {}
    damaged = 0
    for line in lines:
        parsed = _parse(line)
        if parsed is None:
            damaged += 1
            continue
        time, keys, counted = parsed
        if not counted:
            continue
        for key in keys:
            counts[key] = counts.get(key, 0) + 1
            newest[key] = max(newest.get(key, ""), time)
    return Tally({key: Found(n, newest[key]) for key, n in counts.items()}, damaged)


def _parse(line: str) -> tuple[str, set[str], bool] | None:
    """(time, keys, counts toward tiers) of one log line, or None when it cannot be used."""
    try:
        value = json.loads(line)
    except ValueError:
        return None
    if not isinstance(value, dict):
        return None
    time, session, hits = value.get("time"), value.get("session"), value.get("hits")
    owner, bench = value.get("owner"), value.get("bench")
    if not (isinstance(time, str) and _TIME.fullmatch(time) and isinstance(session, str)):
        return None
    if not (isinstance(hits, list) and all(isinstance(h, str) for h in hits)):
        return None
    if not (isinstance(owner, bool) and isinstance(bench, bool)):
        return None
    return time, set(hits), not (owner or bench or session == "owner")


def entry_key(file: str, text: str) -> str:
    """The stable key of an identity entry: ``entry/memory.md/<16 hex digits>`` (its text's SHA-256)."""
    return f"entry/{file}/{hashlib.sha256(text.encode('utf-8', 'surrogatepass')).hexdigest()[:16]}"


@dataclass(frozen=True, slots=True)
class Listing:
    """The listing as `memory_admin_reply` carries it: owner/agent-readable `text`, and `data`."""

    text: str
    data: dict[str, Any]


#: Notes a page holds when the caller names no limit (`listing`).
DEFAULT_PAGE = 200
#: The most notes one page holds, whatever the limit asked.
MAX_PAGE = 5_000
#: The most bytes a page's notes take in the reply frame (their text twice, once in ``text`` and once in
#: ``data``, JSON-escaped at worst), so a reply fits `proto.frame.MAX_FRAME` (4 MiB) whatever the notes
#: hold, with room for the identity entries (at most 3,575 characters) and the envelope.
PAGE_BYTES = 3 * 1024 * 1024


def listing(
    files: Sequence[tuple[str, Sequence[str]]],
    notes: Sequence[Note],
    tallied: Tally,
    *,
    untrusted: bool,
    offset: int = 0,
    limit: int = DEFAULT_PAGE,
) -> Listing:
    """Every identity entry and one page of notes, with counts (see the module docstring).

    Args:
        files: (file name, entries) of memory.md and user.md, in that order.
        notes: notes.md's entries (`notes.parse`), withdrawn ones already left out.
        tallied: the recall log's counts (`tally`).
        untrusted: True to include the text of untrusted notes (the listing is then untrusted).
        offset: how many notes of the whole order (most found first, then newest) to skip.
        limit: the most notes to show (1 or more; at most `MAX_PAGE`); the page also ends before its
            notes would take more than `PAGE_BYTES` of the frame (always at least one note).

    Returns:
        ``data`` is ``{"label": {"class", "untrusted"}, "entries": [{"file", "key", "count",
        "last_found", "text"}], "notes": [{"file", "key", "kind", "time", "session", "origin",
        "label", "untrusted", "count", "last_found", "text"}], "damaged_lines": int, "offset": int,
        "notes_total": int, "next_offset": int or null}``; a withheld note's ``text`` is null;
        ``last_found`` is null when never found; ``next_offset`` is the offset of the next page, null
        on the last. Entries keep file order (most found first) and come on every page; notes go most
        found first, then newest. The label is the strictest of what this page shows. The text of a
        page that does not end the listing ends with `more_notes`.
    """
    label = Label(DataClass.PRIVATE, False)
    entries = [_entry(name, text, tallied) for name, texts in files for text in texts]
    entries.sort(key=lambda e: -int(e["count"]))
    found = tallied.found
    none = Found()
    keys = [(found.get(note.key, none).count, note.time, note.position) for note in notes]
    order = sorted(range(len(notes)), key=keys.__getitem__, reverse=True)
    start = min(max(offset, 0), len(order))
    rows: list[dict[str, Any]] = []
    chunks: list[str] = []
    spent = 0
    for at in order[start : start + max(1, min(limit, MAX_PAGE))]:
        note = notes[at]
        shown = untrusted or not note.label.untrusted
        row = _note(note, tallied, shown)
        chunk = _note_text(row)
        size = 2 * len(chunk.encode("utf-8", "surrogatepass")) + len(json.dumps(row))
        if rows and spent + size > PAGE_BYTES:
            break
        spent += size
        if shown:
            label = label.stricter(note.label)
        rows.append(row)
        chunks.append(chunk)
    after = start + len(rows)
    more = len(order) - after
    data = {
        "label": {"class": label.data_class.value, "untrusted": label.untrusted},
        "entries": entries,
        "notes": rows,
        "damaged_lines": tallied.damaged,
        "offset": start,
        "notes_total": len(order),
        "next_offset": after if more else None,
    }
    text = _text(files, entries=entries, chunks=chunks, label=label, damaged=tallied.damaged, offset=start)
    if more:
        text += "\n" + more_notes(more, after)
    return Listing(text, data)


def _entry(file: str, text: str, tallied: Tally) -> dict[str, Any]:
    key = entry_key(file, text)
    found = tallied.found.get(key, Found())
    return {"file": file, "key": key, "count": found.count, "last_found": found.last or None, "text": text}


def _note(note: Note, tallied: Tally, shown: bool) -> dict[str, Any]:
    found = tallied.found.get(note.key, Found())
    return {
        "file": "notes.md",
        "key": note.key,
        "kind": note.kind,
        "time": note.time or None,
        "session": note.session,
        "origin": note.source or None,
        "label": {"class": note.label.data_class.value, "untrusted": note.label.untrusted},
        "untrusted": note.label.untrusted,
        "count": found.count,
        "last_found": found.last or None,
        "text": note.text if shown else None,
    }


def _hits(row: dict[str, Any]) -> str:
    count = int(row["count"])
    found = f", last found {row['last_found']}" if row["last_found"] else ""
    return f"{count:,} {'hit' if count == 1 else 'hits'}{found}"


def _body(text: str) -> str:
    return "\n".join(INDENT + line for line in escape(text).split("\n"))


def _note_header(row: dict[str, Any]) -> str:
    when = row["time"] or "(no time)"
    where = f"from {row['origin']} " if row["origin"] else ""
    head = f"{row['kind']} {when} {where}in session {row['session']} · {row['label']['class']}"
    if row["untrusted"]:
        head += " · untrusted"
    return escape_line(f"[{row['key']}] {_hits(row)} · {head}")


def _note_text(row: dict[str, Any]) -> str:
    if row["text"] is None:
        return f"{_note_header(row)} · text withheld (untrusted)"
    return f"{_note_header(row)}\n{_body(row['text'])}"


def _text(
    files: Sequence[tuple[str, Sequence[str]]],
    *,
    entries: list[dict[str, Any]],
    chunks: list[str],
    label: Label,
    damaged: int,
    offset: int,
) -> str:
    strictest = label.data_class.value + (" · untrusted" if label.untrusted else "")
    lines = [
        f"label: {strictest}",
        "hits count recalls made by agent sessions (owner searches and benchmark runs left out)",
    ]
    if damaged:
        lines.append(f"{damaged:,} damaged recall-log {'line was' if damaged == 1 else 'lines were'} skipped")
    for name, _ in files:
        lines.append(f"# {name}")
        mine = [e for e in entries if e["file"] == name]
        lines += [f"[{e['key']}] {_hits(e)}\n{_body(e['text'])}" for e in mine] or ["(empty)"]
    lines.append(f"# notes.md (from {offset + 1:,})" if offset else "# notes.md")
    lines += chunks
    if not chunks:
        lines.append("(empty)")
    return "\n".join(lines)
