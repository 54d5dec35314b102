"""The memory block as a new session gets it (M5a section 4; DESIGN 10.4): the files read, every
limit checked, the entries that fail the write check or are withdrawn left out (`block.render`).

A file that cannot be read or is over its limit makes the whole block unavailable
(`MemoryUnavailable`, runbook memory-unavailable): loopd then refuses to start a session rather than
start one with part of its memory missing.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from boxmaker.memoryd.files import block
from boxmaker.memoryd.files.entries import IDENTITY_FILES
from boxmaker.memoryd.files.store import FileOverLimit, FileUnreadable, Store, steering_problem
from boxmaker.proto.errors import ProtocolError

log = logging.getLogger("boxmaker.memoryd")

#: The identity entries (file name, text) to leave out, given each identity file's entries by name.
Withdrawn = Callable[[dict[str, tuple[str, ...]]], frozenset[tuple[str, str]]]


class MemoryUnavailable(ProtocolError):
    """Raised when the block cannot be served: a file is unreadable or over its limit (M5a section 4)."""

    code = "memory-unavailable"
    runbook = "memory-unavailable"


def serve(store: Store, withdrawn: Withdrawn) -> block.Block:
    """The memory block as a new session would get it now.

    Raises:
        MemoryUnavailable: a file is unreadable or over its limit, or soul.md with conventions.md is.
    """
    try:
        soul = store.read_soul()
        conventions = store.read_conventions()
        files = [store.read_identity(spec) for spec in IDENTITY_FILES.values()]
        left = withdrawn({f.spec.name: f.entries for f in files})
    except (FileUnreadable, FileOverLimit, OSError) as exc:
        log.error("memory-unavailable: %s", exc)
        raise MemoryUnavailable(f"the memory block is unavailable: {exc}") from None
    steering = steering_problem(soul, conventions)
    if steering is not None:
        log.error("memory-unavailable: %s", steering)
        raise MemoryUnavailable(f"the memory block is unavailable: {steering}")
    files.insert(0, conventions)
    for file in files:
        if file.size > file.spec.limit:
            why = FileOverLimit(file.spec.name, file.size, file.spec.limit)
            log.error("memory-unavailable: %s", why)
            raise MemoryUnavailable(f"the memory block is unavailable: {why}")
    rendered = block.render(soul, files, left)
    for item in rendered.left_out:
        if item.rule == block.WITHDRAWN:
            log.info("left out of the block: a withdrawn entry of %s", item.file)
            continue
        log.warning("left out of the block: an entry of %s refused by rule %s", item.file, item.rule)
    return rendered
