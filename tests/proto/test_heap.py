"""`proto.heap` (issue 16: memoryd's peak RSS): on glibc, freed memory goes back to the system and
the mmap threshold is fixed; elsewhere both calls do nothing and say so."""

from __future__ import annotations

import platform
import subprocess
import sys
import textwrap

import pytest

from boxmaker.proto import heap

GLIBC = platform.libc_ver()[0] == "glibc"


def _rss_kib() -> int:
    with open("/proc/self/status", encoding="ascii") as status:
        return next(int(line.split()[1]) for line in status if line.startswith("VmRSS:"))


@pytest.mark.skipif(not GLIBC, reason="glibc only")
def test_on_glibc_freed_memory_goes_back_to_the_system() -> None:
    # in a child, so this process's heap is not the one measured
    script = textwrap.dedent(
        """
        from boxmaker.proto import heap
        def rss():
            with open("/proc/self/status") as status:
                return next(int(l.split()[1]) for l in status if l.startswith("VmRSS:"))
        assert heap.settle_allocator() is True
        pairs = [(b"x" * 100_000, bytes(1000)) for _ in range(400)]  # 40 MB, each block with a small one
        small = [one for _, one in pairs]  # the small ones stay, so the freed blocks sit inside the heap
        del pairs
        before = rss()
        heap.release_free_memory()
        print(before - rss())
        """
    )
    freed = int(
        subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True).stdout
    )
    assert freed > 20_000  # KiB: most of the 40 MB given back


def test_the_calls_say_whether_they_did_anything() -> None:
    assert heap.settle_allocator() is GLIBC
    assert isinstance(heap.release_free_memory(), bool)
    assert _rss_kib() > 0
