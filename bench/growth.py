"""The growth benchmark (issue 16): what a note, an identity add and remove, a recall, the owner's commands
and memoryd's start-up cost as a home grows, measured through a real memoryd's sockets in one run.

`bench/scale.py --items 0,1000,10000,100000` runs it; see that file for the usage. For each size, a home
is seeded (`seed.seed_home`: that many notes shaped as memoryd writes them, over five years and one day of
thousands, and as many session records), memoryd is started once to build its index, then restarted and
timed:

- ``start_s``: from the process start to its broker socket answering a `note`; ``ready_s``: to a `recall`
  answering (the index checked and caught up);
- ``note``, ``add``, ``remove``: p50/p99 ms of `memory` calls on the broker socket (``add``/``remove``
  alternate on memory.md), ``recall``: LoCoMo questions, k = 10;
- ``commands``: the owner's commands on the admin socket, ms each (``export`` and ``reindex`` show
  progress in bxctl and may take longer);
- ``peak_rss_mb``: memoryd's peak resident memory (VmHWM) over start-up and the workload above;
  ``peak_rss_with_commands_mb`` also over the owner's commands (export and reindex hold much more).

Once per run: the disk's fsync floor (a 200-byte append and fsync, p50/p99 ms, on the folder the homes are
made in) and how many fsyncs one `note` and one `add` commit make (counted in process).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any
from unittest import mock

from benchkit import percentiles
from boxmaker.memoryd import tool
from boxmaker.memoryd.config import load as load_config
from boxmaker.memoryd.service import Memoryd
from boxmaker.proto import wire
from boxmaker.proto.labels import DataClass
from boxmaker.proto.messages import MemoryAdmin, MemoryAdminReply, MemoryCall, ToolRequest, ToolResponse
from corpus import Corpus
from seed import seed_home

BROKER = Path("run/broker-memory/memory.sock")
ADMIN = Path("run/owner-memory/admin.sock")


def broker_call(home: Path, n: int, tool_name: str, arguments: dict[str, Any]) -> ToolResponse:
    """One tool call on memoryd's broker socket, as brokerd makes it."""
    request = ToolRequest(session="chat-growth", call_id=f"g{n}", tool=tool_name, arguments=arguments)
    reply = wire.call(
        home / BROKER, MemoryCall(request=request, taint=DataClass.PRIVATE, untrusted=False), timeout=300
    )
    if not isinstance(reply, ToolResponse):
        raise RuntimeError(f"{tool_name} failed: {reply}")
    return reply


def admin_call(home: Path, command: str, arg: str = "", **args: Any) -> MemoryAdminReply:
    """One owner command on memoryd's admin socket, as bxctl sends it."""
    reply = wire.call(home / ADMIN, MemoryAdmin(command=command, arg=arg, args=args), timeout=600)
    if not isinstance(reply, MemoryAdminReply):
        raise RuntimeError(f"{command} failed: {reply}")
    return reply


def spawn(home: Path) -> subprocess.Popen[bytes]:
    """memoryd on `home`, its log to ``home/memoryd.log``."""
    with (home / "memoryd.log").open("ab") as log:
        return subprocess.Popen(
            [sys.executable, "-m", "boxmaker.memoryd", "serve", "--home", str(home)],
            stdout=subprocess.DEVNULL,
            stderr=log,
        )


def wait_for(process: subprocess.Popen[bytes], ask: Any, deadline: float = 1800) -> None:
    """Ask until it answers (the socket may not exist yet)."""
    limit = time.monotonic() + deadline
    while True:
        if process.poll() is not None:
            raise RuntimeError(f"memoryd exited with {process.returncode}")
        try:
            ask()
            return
        except (OSError, wire.PeerError):
            if time.monotonic() > limit:
                raise
            time.sleep(0.01)


def index_ready(home: Path) -> None:
    """A recall that answers ``ok``: the index is built (while it builds, recall answers
    ``refused:unavailable``, and a memoryd stopped then builds it again at its next start, inside the
    start-up being timed).

    Raises:
        OSError: not yet.
    """
    reply = broker_call(home, 0, "recall", {"query": "warm up", "k": 10})
    if reply.code != "ok":
        time.sleep(0.5)
        raise OSError(f"the index is not ready: {reply.code}")


def peak_rss_mb(pid: int) -> float:
    """A process's peak resident memory (VmHWM), MB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return round(int(line.split()[1]) / 1024, 1)
    return 0.0


def timed(calls: list[Any]) -> list[float]:
    """Each call's time in ms."""
    times = []
    for call in calls:
        began = time.perf_counter()
        call()
        times.append((time.perf_counter() - began) * 1000)
    return times


def stats(times: list[float]) -> dict[str, float]:
    """p50 and p99, ms."""
    p50, p99 = percentiles(times)
    return {"p50_ms": round(p50, 3), "p99_ms": round(p99, 3)}


def measure_home(corpus: Corpus, items: int, writes: int, queries: list[str]) -> dict[str, Any]:
    """Seed a home of `items` notes and as many session records, then time it (module docstring)."""
    with tempfile.TemporaryDirectory(prefix="bx-growth-") as tmp:
        home = Path(tmp) / "home"
        seed_home(home, corpus, items, items)
        first = spawn(home)  # builds the index (a reindex), not timed here
        try:
            wait_for(first, lambda: index_ready(home))
        finally:
            first.send_signal(signal.SIGTERM)
            first.wait(timeout=600)
        started = time.perf_counter()
        process = spawn(home)
        try:
            wait_for(process, lambda: broker_call(home, 1, "memory", {"action": "note", "text": "started"}))
            start_s = time.perf_counter() - started
            wait_for(process, lambda: broker_call(home, 2, "recall", {"query": "started", "k": 10}))
            ready_s = time.perf_counter() - started
            failed: dict[str, str] = {}
            measured = workload(home, writes, queries)
            workload_rss = peak_rss_mb(process.pid)
            return {
                "items": items,
                "records": items,
                "start_s": round(start_s, 3),
                "ready_s": round(ready_s, 3),
                **measured,
                "peak_rss_mb": workload_rss,
                "commands": commands(home, failed),
                "failed": failed,
                "peak_rss_with_commands_mb": peak_rss_mb(process.pid),
            }
        finally:
            process.send_signal(signal.SIGTERM)
            process.wait(timeout=600)


def workload(home: Path, writes: int, queries: list[str]) -> dict[str, Any]:
    """Notes, identity adds and removes, recalls on the broker socket, interleaved."""
    notes, adds, removes, recalls = [], [], [], []
    for n in range(writes):
        text = f"Deploy window {n}: Thursdays after 14:00 UTC."
        notes += timed(
            [lambda n=n: broker_call(home, 10 + n, "memory", {"action": "note", "text": f"Seen {n}."})]
        )
        adds += timed(
            [
                lambda t=text, n=n: broker_call(
                    home, 10 + n, "memory", {"action": "add", "file": "memory", "text": t}
                )
            ]
        )
        removes += timed(
            [
                lambda t=text, n=n: broker_call(
                    home, 10 + n, "memory", {"action": "remove", "file": "memory", "old": t}
                )
            ]
        )
    for n, question in enumerate(queries):
        recalls += timed(
            [lambda q=question, n=n: broker_call(home, 10 + n, "recall", {"query": q[:500], "k": 10})]
        )
    return {"note": stats(notes), "add": stats(adds), "remove": stats(removes), "recall": stats(recalls)}


def commands(home: Path, failed: dict[str, str]) -> dict[str, float]:
    """The owner's commands, ms each (on the admin socket); a command that fails is named in `failed`
    with its error."""
    found: dict[str, float] = {}
    calls: dict[str, Any] = {
        "status": lambda: admin_call(home, "status"),
        "note": lambda: admin_call(home, "note", "Owner note from the benchmark."),
        "search": lambda: admin_call(home, "search", "deploy window", k=10),
        "items": lambda: admin_call(home, "items", limit=200),  # what `bxctl memory items` sends
        "review": lambda: admin_call(home, "review"),
        "tiers": lambda: admin_call(home, "tiers"),
        "proposals": lambda: admin_call(home, "proposals"),
        "log": lambda: admin_call(home, "log", "20"),
        "files": lambda: admin_call(home, "files"),
        "pending": lambda: admin_call(home, "pending"),
        "controls": lambda: admin_call(home, "controls"),
        "erasures": lambda: admin_call(home, "erasures"),
        "dream-show": lambda: admin_call(home, "dream-show"),
        "tiers_again": lambda: admin_call(home, "tiers"),  # the same, notes.md already parsed
        "review_again": lambda: admin_call(home, "review"),
        "export": lambda: admin_call(home, "export", str(home / "export.bxmem")),
    }
    for name, call in calls.items():
        began = time.perf_counter()
        try:
            call()
        except wire.PeerError as exc:  # recorded, not fatal: the table says which command failed
            failed[name] = f"{exc.code}: {exc}"
        found[name] = round((time.perf_counter() - began) * 1000, 1)
    started = time.perf_counter()
    wire.call(home / ADMIN, _reindex(), timeout=1800)
    found["reindex"] = round((time.perf_counter() - started) * 1000, 1)
    return found


def _reindex() -> Any:
    from boxmaker.proto.messages import Reindex

    return Reindex()


def fsync_floor(folder: Path, count: int = 200) -> dict[str, float]:
    """A 200-byte append and fsync on `folder`'s disk, p50/p99 ms."""
    path = folder / "fsync-floor.bin"
    times = []
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    try:
        for _ in range(count):
            began = time.perf_counter()
            os.write(fd, b"x" * 199 + b"\n")
            os.fsync(fd)
            times.append((time.perf_counter() - began) * 1000)
    finally:
        os.close(fd)
        path.unlink()
    return stats(times)


def fsyncs_per_commit() -> dict[str, int]:
    """How many fsyncs (files and folders) one `note` and one identity `add` make, in process."""
    found = {}
    with tempfile.TemporaryDirectory(prefix="bx-fsyncs-") as tmp:
        memory = Memoryd(load_config(None, str(Path(tmp) / "home")))
        memory.open()
        real = os.fsync
        for name, arguments in (
            ("note", {"action": "note", "text": "Counting fsyncs."}),
            ("add", {"action": "add", "file": "memory", "text": "Counting fsyncs."}),
        ):
            count = 0

            def counting(fd: int) -> None:
                nonlocal count
                count += 1
                real(fd)

            call = MemoryCall(
                request=ToolRequest(session="chat-fsyncs", call_id=name, tool="memory", arguments=arguments),
                taint=DataClass.PRIVATE,
                untrusted=False,
            )
            with mock.patch("os.fsync", counting):
                tool.call(memory.memory, call)
            found[name] = count
        memory.close()
    return found


def growth(corpus: Corpus, sizes: list[int], writes: int, queries: list[str], folder: Path) -> dict[str, Any]:
    """The growth table, the ratios against the smallest home, the fsync floor and fsyncs per commit."""
    rows = [measure_home(corpus, size, writes, queries) for size in sizes]
    base = rows[0]
    ratios = {
        f"{row['items']}": {
            what: round(row[what]["p50_ms"] / max(base[what]["p50_ms"], 1e-9), 2)
            for what in ("note", "add", "remove")
        }
        for row in rows[1:]
    }
    return {
        "rows": rows,
        "p50_ratio_to_first": ratios,
        "fsync": fsync_floor(folder),
        "fsyncs_per_commit": fsyncs_per_commit(),
    }
