"""The process at the other end of a Unix socket, as the kernel saw it (``SO_PEERCRED``; issue 17).

Observed, not declared: what a client says about itself (an MCP client's name, its ``_meta``) is a
claim; the uid and pid here are what memoryd records beside it.
"""

from __future__ import annotations

import socket
import struct
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Peer:
    """The peer process of a connection: its pid, uid and gid when it connected."""

    pid: int
    uid: int
    gid: int


def peer_of(conn: socket.socket) -> Peer | None:
    """The peer of a connected Unix socket; None where the platform does not say (no ``SO_PEERCRED``)."""
    option = getattr(socket, "SO_PEERCRED", None)
    if option is None:
        return None
    try:
        raw = conn.getsockopt(socket.SOL_SOCKET, option, struct.calcsize("3i"))
    except OSError:
        return None
    pid, uid, gid = struct.unpack("3i", raw)
    return Peer(pid, uid, gid)
