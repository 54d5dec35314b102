"""Hermes Agent (NousResearch/hermes-agent): its memory files and its sessions (issue 17).

PATH is a Hermes home (``~/.hermes`` or a profile's folder: ``memories/`` and ``state.db``) or its
``memories/`` folder.

- ``memories/MEMORY.md`` and ``USER.md``: entries separated by a line holding only ``§`` (the same
  separator and the same 2,200 and 1,375 character limits as memory.md and user.md); each entry is an
  entry for memory.md or user.md.
- ``SOUL.md`` and ``AGENTS.md`` in the home, when present, are instructions: shown to the owner as
  suggestions for soul.md or conventions.md, never stored.
- ``state.db`` (SQLite, opened read-only): schema version 30 (the ``schema_version`` table; the
  fixtures follow it), any other version is refused. Each session with messages is a conversation:
  its visible messages (``active`` or ``compacted``, not compaction summaries), in time order; ``user``
  is the owner's turn, ``assistant`` a reply with its ``tool_calls`` (OpenAI's shape), ``tool`` an
  untrusted tool result; ``system`` rows are left out. Times are epoch seconds (REAL), kept in UTC.
  ``content``, ``reasoning_content``, ``tool_name`` and ``tool_call_id`` are text or NULL: a blob there
  refuses the import, naming the message and the column.
"""

from __future__ import annotations

import json
import sqlite3
import time
from pathlib import Path
from typing import Any

from boxmaker.bxctl.imports.parsed import (
    Conversation,
    Entry,
    Malformed,
    Parsed,
    Suggestion,
    from_epoch,
    loads,
    read_text,
)

#: The state.db schema version this reader follows (hermes_state_common.SCHEMA_VERSION).
SCHEMA_VERSION = 30

_FILES = (("MEMORY.md", "memory"), ("USER.md", "user"))


def parse(path: Path) -> Parsed:
    """Read a Hermes home or its memories/ folder (module docstring).

    Raises:
        Malformed: a file cannot be read, or state.db is not a Hermes database of schema version 30.
    """
    memories = path if (path / "MEMORY.md").exists() or (path / "USER.md").exists() else path / "memories"
    db = path / "state.db"
    if not memories.is_dir() and not db.is_file():
        raise Malformed(path, "", "holds neither memories/MEMORY.md, memories/USER.md nor state.db")
    parsed = Parsed()
    for name, file in _FILES:
        source = memories / name
        if source.is_file():
            parsed.entries.extend(entries(source, file))
    if db.is_file():
        parsed.conversations.extend(sessions(db))
    for name in ("SOUL.md", "AGENTS.md"):
        instructions = memories.parent / name
        if instructions.is_file() and read_text(instructions).strip():
            parsed.suggestions.append(
                Suggestion(str(instructions), read_text(instructions).strip(), "soul.md or conventions.md")
            )
    return parsed


def entries(path: Path, file: str) -> list[Entry]:
    """The entries of a Hermes memory file: split on lines holding only ``§``, trimmed, empty ones left
    out."""
    text = read_text(path).replace("\r\n", "\n")
    found: list[Entry] = []
    current: list[str] = []
    number = 0

    def flush() -> None:
        nonlocal number
        body = "\n".join(current).strip()
        current.clear()
        if body:
            number += 1
            found.append(Entry(file, body, f"{path.parent.name}/{path.name} entry {number}"))

    for line in text.split("\n"):
        if line.strip() == "§":
            flush()
        else:
            current.append(line)
    flush()
    return found


def sessions(path: Path) -> list[Conversation]:
    """The sessions of a state.db (module docstring).

    Raises:
        Malformed: not a readable Hermes database, or another schema version.
    """
    conn = _open(path)
    try:
        version = _version(conn, path)
        if version != SCHEMA_VERSION:
            raise Malformed(
                path,
                "table schema_version",
                f"Hermes schema version {version} is not the one bxctl reads ({SCHEMA_VERSION})",
            )
        try:
            rows = conn.execute(
                "SELECT id, title, started_at FROM sessions ORDER BY started_at, id"
            ).fetchall()
            found = [_session(conn, path, row) for row in rows]
        except sqlite3.Error as exc:
            raise Malformed(path, "tables sessions and messages", f"not readable ({exc})") from None
    finally:
        conn.close()
    return [c for c in found if c.records]


def _open(path: Path) -> sqlite3.Connection:
    """state.db opened read-only; a transient I/O error (a WAL writer's checkpoint) is tried again."""
    for attempt in range(4):
        try:
            # as a URI with the path percent-encoded: a ``?`` or ``#`` in it would otherwise end the
            # file name, and sqlite would open (and create) another file, read-write
            conn = sqlite3.connect(f"{path.absolute().as_uri()}?mode=ro", uri=True, timeout=5.0)
            conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
            return conn
        except sqlite3.OperationalError as exc:
            if "disk I/O" not in str(exc) or attempt == 3:
                raise Malformed(path, "", f"not a readable SQLite database ({exc})") from None
            time.sleep(0.05 * (attempt + 1))
        except sqlite3.DatabaseError as exc:
            raise Malformed(path, "", f"not a readable SQLite database ({exc})") from None
    raise Malformed(path, "", "not a readable SQLite database")


def _version(conn: sqlite3.Connection, path: Path) -> int:
    try:
        row = conn.execute("SELECT max(version) FROM schema_version").fetchone()
    except sqlite3.Error:
        raise Malformed(path, "", "has no schema_version table: not a Hermes state.db") from None
    if row is None or not isinstance(row[0], int):
        raise Malformed(path, "table schema_version", "holds no version")
    return int(row[0])


def _session(conn: sqlite3.Connection, path: Path, row: tuple[Any, ...]) -> Conversation:
    session, title, started = row
    conversation = Conversation(str(session), str(title or ""), file=path)
    messages = conn.execute(
        "SELECT id, role, content, tool_call_id, tool_calls, tool_name, timestamp, reasoning_content"
        " FROM messages WHERE session_id = ? AND (active = 1 OR compacted = 1) AND _compressed_summary = 0"
        " ORDER BY timestamp, id",
        (session,),
    ).fetchall()
    last = from_epoch(started)
    for ident, role, content, call_id, calls, tool, stamp, reasoning in messages:
        place = f"session {session} message {ident}"
        when = from_epoch(stamp) or last
        if when is None:
            raise Malformed(path, place, "has no time")
        last = when
        if role not in ("user", "assistant", "tool", "system"):
            raise Malformed(path, place, f"has role {role!r}, not user, assistant, tool or system")
        text = _column(path, place, "content", content)
        if role == "user":
            conversation.user(when, text)
        elif role == "assistant":
            thought = _column(path, place, "reasoning_content", reasoning)
            conversation.assistant(when, text or None, _calls(path, place, calls), thought or None)
        elif role == "tool":
            name = _column(path, place, "tool_name", tool) or "tool"
            conversation.tool_result(when, name, _column(path, place, "tool_call_id", call_id), text)
    return conversation


def _column(path: Path, place: str, column: str, value: object) -> str:
    """A text column's value ("" for NULL).

    Raises:
        Malformed: it holds a number or a blob (naming the message and the column).
    """
    if value is None:
        return ""
    if not isinstance(value, str):
        raise Malformed(path, place, f"has a {column} that is {type(value).__name__}, not text")
    return value


def _calls(path: Path, place: str, value: object) -> list[tuple[str, str, str]]:
    """An assistant row's tool_calls (JSON text, OpenAI's shape) as (id, name, arguments)."""
    if value is None or value == "":
        return []
    calls = loads(value, path, place, "tool_calls is") if isinstance(value, (str, bytes)) else value
    if not isinstance(calls, list):
        raise Malformed(path, place, "tool_calls is not a list")
    found = []
    for number, call in enumerate(calls, start=1):
        function = call.get("function") if isinstance(call, dict) else None
        if not isinstance(function, dict) or not isinstance(function.get("name"), str):
            raise Malformed(path, place, f"tool call {number} has no function name")
        arguments = function.get("arguments", "")
        found.append(
            (
                str(call.get("id") or f"call-{number}"),
                function["name"],
                arguments if isinstance(arguments, str) else json.dumps(arguments),
            )
        )
    return found
