"""Socket paths for the roles' Unix sockets (DESIGN 3 and 10.1): the platform's length limit, a stale
socket left by a dead process, the listen backlog. `wire.FrameServer` calls these before it binds; the
roles call `check_socket_path` to refuse a home whose socket paths cannot be bound, before they start.
"""

from __future__ import annotations

import os
import socket
import stat
from pathlib import Path

from boxmaker.proto import fsio
from boxmaker.proto.errors import BoxmakerError

#: The longest socket path the platform takes, in bytes (Linux `sun_path` minus the NUL).
MAX_SOCKET_PATH = 107


class SocketInUse(BoxmakerError):
    """Raised when another live process already answers on a socket path."""

    def __init__(self, path: Path) -> None:
        super().__init__(f"another process is already serving {path}")


class SocketPathError(BoxmakerError):
    """Raised when a socket path is too long for the platform or is occupied by a non-socket."""


def check_socket_path(path: Path) -> None:
    """Refuse a path the platform cannot bind.

    Raises:
        SocketPathError: when the path is longer than `MAX_SOCKET_PATH` bytes.
    """
    size = len(os.fsencode(str(path)))
    if size > MAX_SOCKET_PATH:
        raise SocketPathError(
            f"socket path {path} is {size} bytes, over the platform's limit of {MAX_SOCKET_PATH}; "
            "use a shorter home or set the socket path in the config"
        )


def prepare_socket_path(path: Path) -> None:
    """Make the socket's 0700 folder and remove a stale socket at `path`.

    Raises:
        SocketPathError: the path is too long, or something that is not a socket is there.
        SocketInUse: a live process answers on it.
    """
    check_socket_path(path)
    fsio.ensure_dir(path.parent)
    try:
        mode = path.lstat().st_mode
    except FileNotFoundError:
        return
    if not stat.S_ISSOCK(mode):
        raise SocketPathError(f"{path} exists and is not a socket; move it away")
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        probe.settimeout(1.0)
        probe.connect(str(path))
    except OSError:
        path.unlink(missing_ok=True)
        return
    finally:
        probe.close()
    raise SocketInUse(path)


def listen_backlog() -> int:
    """The system's largest listen backlog: ``/proc/sys/net/core/somaxconn``, else `socket.SOMAXCONN`."""
    try:
        value = int(Path("/proc/sys/net/core/somaxconn").read_text(encoding="ascii").strip())
    except (OSError, ValueError):
        return socket.SOMAXCONN
    return max(value, socket.SOMAXCONN)
