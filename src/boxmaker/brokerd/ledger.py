"""brokerd's records: each session's label and the audit log (M5a section 8; DESIGN 2 and 5).

- ``broker/sessions/<id>.json``: ``{"session", "class", "untrusted", "updated"}``, the highest class the
  session has seen and whether it has read untrusted content. A session starts at
  `SESSION_START_LABEL` (private, trusted). The file is rewritten atomically whenever a result makes
  the label stricter; it never gets laxer. A file that cannot be read or parsed counts as the
  strictest label (secret, untrusted): fail closed.
- ``broker/audit/YYYY-MM.jsonl``: one line per decided call, append-only, fsync'd; fields ``time,
  session, call_id, tool, grant, grant_sha256, decision, approval, code, label``.

Folders 0700, files 0600.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import logging
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from boxmaker.proto import fsio
from boxmaker.proto.labels import SESSION_START_LABEL, DataClass, Label

log = logging.getLogger("boxmaker.brokerd")

#: What an unreadable session file counts as.
STRICTEST = Label(DataClass.SECRET, True)


def utc(moment: dt.datetime) -> str:
    """RFC 3339 in UTC with a ``Z``, to the second."""
    return moment.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def label_json(label: Label | None) -> dict[str, Any] | None:
    """A label as JSON data (None stays None)."""
    return None if label is None else {"class": label.data_class.value, "untrusted": label.untrusted}


class SessionLabels:
    """Each session's label, cached in memory and kept in ``broker/sessions/<id>.json``."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self._lock = threading.Lock()
        self._cache: dict[str, Label] = {}

    def get(self, session: str) -> Label:
        """The session's label now (`SESSION_START_LABEL` for a session never seen)."""
        with self._lock:
            return self._get(session)

    def _get(self, session: str) -> Label:
        cached = self._cache.get(session)
        if cached is None:
            cached = self._read(self.folder / f"{session}.json")
            self._cache[session] = cached
        return cached

    def _read(self, path: Path) -> Label:
        try:
            data = json.loads(path.read_bytes())
            return Label(DataClass(data["class"]), bool(data["untrusted"]))
        except FileNotFoundError:
            return SESSION_START_LABEL
        except (OSError, ValueError, KeyError, TypeError) as exc:
            log.error("%s is unreadable (%s); the session counts as secret and untrusted", path, exc)
            return STRICTEST

    def raise_to(self, session: str, label: Label, now: dt.datetime) -> Label:
        """Make the session's label the stricter of it and `label`; write the file when it changed.

        Raises:
            OSError: when the file cannot be written (the label in memory is still raised).
        """
        with self._lock:
            current = self._get(session)
            new = current.stricter(label)
            if new == current:
                return current
            self._cache[session] = new
            record = {"session": session, **(label_json(new) or {}), "updated": utc(now)}
            fsio.ensure_dir(self.folder)
            fsio.atomic_write(self.folder / f"{session}.json", _line(record))
            return new

    def all(self) -> dict[str, Label]:
        """Every session with a file or seen since start, by id."""
        with self._lock:
            names = [p.stem for p in self.folder.glob("*.json")] if self.folder.is_dir() else []
            for name in names:
                self._get(name)
            return dict(sorted(self._cache.items()))


def _line(record: dict[str, Any]) -> bytes:
    return json.dumps(record, ensure_ascii=True, separators=(",", ":")).encode("ascii")


class AuditLog:
    """The append-only audit log under ``broker/audit/`` (one file per month)."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self._lock = threading.Lock()

    def path(self, moment: dt.datetime) -> Path:
        """The month's file: ``audit/YYYY-MM.jsonl``."""
        return self.folder / f"{moment.astimezone(dt.UTC):%Y-%m}.jsonl"

    def append(self, record: dict[str, Any], moment: dt.datetime) -> None:
        """Append one line (fsync'd).

        Raises:
            OSError: when it cannot be written.
        """
        with self._lock:
            fsio.ensure_dir(self.folder)
            fsio.append_line(self.path(moment), _line({"time": utc(moment), **record}))

    @contextlib.contextmanager
    def paused(self) -> Iterator[None]:
        """Hold every append while the caller rewrites the log's files (an erasure)."""
        with self._lock:
            yield
