"""A write recorder for the roles' own processes (tests/test_memoryd_writes.py; issue 13, item 4).

Python imports ``sitecustomize`` at start from any folder on ``PYTHONPATH``, so every process a test
starts with this folder there (bxctl, and the daemons bxctl starts, which inherit the environment)
loads it. When ``BOXMAKER_TEST_WRITES`` names a folder, each process adds an audit hook (PEP 578) that
appends one JSON line to ``<folder>/<pid>.jsonl`` for every event that can create, change or remove a
file: an ``open`` for writing (``open()`` and ``os.open`` with a write, create, append or truncate flag),
a rename or replace (both paths), a remove, a directory made or removed, a mode or time changed, a link,
a truncate, a copy or move by `shutil`, an SQLite database opened other than read-only (SQLite writes
it, and its -wal, -shm and -journal files, from C) and a Unix socket bound. Each line holds the event,
the absolute paths and the process's ``sys.argv`` at that moment (``-m boxmaker.memoryd`` makes it end
in ``memoryd/__main__.py``). An ``os.open`` relative to a folder's descriptor (``dir_fd``, as `proto.fsio`
opens every file, never through a link) raises the ``open`` event with the bare name, so `os.open` is
wrapped to record the folder's path with it (read from ``/proc/self/fd``). Without
``BOXMAKER_TEST_WRITES`` it does nothing.
"""

from __future__ import annotations

import json
import os
import sys
import threading
from typing import Any

#: Audit events that change the file system, and which of their arguments are paths.
_PATH_ARGS = {
    "os.rename": (0, 1),
    "os.replace": (0, 1),
    "os.remove": (0,),
    "os.rmdir": (0,),
    "os.mkdir": (0,),
    "os.chmod": (0,),
    "os.chown": (0,),
    "os.link": (0, 1),
    "os.symlink": (1,),
    "os.truncate": (0,),
    "os.utime": (0,),
    "shutil.rmtree": (0,),
    "shutil.copyfile": (1,),
    "shutil.copytree": (1,),
    "shutil.move": (0, 1),
    "sqlite3.connect": (0,),
    "socket.bind": (1,),
}
_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_APPEND | os.O_TRUNC


def _path(value: Any) -> str | None:
    """An absolute path from an event argument, or None (a file descriptor, an address that is not a
    path, an in-memory database)."""
    if isinstance(value, int) or value is None:
        return None
    try:
        text = os.fsdecode(os.fspath(value))
    except TypeError:
        return None
    if not text or text == ":memory:" or text.startswith("file::memory:") or "\0" in text:
        return None
    return text if os.path.isabs(text) else os.path.join(os.getcwd(), text)


def _written(event: str, args: tuple[Any, ...]) -> list[str]:
    """The paths `event` may write, or []."""
    if event == "open":
        path, mode, flags = [*args, None, None, None][:3]
        by_mode = isinstance(mode, str) and any(c in mode for c in "wax+")
        by_flags = isinstance(flags, int) and flags & _WRITE_FLAGS
        found = _path(path) if by_mode or by_flags else None
        return [found] if found else []
    if event == "sqlite3.connect" and isinstance(args[0], str) and args[0].startswith("file:"):
        path, _, query = args[0][len("file:") :].partition("?")
        if "mode=ro" in query.split("&"):
            return []  # a read-only connection writes nothing
        args = (path,)
    positions = _PATH_ARGS.get(event)
    if positions is None:
        return []
    return [p for p in (_path(args[i]) for i in positions if i < len(args)) if p]


def _install(folder: str) -> None:
    fd = os.open(os.path.join(folder, f"{os.getpid()}.jsonl"), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    busy = threading.local()

    def hook(event: str, args: tuple[Any, ...]) -> None:
        if getattr(busy, "on", False):
            return
        busy.on = True
        try:
            paths = _written(event, args)
            if paths:
                line = {"event": event, "paths": paths, "argv": list(sys.argv), "pid": os.getpid()}
                os.write(fd, (json.dumps(line) + "\n").encode("utf-8"))
        finally:
            busy.on = False

    sys.addaudithook(hook)
    plain_open = os.open

    def open_relative(path: Any, flags: int, mode: int = 0o777, *, dir_fd: int | None = None) -> int:
        if dir_fd is None:
            return plain_open(path, flags, mode)
        if flags & _WRITE_FLAGS and not getattr(busy, "on", False):
            folder = os.readlink(f"/proc/self/fd/{dir_fd}")
            full = os.path.join(folder, os.fsdecode(os.fspath(path)))
            line = {"event": "open", "paths": [full], "argv": list(sys.argv), "pid": os.getpid()}
            os.write(fd, (json.dumps(line) + "\n").encode("utf-8"))
        busy.on = True  # the audit event names only the bare name: recorded above instead
        try:
            return plain_open(path, flags, mode, dir_fd=dir_fd)
        finally:
            busy.on = False

    os.open = open_relative  # type: ignore[assignment]


if os.environ.get("BOXMAKER_TEST_WRITES"):
    _install(os.environ["BOXMAKER_TEST_WRITES"])
