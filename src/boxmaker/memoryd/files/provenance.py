"""Identity entries written before the identity-write rule by a session that held secret data (issue 15
item 1; docs/decisions.md "The identity-write rule").

Journal lines written before the rule carry no ``class``. For each such line that added entries to
memory.md or user.md in a session (never the owner), the session's class at that call is read from its
log: the strictest class of the tool results (and summaries) logged before the assistant record that
made the call (the whole log when that record is not found: never laxer). Entries still in the file
today that such a session added while above private are named to the owner by ``bxctl memory files``,
never silently kept or dropped: the owner keeps them (they stay) or removes them by hand.

Nothing here raises: a log that cannot be read leaves its entries unnamed, with a log line.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from boxmaker.proto import fsio
from boxmaker.proto.ids import OWNER_SESSION, is_session_id
from boxmaker.proto.labels import DataClass
from boxmaker.proto.records import Assistant, RecordError, ToolResult, ToolSummary, read_log

log = logging.getLogger("boxmaker.memoryd.provenance")

_EPOCH_LOG = re.compile(r"^(0|[1-9][0-9]{0,8})\.jsonl\Z")
_WRITES = frozenset({"add", "replace", "consolidate"})


@dataclass(frozen=True, slots=True)
class Unclassed:
    """An entry in an identity file that a session added while it held data above private."""

    file: str
    entry: str
    edit: str
    session: str
    data_class: DataClass


def unclassed_entries(
    lines: Iterable[dict[str, Any]], current: Mapping[str, Sequence[str]], sessions: Path
) -> list[Unclassed]:
    """The entries of `current` (file name → entries now) added by journal `lines` that carry no
    ``class`` and came from a session above private at that call (module docstring)."""
    found: list[Unclassed] = []
    classes: dict[tuple[str, str], DataClass | None] = {}
    for line in lines:
        where, session, call = line.get("where"), str(line.get("session", "")), str(line.get("call", ""))
        if where not in current or "class" in line or line.get("action") not in _WRITES:
            continue
        if session == OWNER_SESSION or not is_session_id(session):
            continue
        before, after = line.get("before"), line.get("after")
        if not isinstance(before, list) or not isinstance(after, list):
            continue
        added = [str(t) for t in after if t not in before and t in current[str(where)]]
        if not added:
            continue
        key = (session, call)
        if key not in classes:
            classes[key] = session_class(sessions / session, call)
        data_class = classes[key]
        if data_class is not None and data_class > DataClass.PRIVATE:
            found += [Unclassed(str(where), t, str(line.get("id", "?")), session, data_class) for t in added]
    return found


def identity_lines(edits_dir: Path, names: Iterable[str]) -> Iterator[dict[str, Any]]:
    """The journal's lines (``edits/*.jsonl``, newest first, complete lines with ``id`` and ``where``) that
    can name one of the files `names` (memory.md, user.md): what `unclassed_entries` reads. Only lines
    holding one of the names are decoded, so a journal of 100,000 notes is read in a blink; a line that
    is not JSON is skipped (the journal's own reader logs it)."""
    wanted = [name.encode("ascii") for name in names]
    for path in sorted(edits_dir.glob("*.jsonl"), reverse=True):
        try:
            lines, _ = fsio.complete_lines(fsio.read_bytes(path))
        except FileNotFoundError:
            continue
        for raw in reversed(lines):
            if not any(name in raw for name in wanted):
                continue
            try:
                value = json.loads(raw)
            except ValueError:
                continue
            if isinstance(value, dict) and "id" in value and "where" in value:
                yield value


def session_class(folder: Path, call: str) -> DataClass | None:
    """The strictest class a session's log shows before the assistant record of `call` (module
    docstring); None when the session has no readable log."""
    try:
        epochs = sorted(int(p.name[:-6]) for p in folder.iterdir() if _EPOCH_LOG.match(p.name))
    except OSError:
        return None
    seen = DataClass.PRIVATE
    read_any = False
    for epoch in epochs:
        try:
            records, _ = read_log(folder / f"{epoch}.jsonl")
        except (OSError, RecordError) as exc:
            log.warning("cannot read %s/%d.jsonl for the class of call %s: %s", folder, epoch, call, exc)
            continue
        read_any = True
        for record in records:
            if isinstance(record, Assistant) and any(c.id == call for c in record.tool_calls):
                return seen
            if isinstance(record, (ToolResult, ToolSummary)):
                seen = max(seen, record.data_class)
    return seen if read_any else None
