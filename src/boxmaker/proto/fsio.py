"""Durable files (DESIGN section 7; STYLE 14).

- Whole-file writes: a temp file in the same folder, fsync, `os.replace`, fsync the folder.
- Append-only JSONL: one `write` per line on an O_APPEND descriptor, fsync when asked; a torn last line
  (no final newline) is set aside into ``<name>.torn`` by the file's writer on open, never skipped in the
  middle. Readers count only complete lines.
- An append that fails (a full disk: `disk_full`) is cut back to the file's size before it, so a
  refused write leaves no torn tail behind.
- Folders 0700, files 0600.
- Never through a link: every file is opened with ``O_NOFOLLOW`` relative to a descriptor of its folder,
  itself opened with ``O_NOFOLLOW`` (`open_nofollow`), so a link planted at a file or at its folder is
  an error (`LinkRefused`), never followed out of the home (issue 15 item 2).
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import stat
from collections.abc import Iterable
from pathlib import Path

from boxmaker.proto.errors import BoxmakerError

DIR_MODE = 0o700
FILE_MODE = 0o600
#: The errors of a file system with no room left: no space, or the owner's quota reached.
FULL = frozenset({errno.ENOSPC, errno.EDQUOT})


def disk_full(exc: BaseException) -> bool:
    """True when `exc` says the file system has no room left (`FULL`)."""
    return isinstance(exc, OSError) and exc.errno in FULL


class LinkRefused(OSError):
    """Raised when a file boxmaker opens, or its folder, is a symbolic link (never followed)."""

    def __init__(self, path: Path) -> None:
        super().__init__(
            errno.ELOOP, "it is a symbolic link, which boxmaker never follows in its home", str(path)
        )


def open_nofollow(path: Path, flags: int, mode: int = FILE_MODE) -> int:
    """Open `path` without following a link: its folder with ``O_DIRECTORY | O_NOFOLLOW``, then the file
    relative to the folder's descriptor with ``O_NOFOLLOW``. Returns the descriptor.

    Raises:
        LinkRefused: the file or its folder is a symbolic link.
        OSError: any other failure to open (FileNotFoundError for a missing file).
    """
    return open_nofollow_in(str(path.parent), path.name, flags, mode)


def open_nofollow_in(folder: str, name: str, flags: int, mode: int = FILE_MODE) -> int:
    """`open_nofollow` of the file `name` in the folder `folder`, both given as strings (no `Path` made:
    recall opens a log per hit this way).

    Raises:
        LinkRefused, OSError: see `open_nofollow`.
    """
    try:
        descriptor = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENOTDIR) and os.path.islink(folder):
            raise LinkRefused(Path(folder)) from None
        raise
    try:
        return os.open(name, flags | os.O_NOFOLLOW | os.O_CLOEXEC, mode, dir_fd=descriptor)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise LinkRefused(Path(folder, name)) from None
        raise
    finally:
        os.close(descriptor)


def read_bytes(path: Path) -> bytes:
    """The whole of `path`, opened with `open_nofollow`.

    Raises:
        LinkRefused, OSError: see `open_nofollow`.
    """
    fd = open_nofollow(path, os.O_RDONLY)
    try:
        chunks = []
        while chunk := os.read(fd, 1 << 20):
            chunks.append(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)


def check_no_links(base: Path, path: Path) -> None:
    """Walk `path` from `base` one component at a time, each opened with ``O_NOFOLLOW`` relative to the
    descriptor of the one before; stop quietly at the first component that does not exist yet.

    Raises:
        LinkRefused: a component below `base` is a symbolic link.
        ValueError: `path` is not below `base`.
    """
    parts = path.relative_to(base).parts
    fd = os.open(base, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        for number, part in enumerate(parts):
            try:
                nxt = os.open(part, os.O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=fd)
            except FileNotFoundError:
                return
            os.close(fd)
            fd = nxt
            if stat.S_ISLNK(os.fstat(fd).st_mode):
                raise LinkRefused(base.joinpath(*parts[: number + 1]))
    finally:
        os.close(fd)


def ensure_dir(path: Path, *, tighten: bool = True) -> None:
    """Create `path` and every missing parent with mode 0700; an existing `path` is set to 0700, or
    with ``tighten=False`` left as it is (bxctl, which must leave a folder another user could write for
    the roles' start-up check to name: `proto.homecheck`).

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
    if tighten and path.stat().st_mode & 0o777 != DIR_MODE:
        os.chmod(path, DIR_MODE)


def ensure_file(path: Path, initial: bytes = b"") -> bool:
    """Create `path` with mode 0600 holding `initial` if it does not exist; never overwrite.

    Returns:
        True when the file was created, False when it already existed.
    """
    try:
        fd = open_nofollow(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, FILE_MODE)
    except FileExistsError:
        return False
    try:
        _write_all(fd, initial)
        os.fsync(fd)
    except BaseException:
        os.close(fd)
        path.unlink(missing_ok=True)  # it did not exist: leave nothing half-written
        raise
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


def atomic_write_chunks(path: Path, chunks: Iterable[bytes], sync_every: int = 0) -> None:
    """`atomic_write` of data made piece by piece (a large generated file is never held whole); with
    `sync_every`, the temp file's data is also synced (fdatasync) each time about that many more bytes
    were written, so the final fsync, and any other fsync on the disk meanwhile, never waits behind
    all of it.

    Raises:
        OSError: when any step fails (the old file is then untouched; the temp file is removed).
    """
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    fd = open_nofollow(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, FILE_MODE)
    try:
        unsynced = 0
        for data in chunks:
            _write_all(fd, data)
            unsynced += len(data)
            if sync_every and unsynced >= sync_every:
                os.fdatasync(fd)
                unsynced = 0
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
        fd = open_nofollow(path, os.O_RDONLY)
    except FileNotFoundError:
        return True
    try:
        size = os.fstat(fd).st_size
        return size == 0 or os.pread(fd, 1, size - 1) == b"\n"
    finally:
        os.close(fd)


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
    return append_bytes(path, line + b"\n", sync)


def append_bytes(path: Path, data: bytes, sync: bool = True) -> int:
    """Append `data` with a single write; fsync when `sync`. Returns the size before, in bytes.

    Raises:
        OSError: when the write or the fsync fails; the file is then cut back to its size before
            (best effort), so no part of `data` stays behind.
    """
    fd = open_nofollow(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, FILE_MODE)
    try:
        before = os.fstat(fd).st_size
        try:
            _write_all(fd, data)
            if sync:
                os.fsync(fd)
        except OSError:
            with contextlib.suppress(OSError):
                os.ftruncate(fd, before)
                os.fsync(fd)
            raise
    finally:
        os.close(fd)
    return before


def truncate(path: Path, size: int) -> None:
    """Cut `path` back to `size` bytes and fsync it."""
    fd = open_nofollow(path, os.O_WRONLY)
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
        data = read_bytes(path)
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

    @property
    def held(self) -> bool:
        """True while this process holds the lock."""
        return self._fd is not None

    def release(self) -> None:
        """Release the lock (idempotent)."""
        fd, self._fd = self._fd, None
        if fd is not None:
            with contextlib.suppress(OSError):
                os.ftruncate(fd, 0)
            fcntl.flock(fd, fcntl.LOCK_UN)
            os.close(fd)
