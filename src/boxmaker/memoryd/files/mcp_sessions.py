"""Each MCP session's label, kept durably the way brokerd keeps its sessions' (issue 17; DESIGN 5).

``memory/mcp/<session>.json``: ``{"session", "client", "class", "untrusted", "first", "updated",
"peer_uid", "peer_pid"}``. An MCP session starts at private and untrusted unless the owner's trust in
its client says otherwise (`service` decides the starting label); the file is written when the session
is first seen and rewritten atomically whenever its label gets stricter (a declared taint, the owner's
trust, a recall that returned tainted memory). It never gets laxer: neither a new ``boxmaker-mcp``
process for the same session nor a memoryd restart lowers it. A file that cannot be read or parsed
counts as the strictest label (secret, untrusted): fail closed.

Files 0600 in a 0700 folder; no text of memory is in them (erasure has nothing to scrub).
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from boxmaker.proto import fsio
from boxmaker.proto.labels import DataClass, Label

log = logging.getLogger("boxmaker.memoryd")

#: What an unreadable session file counts as.
STRICTEST = Label(DataClass.SECRET, True)


def utc(moment: dt.datetime) -> str:
    """RFC 3339 in UTC with a ``Z``, to the second."""
    return moment.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass(frozen=True, slots=True)
class McpSession:
    """One MCP session as its file records it."""

    session: str
    client: str
    label: Label
    first: str
    updated: str
    peer_uid: int | None
    peer_pid: int | None

    def data(self) -> dict[str, Any]:
        """As JSON data (the file's shape)."""
        return {
            "session": self.session,
            "client": self.client,
            "class": self.label.data_class.value,
            "untrusted": self.label.untrusted,
            "first": self.first,
            "updated": self.updated,
            "peer_uid": self.peer_uid,
            "peer_pid": self.peer_pid,
        }


class McpSessions:
    """Each MCP session's label, cached in memory and kept in ``memory/mcp/<session>.json``."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self._lock = threading.Lock()
        self._cache: dict[str, McpSession | None] = {}

    def raise_to(
        self, session: str, client: str, label: Label, now: dt.datetime, peer: tuple[int, int] | None
    ) -> Label:
        """Make the session's label the stricter of its recorded one and `label` and return it; the
        file is written when the session is new or its label got stricter. `peer` is (uid, pid).

        Raises:
            OSError: when the file cannot be written (the label in memory is still raised).
        """
        with self._lock:
            current = self._get(session)
            new = label if current is None else current.label.stricter(label)
            if current is not None and new == current.label:
                return new
            when = utc(now)
            uid, pid = peer if peer is not None else (None, None)
            record = McpSession(session, client, new, current.first if current else when, when, uid, pid)
            self._cache[session] = record
            fsio.ensure_dir(self.folder)
            fsio.atomic_write(self.folder / f"{session}.json", _line(record.data()))
            return new

    def all(self) -> list[McpSession]:
        """Every MCP session with a file, in the order of their first call."""
        with self._lock:
            names = sorted(p.stem for p in self.folder.glob("*.json")) if self.folder.is_dir() else []
            found = [s for s in (self._get(name) for name in names) if s is not None]
        return sorted(found, key=lambda s: (s.first, s.session))

    def _get(self, session: str) -> McpSession | None:
        if session not in self._cache:
            self._cache[session] = self._read(session)
        return self._cache[session]

    def _read(self, session: str) -> McpSession | None:
        path = self.folder / f"{session}.json"
        try:
            data = json.loads(fsio.read_bytes(path))
            return McpSession(
                session,
                str(data["client"]),
                Label(DataClass(data["class"]), data["untrusted"] is not False),
                str(data["first"]),
                str(data["updated"]),
                data.get("peer_uid"),
                data.get("peer_pid"),
            )
        except FileNotFoundError:
            return None
        except (OSError, ValueError, KeyError, TypeError) as exc:
            log.error("%s is unreadable (%s); the session counts as secret and untrusted", path, exc)
            client = session[4:-21] if len(session) > 25 else session
            return McpSession(session, client, STRICTEST, "", "", None, None)


def _line(record: dict[str, Any]) -> bytes:
    return json.dumps(record, ensure_ascii=True, separators=(",", ":")).encode("ascii")
