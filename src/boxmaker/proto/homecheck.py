"""The start-up check of each role's part of the home: ownership, modes and links (issue 15 items 2
and 11; docs/runbook.md ``home-unsafe``).

A home that another local user could write before the first start stays theirs unless someone looks:
they could replace memory.md, plant notes.md, or put a symbolic link where a file is expected so that a
role reads or writes outside the home. So each role, once per start and before it binds a socket,
walks its part of the home without following links and refuses to start at the first path that is

- a symbolic link where a file or folder is expected (anywhere inside its part; the home itself may be
  a link the owner made, and is checked where it leads),
- owned by another user than the effective uid, or
- writable by its group or by others,

with one sentence naming the path and what is wrong, and the runbook entry (a `startcheck.Finding`, the
same record the content check reports, so both read alike). A path that
does not exist yet is fine: the role creates it with 0700/0600. The walk reads metadata only (``lstat``).

| role | its part (besides the home itself and ``run/``) |
|---|---|
| memoryd | ``memory/``, ``index/`` and ``imports/`` (everything in them), ``run/*-memory/`` |
| brokerd | ``broker/`` and ``grants/`` (everything in them), ``run/*-broker/`` |
| loopd | ``sessions/`` and ``jobs/`` (everything in them), ``run/*-loop/`` |

This is the first half of each role's one start-up check; the second, content damage (a file that no
longer holds what the role wrote), is `proto.startcheck` and the role's own ``startcheck`` module. Both
report a `startcheck.Finding`: one sentence and its runbook entry. An unsafe home stops the role (it
must not read what another user may have planted); damage does not (the role serves what it served
before and names the damage).
What this cannot do: a process of the same user can always read and change the home (DESIGN 2).
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path

from boxmaker.proto.home import Layout
from boxmaker.proto.startcheck import Finding

RUNBOOK = "home-unsafe"


def check_memoryd(layout: Layout) -> Finding | None:
    """memoryd's part of the home (module docstring), or None when it is safe."""
    return _first(layout, (layout.memory, layout.index, layout.imports), "memory")


def check_brokerd(layout: Layout) -> Finding | None:
    """brokerd's part of the home (module docstring), or None when it is safe."""
    return _first(layout, (layout.broker, layout.grants), "broker")


def check_loopd(layout: Layout) -> Finding | None:
    """loopd's part of the home (module docstring), or None when it is safe."""
    return _first(layout, (layout.sessions, layout.jobs), "loop")


def _first(layout: Layout, trees: tuple[Path, ...], role: str) -> Finding | None:
    uid = os.geteuid()
    home = _problem(layout.home, uid, follow=True)
    if home is not None:
        return home
    found = _problem(layout.run, uid, folder=True)
    if found is not None:
        return found
    sockets = tuple(p for p in _children(layout.run) if p.name.endswith(f"-{role}"))
    for tree in (*sockets, *trees):
        for path in _walk(tree):
            found = _problem(path, uid, folder=path == tree)
            if found is not None:
                return found
    return None


def _problem(path: Path, uid: int, *, follow: bool = False, folder: bool = False) -> Finding | None:
    """Why `path` is unsafe, or None (also when it does not exist)."""
    try:
        info = os.stat(path) if follow else os.lstat(path)
    except FileNotFoundError:
        return None
    except OSError as exc:
        return _unsafe(f"{path} cannot be checked: {exc.strerror or exc}")
    if stat.S_ISLNK(info.st_mode):
        kind = "a folder" if folder else "a file or folder"
        return _unsafe(
            f"{path} is a symbolic link where boxmaker expects {kind} of its own; "
            "move the link away and put the real file or folder there"
        )
    if folder and not stat.S_ISDIR(info.st_mode):
        return _unsafe(f"{path} is not a folder; move it away so the role can create its folder")
    if info.st_uid != uid:
        return _unsafe(
            f"{path} is owned by uid {info.st_uid}, not by this user (uid {uid}); another user could "
            "have changed it: check its content, then chown it or start from a new home"
        )
    if info.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        return _unsafe(
            f"{path} is writable by its group or by others (mode {stat.S_IMODE(info.st_mode):04o}); "
            "another user could have changed it: check its content, then chmod go-w it"
        )
    return None


def _unsafe(sentence: str) -> Finding:
    return Finding(what=sentence, runbook=RUNBOOK)


def _children(folder: Path) -> list[Path]:
    try:
        return sorted(Path(entry.path) for entry in os.scandir(folder))
    except (FileNotFoundError, NotADirectoryError):
        return []


def _walk(top: Path) -> Iterator[Path]:
    """`top`, then everything under it, depth first, never following a link (a link is yielded, not
    entered); a folder that cannot be listed is yielded and `_problem` or the role says why later."""
    yield top
    try:
        entries = sorted(os.scandir(top), key=lambda e: e.name)
    except (FileNotFoundError, NotADirectoryError, PermissionError):
        return
    for entry in entries:
        if entry.is_dir(follow_symlinks=False):
            yield from _walk(Path(entry.path))
        else:
            yield Path(entry.path)
