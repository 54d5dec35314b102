"""The files side of `pages.Pages` (issue 16): a page written only when its bytes changed, a large
page streamed to its file in paced pieces, and the mark (``memory/.projections.json``, `PAGES_MARK`)
that says through which offset of the item log the pages are up to date.

The mark is ``{"items": [st_dev, st_ino, offset] | null, "controls": [st_size, st_mtime_ns] | null}``;
it is written without fsync (an older mark only renders more at start) and read back only when the item
log is the same file (device and inode), the offset within its size, and controls.jsonl unchanged.
"""

from __future__ import annotations

import json
import logging
import os
import time
from collections.abc import Iterable, Iterator
from pathlib import Path

from boxmaker.memoryd.files.names import PAGES_MARK
from boxmaker.proto import fsio

log = logging.getLogger("boxmaker.memoryd.projections")

#: The background writer pauses this long (seconds) after each 64 KB of a large page, so the GIL goes
#: to the threads answering requests (without it a note waited behind the render: p99 over 100 ms).
PACE = 0.001


def put(path: Path, text: str) -> bool:
    """Write `text` to `path` durably unless the file holds exactly its bytes; True when written.

    Raises:
        OSError: when the file cannot be written.
    """
    data = text.encode("utf-8")
    try:
        same = path.stat().st_size == len(data) and path.read_bytes() == data
    except FileNotFoundError:
        same = False
    if not same:
        fsio.atomic_write(path, data)
    return not same


def batched(lines: Iterable[str], size: int = 1 << 16) -> Iterator[bytes]:
    """Lines joined into pieces of about `size` characters, encoded, with a `PACE` pause after each."""
    batch: list[str] = []
    held = 0
    for line in lines:
        batch.append(line)
        held += len(line)
        if held >= size:
            yield "".join(batch).encode("utf-8")
            batch, held = [], 0
            time.sleep(PACE)  # let a request's thread run: a large page is background work
    if batch:
        yield "".join(batch).encode("utf-8")


def stat(path: Path) -> list[int] | None:
    """``[st_size, st_mtime_ns]`` of `path`, or None when it does not exist."""
    try:
        info = path.stat()
    except FileNotFoundError:
        return None
    return [info.st_size, info.st_mtime_ns]


def write_mark(
    memory_dir: Path, offset: int, identity: tuple[int, int, int, int] | None, controls: list[int] | None
) -> None:
    """Record that the pages show the item log (`identity`: its device and inode first) through
    `offset`, with controls.jsonl at `controls` (`stat`). A failure is logged, never raised."""
    mark = {"items": [*identity[:2], offset] if identity else None, "controls": controls}
    path = memory_dir / PAGES_MARK
    temporary = path.with_name(f"{path.name}.tmp")
    try:
        temporary.write_bytes(json.dumps(mark).encode("ascii"))
        os.replace(temporary, path)
    except OSError as exc:
        log.warning("cannot write %s: %s", path, exc)


def read_mark(memory_dir: Path, items_path: Path, controls: Path) -> int | None:
    """The offset the pages show the item log through, when the mark fits the files as they are
    (module docstring); None when there is none, it is unreadable, or it does not fit."""
    try:
        mark = json.loads((memory_dir / PAGES_MARK).read_bytes())
        dev, ino, offset = mark["items"]
        info = items_path.stat()
        recorded = mark["controls"]
    except (OSError, ValueError, TypeError, KeyError):
        return None
    if (info.st_dev, info.st_ino) != (dev, ino) or not 0 <= offset <= info.st_size:
        return None
    if (list(recorded) if recorded is not None else None) != stat(controls):
        return None
    return int(offset)
