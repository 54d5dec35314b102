"""Checking an owner command's ``arg`` and ``args`` (DESIGN 10.3): a malformed one is an `error` reply
(`InvalidBody`) naming what was wrong, before the command runs.

Every checker raises:
    InvalidBody: with the sentence the owner reads (bxctl prints it and exits 1).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

from boxmaker.memoryd.items.store import is_item_id
from boxmaker.proto.errors import InvalidBody
from boxmaker.proto.messages import MemoryAdmin


def count(arg: str, command: str) -> int:
    """`arg` as a count from 1 to 100,000 (``log N``)."""
    if not re.fullmatch(r"[0-9]{1,6}", arg) or not 1 <= int(arg) <= 100_000:
        raise InvalidBody("memory_admin", f"{command} takes a count from 1 to 100,000, not {arg!r}")
    return int(arg)


def valid(parse: Callable[[str], object], value: str) -> None:
    """Refuse `value` when `parse` (an id parser of `proto.ids`) rejects it, with its message."""
    try:
        parse(value)
    except Exception as exc:
        raise InvalidBody("memory_admin", str(exc)) from None


def item_id(value: str) -> None:
    """Refuse `value` unless it is an item id."""
    if not is_item_id(value):
        raise InvalidBody("memory_admin", f"{value[:40]!r} is not an item id (mem-YYYY-MM-DD-NNN)")


def strings(request: MemoryAdmin, key: str) -> tuple[str, ...]:
    """``args[key]`` as a list of strings (empty when absent)."""
    value = request.args.get(key, [])
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise InvalidBody("memory_admin", f"{request.command} takes args {{{key!r}: [string, ...]}}")
    return tuple(value)


def path_arg(request: MemoryAdmin) -> Path:
    """``arg`` as an absolute path (export, import, replay)."""
    path = Path(request.arg)
    if not request.arg or not path.is_absolute() or "\x00" in request.arg:
        raise InvalidBody(
            "memory_admin", f"{request.command} takes an absolute path, not {request.arg[:80]!r}"
        )
    return path
