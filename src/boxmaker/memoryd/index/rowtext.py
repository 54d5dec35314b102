"""Hits made from index rows (M5a section 5; DESIGN 10.4; issue 16).

A session row keeps integers only (`walk.Row`: its log, record number, the byte offset of its line, the
part and the label), so a hit's key, kind, role, time, speaker and text are read back from its log line,
with the same `walk.shown_parts` the indexer used, the text cut at `walk.TEXT_LIMIT` and redacted
(`check.secrets.redact`) as the indexer did: what a hit shows is what was indexed. Session logs are
append-only and an erasure rebuilds the index, so the line is the one indexed (its `walk.line_check`
says so); a line that cannot be read back (its log gone or changed underneath, as loopd's scrub of a
live session after an erasure may do) gives no hit and a warning, and the index is built again in the
background (`index.Index`, at most once a minute). Logs are opened without following a link
(`fsio.open_nofollow`), once per log however many of its rows are hits.

Notes keep their text in the index (the `notes` table, JSON), since notes.md is edited by hand.
"""

from __future__ import annotations

import logging
import os
import re
import sqlite3
from collections.abc import Callable, Sequence
from pathlib import Path

import msgspec

from boxmaker.memoryd.check.secrets import redact
from boxmaker.memoryd.index.hits import Hit
from boxmaker.memoryd.index.logfiles import log_place
from boxmaker.memoryd.index.walk import TEXT_LIMIT, line_check, shown_parts
from boxmaker.proto import fsio
from boxmaker.proto.labels import DataClass, Label
from boxmaker.proto.records import decode_record

log = logging.getLogger("boxmaker.memoryd.index")

_ORIGINS = (
    "SELECT o.rowid, l.name, o.record, o.at, o.checked, o.part, o.label FROM origins o"
    " JOIN logs l ON l.id = o.log WHERE o.rowid IN ({})"
)
_NOTES = "SELECT rowid, data FROM notes WHERE rowid IN ({})"
_DECODER = msgspec.json.Decoder(
    tuple[str, str, str, str, int | None, int | None, str, str, str, str, int, str]
)
_CLASSES = (DataClass.PUBLIC, DataClass.PRIVATE, DataClass.SECRET)
_SURROGATE = re.compile("[\ud800-\udfff]")
#: How much of a log line is read at a time, in bytes.
_READ = 16384


def hits(
    conn: sqlite3.Connection,
    sessions: Path,
    rowids: Sequence[int],
    on_stale: Callable[[], None] | None = None,
    imports: Path | None = None,
) -> list[Hit]:
    """The hits of `rowids`, in that order (rows that cannot be read back are left out, and `on_stale`
    is called once). Logs are read from `sessions`, import archives from `imports` (`log_place`).

    Raises:
        sqlite3.Error: when the index cannot be read.
    """
    if not rowids:
        return []
    marks = ",".join("?" * len(rowids))
    found = {int(rowid): _note(data) for rowid, data in conn.execute(_NOTES.format(marks), list(rowids))}
    stale = False
    by_log: dict[str, list[tuple[int, ...]]] = {}
    for rowid, name, *row in conn.execute(_ORIGINS.format(marks), list(rowids)):
        by_log.setdefault(str(name), []).append((int(rowid), *map(int, row)))
    folder = str(sessions)
    for name, rows in by_log.items():
        lines = _lines(*log_place(folder, imports, name), {row[2] for row in rows})
        for rowid, record, at, checked, part, label in rows:
            line = lines.get(at)
            hit = _session_hit(
                name, record, part, label, line if line and line_check(line) == checked else None
            )
            if hit is None:
                stale = True
                log.warning(
                    "memory-index-stale: row %d (%s record %d, byte %d) cannot be read back from the log; "
                    "bxctl reindex builds the index again",
                    rowid,
                    name,
                    record + 1,
                    at,
                )
            else:
                found[rowid] = hit
    if stale and on_stale is not None:
        on_stale()
    return [found[rowid] for rowid in rowids if rowid in found]


def _lines(folder: str, name: str, offsets: set[int]) -> dict[int, bytes]:
    """The line starting at each byte offset of the file `name` in `folder` (without its newline); none
    for a missing file or an offset past its end."""
    try:
        fd = fsio.open_nofollow_in(folder, name, os.O_RDONLY)
    except OSError:
        return {}
    lines: dict[int, bytes] = {}
    try:
        for offset in sorted(offsets):
            pieces: list[bytes] = []
            position = offset
            while True:
                data = os.pread(fd, _READ, position)
                end = data.find(b"\n")
                if end >= 0 or not data:
                    pieces.append(data if end < 0 else data[:end])
                    break
                pieces.append(data)
                position += len(data)
            if pieces and (pieces[0] or len(pieces) > 1):
                lines[offset] = b"".join(pieces)
    except OSError:
        return lines
    finally:
        os.close(fd)
    return lines


def _clean(text: str) -> str:
    """A lone surrogate (possible in a model's text) as U+FFFD, as the index stored it before."""
    return text if text.isascii() or not _SURROGATE.search(text) else _SURROGATE.sub("\ufffd", text)


def _session_hit(name: str, record: int, part: int, label: int, line: bytes | None) -> Hit | None:
    """The hit of one session row from its log line; None when the line is not that row's record."""
    if line is None:
        return None
    try:
        decoded = decode_record(line)
    except ValueError:
        return None
    shown = next((p for p in shown_parts(decoded) if p.part == part), None)
    if shown is None:
        return None
    session, _, file = name.partition("/")
    key = f"session/{session}/{file.removesuffix('.jsonl')}/{record}"
    if shown.role == "call":
        key += f"/{part - 1}"
    return Hit(
        key,
        shown.kind,
        shown.role,
        session,
        _clean(decoded.time),
        _clean(shown.speaker),
        "",
        Label(_CLASSES[label // 2], bool(label % 2)),
        _clean(redact(shown.shown[:TEXT_LIMIT])),
    )


def _note(data: str) -> Hit:
    key, kind, role, session, _, _, time, speaker, origin, data_class, untrusted, text = _DECODER.decode(data)
    return Hit(
        key, kind, role, session, time, speaker, origin, Label(DataClass(data_class), bool(untrusted)), text
    )
