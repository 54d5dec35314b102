"""What both benchmarks share: a temporary home's index, session logs in the project's format, and
percentiles."""

from __future__ import annotations

import datetime as dt
import statistics
from collections.abc import Iterable
from pathlib import Path

from boxmaker.memoryd.index.index import Index
from boxmaker.memoryd.index.recall import Recaller
from boxmaker.proto import fsio
from boxmaker.proto.labels import DataClass
from boxmaker.proto.records import SessionStart, User, encode_record, format_time


def write_session(folder: Path, start: dt.datetime, turns: Iterable[tuple[dt.datetime, str, str]]) -> None:
    """Write ``folder/0.jsonl``: a ``session_start`` at `start`, then one ``user`` record per
    (time, speaker, text) turn."""
    fsio.ensure_dir(folder)
    first = SessionStart(time=format_time(start), epoch=0, slot=None, baseline="sha256:" + "0" * 64)
    lines = [encode_record(first)]
    lines += [encode_record(User(time=format_time(t), content=text, speaker=who)) for t, who, text in turns]
    (folder / "0.jsonl").write_bytes(b"\n".join(lines) + b"\n")


def open_home(home: Path) -> tuple[Index, Recaller]:
    """memoryd's index and recall layer over ``home/sessions`` (the index not yet filled)."""
    fsio.ensure_dir(home / "memory")
    index = Index(
        home / "index" / "memory.sqlite3", home / "sessions", home / "memory" / "notes.md", DataClass.PRIVATE
    )
    index.open()
    return index, Recaller(index, home / "memory" / "recalls", lambda: dt.datetime.now(dt.UTC))


def percentiles(values: list[float]) -> tuple[float, float]:
    """p50 and p99 of `values` (0.0 for none)."""
    if not values:
        return 0.0, 0.0
    ordered = sorted(values)
    return statistics.median(ordered), ordered[min(len(ordered) - 1, int(0.99 * len(ordered)))]
