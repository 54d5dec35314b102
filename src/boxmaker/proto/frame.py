"""Frames: a 4-byte big-endian length, then that many bytes of UTF-8 JSON (DESIGN section 3).

One request per connection. A header announcing more than `MAX_FRAME` bytes is refused before any of
the body is read (`FrameTooLarge`).
"""

from __future__ import annotations

import socket
import struct
import time

from boxmaker.proto.errors import FrameTooLarge, FrameTruncated

#: The largest frame payload accepted or sent, in bytes (4 MiB).
MAX_FRAME = 4 * 1024 * 1024

_HEADER = struct.Struct(">I")


def pack(payload: bytes) -> bytes:
    """Header plus payload.

    Raises:
        FrameTooLarge: when `payload` is longer than `MAX_FRAME`.
    """
    if len(payload) > MAX_FRAME:
        raise FrameTooLarge(len(payload), MAX_FRAME)
    return _HEADER.pack(len(payload)) + payload


def unpack(data: bytes) -> tuple[bytes, bytes]:
    """Split one whole frame off the front of `data`: ``(payload, rest)``.

    Raises:
        FrameTruncated: when `data` holds less than a whole frame.
        FrameTooLarge: when the header announces more than `MAX_FRAME`.
    """
    if len(data) < _HEADER.size:
        raise FrameTruncated(len(data), _HEADER.size)
    (size,) = _HEADER.unpack_from(data)
    if size > MAX_FRAME:
        raise FrameTooLarge(size, MAX_FRAME)
    end = _HEADER.size + size
    if len(data) < end:
        raise FrameTruncated(len(data) - _HEADER.size, size)
    return data[_HEADER.size : end], data[end:]


def send_frame(sock: socket.socket, payload: bytes) -> None:
    """Write one frame to a connected socket.

    Raises:
        FrameTooLarge: when `payload` is longer than `MAX_FRAME`.
        OSError: on socket errors.
    """
    sock.sendall(pack(payload))


def recv_frame(sock: socket.socket, deadline: float | None = None) -> bytes:
    """Read one frame's payload from a connected socket.

    Args:
        deadline: a `time.monotonic` moment by which the whole frame must have arrived (None: each
            read waits as long as the socket's own timeout).

    Raises:
        FrameTooLarge: when the header announces more than `MAX_FRAME` (nothing more is read).
        FrameTruncated: when the peer closes early.
        OSError: on socket errors and timeouts (`TimeoutError` once `deadline` has passed).
    """
    header = _recv_exact(sock, _HEADER.size, deadline)
    (size,) = _HEADER.unpack(header)
    if size > MAX_FRAME:
        raise FrameTooLarge(size, MAX_FRAME)
    return _recv_exact(sock, size, deadline)


def _recv_exact(sock: socket.socket, size: int, deadline: float | None) -> bytes:
    chunks: list[bytes] = []
    got = 0
    while got < size:
        if deadline is not None:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError(f"the frame did not arrive in time ({got:,} of {size:,} bytes)")
            sock.settimeout(left)
        chunk = sock.recv(min(size - got, 1 << 20))
        if not chunk:
            raise FrameTruncated(got, size)
        chunks.append(chunk)
        got += len(chunk)
    return b"".join(chunks)
