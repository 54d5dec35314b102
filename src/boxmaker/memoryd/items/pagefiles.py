"""The files side of `pages.Pages` (issue 16): a page written only when its bytes changed, a large
page streamed to its file in paced pieces, and the mark (``memory/.projections.json``, `PAGES_MARK`)
that says through which offset of the item log the pages are up to date.

A large page is background work: it is rendered and written in the gaps between the requests memoryd
answers (`Requests`: a request's thread otherwise waited for the GIL at each of its fsyncs, and for the
disk behind the page's own writes: a note's p99 at 100,000 items was over 20 ms while the 20 MB
``lessons`` page was written), and its file is synced every `SYNC_BYTES` as it goes, so no request's
fsync waits behind many megabytes of the page.

The mark is ``{"items": [st_dev, st_ino, offset] | null, "controls": [st_size, st_mtime_ns] | null}``;
it is written without fsync (an older mark only renders more at start) and read back only when the item
log is the same file (device and inode), the offset within its size, and controls.jsonl unchanged.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import threading
import time
from collections.abc import Iterable, Iterator
from pathlib import Path

from boxmaker.memoryd.files.names import PAGES_MARK
from boxmaker.proto import fsio

log = logging.getLogger("boxmaker.memoryd.projections")

#: The background writer pauses this long (seconds) after each 64 KB of a large page, so the GIL goes
#: to the threads answering requests (without it a note waited behind the render: p99 over 100 ms).
PACE = 0.001
#: A large page's file is synced after about this many bytes (`fsio.atomic_write_chunks`' ``sync_every``).
SYNC_BYTES = 1 << 20
#: The longest the background writer waits for a gap between requests (seconds) before it writes one
#: more piece anyway: a steady stream of requests slows a large page down, never stops it.
LONGEST_WAIT = 0.25
#: A gap between requests counts once none has been answered for this long (seconds): a client's next
#: request usually comes within it, and would otherwise wait for the GIL before it is even read.
GRACE = 0.005
#: When memoryd stops, a large page still being written gets this long (seconds) at full speed; what is
#: not written by then is left to the next start, which renders it from the mark (`Pages.close`).
STOP_BUDGET = 1.0


class Abandoned(Exception):
    """A large page's write given up because memoryd is stopping (`Requests.stopping`)."""


class Requests:
    """The requests memoryd is answering now (`serving`, around each one); the background writer of
    large pages waits for a moment with none (`wait`). Thread-safe."""

    def __init__(self) -> None:
        self._mutex = threading.Lock()
        self._count = 0
        self._ended = 0.0  # when the last request was answered (time.monotonic)
        self._quiet = threading.Event()
        self._quiet.set()
        self._deadline: float | None = None  # `stopping`: no more waiting, and give up after this

    def stopping(self, budget: float | None) -> None:
        """memoryd is stopping: from now on `wait` does not wait and `batched` does not pause, and a
        large page still being written after `budget` seconds is abandoned (`check`). None: back to
        normal (a reopen)."""
        self._deadline = None if budget is None else time.monotonic() + budget

    @property
    def hurried(self) -> bool:
        """True once `stopping` was called (and not undone)."""
        return self._deadline is not None

    def check(self) -> None:
        """Raise `Abandoned` once the stopping budget is spent."""
        if self._deadline is not None and time.monotonic() >= self._deadline:
            raise Abandoned("memoryd is stopping")

    @contextlib.contextmanager
    def serving(self) -> Iterator[None]:
        """Hold the background writer back while one request is answered."""
        with self._mutex:
            self._count += 1
            self._quiet.clear()
        try:
            yield
        finally:
            with self._mutex:
                self._count -= 1
                if not self._count:
                    self._ended = time.monotonic()
                    self._quiet.set()

    def pause(self) -> bool:
        """`check`, then `wait`: what a large page's render calls between its steps.

        Raises:
            Abandoned: memoryd is stopping and the page's budget is spent."""
        self.check()
        return self.wait()

    def wait(self, longest: float = LONGEST_WAIT) -> bool:
        """Wait for a gap: no request answered for `GRACE` seconds; at most `longest` seconds. False
        when it timed out (requests are still coming). True at once when memoryd is stopping."""
        if self._deadline is not None:
            return True
        if self._quiet.is_set() and time.monotonic() - self._ended >= GRACE:
            return True
        deadline = time.monotonic() + longest
        while True:
            now = time.monotonic()
            if now >= deadline:
                return False
            if not self._quiet.is_set():
                self._quiet.wait(deadline - now)
            elif now - self._ended >= GRACE:
                return True
            else:
                time.sleep(min(GRACE - (now - self._ended), deadline - now))


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


def batched(lines: Iterable[str], requests: Requests | None = None, size: int = 1 << 16) -> Iterator[bytes]:
    """Lines joined into pieces of about `size` characters, encoded, with a `PACE` pause after each;
    with `requests`, each line waits for a gap between them (`Requests.wait`; once a wait times out,
    the rest of that piece is made without waiting; once memoryd is stopping, no wait nor pause, and
    `Abandoned` once its budget is spent: `Requests.check`).

    Raises:
        Abandoned: memoryd is stopping and the page's budget is spent."""
    batch: list[str] = []
    held = 0
    pressed = False
    for line in lines:
        if requests is not None:
            requests.check()
            if not pressed:
                pressed = not requests.wait()
        batch.append(line)
        held += len(line)
        if held >= size:
            yield "".join(batch).encode("utf-8")
            batch, held, pressed = [], 0, False
            if requests is None or not requests.hurried:
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
