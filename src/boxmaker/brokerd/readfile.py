"""``read_file``: open first, then check what was opened (docs/brokerd.md; issue 15 item 3).

Resolving a path, checking it against the grant and then opening it by name races: a folder component
swapped for a link in between opens a file outside the grant. So the path is walked here one
component at a time, each opened relative to the descriptor of the folder before it with
``O_NOFOLLOW``; a link met on the way is read (``readlinkat``) and its target walked the same way (at
most 40 links, like the kernel), ``..`` goes back to the folder actually walked. The file is opened
last, relative to its folder's descriptor, and only then is the path that was walked (the real path of
what was opened) checked against the grant; on Linux the descriptor's own path
(``/proc/self/fd/N``) must pass too, which also catches a folder renamed out of the grant meanwhile.

The open never blocks (``O_NONBLOCK``: a FIFO), never takes a terminal (``O_NOCTTY``), and nothing is
read before both checks pass. Every failure is a sentence with a code, never an exception.
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Callable

from boxmaker.brokerd.runtime import Output
from boxmaker.brokerd.sentences import Code

_MAX_LINKS = 40
_DIR_FLAGS = os.O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC
_FILE_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC


class _Walk:
    """The folders walked so far, as (name, descriptor) from the root."""

    def __init__(self) -> None:
        self.root = os.open("/", os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
        self.folders: list[tuple[str, int]] = []

    @property
    def fd(self) -> int:
        return self.folders[-1][1] if self.folders else self.root

    def path(self, name: str = "") -> str:
        return "/" + "/".join([*(n for n, _ in self.folders), *([name] if name else [])])

    def up(self) -> None:
        if self.folders:
            os.close(self.folders.pop()[1])

    def to_root(self) -> None:
        while self.folders:
            self.up()

    def close(self) -> None:
        self.to_root()
        os.close(self.root)


def open_walked(path: str) -> tuple[int, str]:
    """Open the file at absolute `path` for reading by the walk of the module docstring.

    Returns:
        The descriptor and the real path walked to it.

    Raises:
        OSError: ELOOP after too many links, ENOTDIR for a component that is not a folder,
            FileNotFoundError, or any other failure to open.
    """
    parts = [p for p in path.split("/") if p]
    walk = _Walk()
    links = 0
    try:
        while parts:
            name = parts.pop(0)
            if name == ".":
                continue
            if name == "..":
                walk.up()
                continue
            target = _link_target(walk.fd, name, last=not parts)
            if isinstance(target, int):
                if parts:
                    walk.folders.append((name, target))
                    continue
                return target, walk.path(name)
            links += 1
            if links > _MAX_LINKS:
                raise OSError(errno.ELOOP, os.strerror(errno.ELOOP), path)
            if target.startswith("/"):
                walk.to_root()
            parts[:0] = [p for p in target.split("/") if p]
        raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), path)
    finally:
        walk.close()


def _link_target(folder: int, name: str, *, last: bool) -> int | str:
    """Open `name` in `folder` without following it: a descriptor (a folder on the way, or the file
    itself when `last`), or, when it is a link, the link's target to walk instead."""
    try:
        fd = os.open(name, _FILE_FLAGS if last else _DIR_FLAGS, dir_fd=folder)
    except OSError as exc:
        if exc.errno != errno.ELOOP:
            raise
        return os.readlink(name, dir_fd=folder)
    mode = os.fstat(fd).st_mode
    if stat.S_ISLNK(mode):
        os.close(fd)
        return os.readlink(name, dir_fd=folder)
    if not last and not stat.S_ISDIR(mode):
        os.close(fd)
        raise NotADirectoryError(errno.ENOTDIR, os.strerror(errno.ENOTDIR), name)
    return fd


def _opened_path(fd: int) -> str | None:
    """Where the kernel says descriptor `fd` is (None where /proc is not there)."""
    try:
        return os.readlink(f"/proc/self/fd/{fd}")
    except OSError:
        return None


def read_file(path: str, grant_id: str, allowed: Callable[[str], bool], max_bytes: int) -> Output:
    """The text of `path` when the file opened is inside the grant (`allowed` says so of a real path),
    at most `max_bytes` bytes, as UTF-8 with replacement."""
    if not os.path.isabs(path):
        return Output(f"read_file: {path} is not an absolute path; give the full path", Code.DENIED)
    try:
        fd, real = open_walked(path)
    except FileNotFoundError:
        return Output(f"read_file: {path} does not exist", Code.NOT_FOUND)
    except IsADirectoryError:
        return Output(f"read_file: {path} is a folder; give the path of a file", Code.NOT_A_FILE)
    except OSError as exc:
        return Output(f"read_file: cannot open {path} ({exc.strerror or exc})", Code.UNAVAILABLE)
    try:
        opened = _opened_path(fd)
        if not allowed(real) or (opened is not None and not allowed(opened)):
            return Output(f"the grant {grant_id} does not allow reading {path}", Code.DENIED)
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            what = "a folder" if stat.S_ISDIR(mode) else "not a regular file"
            return Output(f"read_file: {path} is {what}; give the path of a file", Code.NOT_A_FILE)
        data = b""
        while len(data) <= max_bytes:
            chunk = os.read(fd, max_bytes + 1 - len(data))
            if not chunk:
                break
            data += chunk
    except OSError as exc:
        return Output(f"read_file: cannot read {path} ({exc.strerror or exc})", Code.UNAVAILABLE)
    finally:
        os.close(fd)
    text = data[:max_bytes].decode("utf-8", errors="replace")
    if len(data) > max_bytes:
        text += f"\n[cut at {max_bytes:,} bytes]"
    return Output(text)
