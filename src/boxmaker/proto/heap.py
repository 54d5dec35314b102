"""Keeping a long-running daemon's resident memory close to what it holds (issue 16: memoryd's peak
RSS at 100,000 items).

CPython hands objects over 512 bytes and its own arenas to the C library's ``malloc``. With GNU libc two
habits of that allocator keep memory resident after Python has freed it:

- the mmap threshold moves up each time a large block that was mmapped is freed (to as much as 32 MiB),
  so later large blocks (a 1 MiB read buffer, a list of every line of a chunk) come from the heap, and a
  small long-lived object allocated above them keeps the heap from shrinking;
- pages freed in the middle of the heap are only returned to the system by ``malloc_trim``.

`settle_allocator` fixes the threshold (at `MMAP_THRESHOLD`) before the daemon reads its files, and
`release_free_memory` gives freed pages back once a burst of allocation (start-up's fold) is over. Both
are no-ops, returning False, where the C library is not glibc (musl, macOS): nothing else changes.
"""

from __future__ import annotations

import ctypes
import functools
import logging

log = logging.getLogger("boxmaker.proto.heap")

#: Blocks of this many bytes or more are mmapped, and unmapped when freed (glibc's ``M_MMAP_THRESHOLD``,
#: fixed, which also stops its dynamic adjustment).
MMAP_THRESHOLD = 128 * 1024

_M_MMAP_THRESHOLD = -3  # mallopt's parameter number in glibc's malloc.h


@functools.cache
def _glibc() -> ctypes.CDLL | None:
    """The process's own C library when it is glibc (its symbols, looked up in the running program:
    no search for a library file, which would start a subprocess), else None."""
    try:
        libc = ctypes.CDLL(None)
    except OSError:
        return None
    if not all(hasattr(libc, name) for name in ("mallopt", "malloc_trim", "gnu_get_libc_version")):
        return None
    return libc


def settle_allocator() -> bool:
    """Fix glibc's mmap threshold at `MMAP_THRESHOLD` (call once, early in the daemon's start).

    Returns:
        True when set; False when the C library is not glibc or refused the setting.
    """
    libc = _glibc()
    if libc is None:
        return False
    done = bool(libc.mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD))
    if not done:
        log.info("the C library refused an mmap threshold of %d bytes", MMAP_THRESHOLD)
    return done


def release_free_memory() -> bool:
    """Return the heap's free pages to the system (glibc's ``malloc_trim(0)``; a few ms at 100,000
    items). Call after a burst of allocation, not per request.

    Returns:
        True when glibc released some memory; False when it released none or is not the C library.
    """
    libc = _glibc()
    return libc is not None and bool(libc.malloc_trim(0))
