"""Durable files (DESIGN section 7; STYLE 14).

- Whole-file writes: a temp file in the same folder, fsync, `os.replace`, fsync the folder.
- Append-only JSONL: one `write` per line on an O_APPEND descriptor, fsync when asked; a torn last line
  (no final newline) is set aside into ``<name>.torn`` by the file's writer on open, never skipped in the
  middle. Readers count only complete lines.
- Folders 0700, files 0600.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from collections.abc import Iterable
from pathlib import Path

from boxmaker.proto.errors import BoxmakerError

DIR_MODE = 0o700
FILE_MODE = 0o600


def ensure_dir(path: Path) -> None:
    """Create `path` and every missing parent with mode 0700; an existing `path` is set to 0700.

    Raises:
        OSError: when a folder cannot be created or its mode set.
    """
    missing = []
    current = path
    while not current.exists():
        missing.append(current)
        current = current.parent
    for folder in reversed(missing):
        folder.mkdir(mode=DIR_MODE, exist_ok=True)
        os.chmod(folder, DIR_MODE)
    if path.stat().st_mode & 0o777 != DIR_MODE:
        os.chmod(path, DIR_MODE)


def ensure_file(path: Path, initial: bytes = b"") -> bool:
    """Create `path` with mode 0600 holding `initial` if it does not exist; never overwrite.

    Returns:
        True when the file was created, False when it already existed.
    """
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, FILE_MODE)
    except FileExistsError:
        return False
    try:
        _write_all(fd, initial)
        os.fsync(fd)
    finally:
        os.close(fd)
    fsync_dir(path.parent)
    return True


def fsync_dir(path: Path) -> None:
    """fsync a folder so a rename or a new file in it survives a crash."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def atomic_write(path: Path, data: bytes) -> None:
    """Replace `path` with `data` durably: temp file in the same folder, fsync, rename, fsync folder.

    Raises:
        OSError: when any step fails (the old file is then untouched; the temp file is removed).
    """
    atomic_write_chunks(path, (data,))


def atomic_write_chunks(path: Path, chunks: Iterable[bytes]) -> None:
    """`atomic_write` of data made piece by piece (a large generated file is never held whole).

    Raises:
        OSError: when any step fails (the old file is then untouched; the temp file is removed).
    """
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, FILE_MODE)
    try:
        for data in chunks:
            _write_all(fd, data)
        os.fsync(fd)
    except BaseException:
        os.close(fd)
        tmp.unlink(missing_ok=True)
        raise
    os.close(fd)
    try:
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    fsync_dir(path.parent)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]


def ends_with_newline(path: Path) -> bool:
    """True when `path` is missing, empty, or ends with a newline."""
    try:
        with path.open("rb") as handle:
            size = handle.seek(0, os.SEEK_END)
            if size == 0:
                return True
            handle.seek(size - 1)
            return handle.read(1) == b"\n"
    except FileNotFoundError:
        return True


def append_line(path: Path, line: bytes, sync: bool = True) -> int:
    """Append one line (a trailing newline is added) with a single write; fsync when `sync`.

    A torn last line left by someone else is set aside first (`set_aside_torn_tail`), so the new
    line always starts a line of its own.

    Returns:
        The file's size before the append, in bytes.

    Raises:
        ValueError: when `line` contains a newline.
        OSError: when the write fails.
    """
    if b"\n" in line:
        raise ValueError("a JSONL line cannot contain a newline")
    if not ends_with_newline(path):
        set_aside_torn_tail(path)
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, FILE_MODE)
    try:
        before = os.fstat(fd).st_size
        _write_all(fd, line + b"\n")
        if sync:
            os.fsync(fd)
    finally:
        os.close(fd)
    return before


def append_bytes(path: Path, data: bytes, sync: bool = True) -> int:
    """Append `data` with a single write; fsync when `sync`. Returns the size before, in bytes."""
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, FILE_MODE)
    try:
        before = os.fstat(fd).st_size
        _write_all(fd, data)
        if sync:
            os.fsync(fd)
    finally:
        os.close(fd)
    return before


def truncate(path: Path, size: int) -> None:
    """Cut `path` back to `size` bytes and fsync it."""
    fd = os.open(path, os.O_WRONLY)
    try:
        os.ftruncate(fd, size)
        os.fsync(fd)
    finally:
        os.close(fd)


def complete_lines(data: bytes) -> tuple[list[bytes], bytes]:
    """Split JSONL bytes into complete lines and the torn tail (b"" when the data ends in a newline)."""
    if not data:
        return [], b""
    parts = data.split(b"\n")
    tail = parts.pop()
    return parts, tail


def set_aside_torn_tail(path: Path) -> bytes:
    """For the writer of an append-only file: move a torn last line into ``<name>.torn``.

    Returns:
        The bytes set aside (b"" when the file was whole or missing).
    """
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return b""
    _, tail = complete_lines(data)
    if not tail:
        return b""
    append_bytes(path.with_name(path.name + ".torn"), tail + b"\n")
    truncate(path, len(data) - len(tail))
    return tail


def lock_holder(path: Path) -> int | None:
    """The pid written in a `FileLock` file when a process holds the lock now; None otherwise."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            text = os.pread(fd, 32, 0).decode("ascii", "replace").strip()
            return int(text) if text.isdigit() else None
        fcntl.flock(fd, fcntl.LOCK_UN)
        return None
    finally:
        os.close(fd)


class LockHeld(BoxmakerError):
    """Raised when another process holds a role's lock on the same home."""

    def __init__(self, path: Path, holder: str) -> None:
        who = f" (pid {holder})" if holder else ""
        super().__init__(f"another process{who} holds {path}: one writer per home")
        self.path = path


class FileLock:
    """An exclusive `flock` on a separate lock file, held for a process's life (DESIGN 7).

    The holder's pid is written into the file for the message a second process prints.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self._fd: int | None = None

    def acquire(self) -> None:
        """Take the lock at once or fail.

        Raises:
            LockHeld: another process holds it.
        """
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, FILE_MODE)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 32, 0).decode("ascii", "replace").strip()
            os.close(fd)
            raise LockHeld(self.path, holder) from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode("ascii"), 0)
        self._fd = fd

    def release(self) -> None:
        """Release the lock (idempotent)."""
        fd, self._fd = self._fd, None
        if fd is not None:
            with contextlib.suppress(OSError):
                os.ftruncate(fd, 0)
            fcntl.flock(fd, fcntl.LOCK_UN)
            os.close(fd)
