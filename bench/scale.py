"""Index build rate, recall latency and memory-write latency at scale, through memoryd's own code.

Usage::

    python bench/scale.py [--sizes 10000,100000,1000000] [--queries 1000] [--writes 1000] [--json]
                          [--data ../shared/data/locomo-dev.json]
    python bench/scale.py --items 0,1000,10000,100000 [--growth-writes 200] [--json]

With ``--items``, the growth benchmark instead (`growth`: a note, an identity add and remove, a recall,
the owner's commands and start-up through a real memoryd as the home grows).

For each size, a temporary home gets that many records of chat text as session logs in the project's
format (sessions of 10 to 40 turns between two speakers, one day each). The text is made from the
sentences of the LoCoMo conversations in `--data`, recombined, with their names replaced and one content
word in five replaced by a word drawn from a long-tailed (Zipf) vocabulary of made-up words, so the
index sees a realistic, growing vocabulary and distinct rows.

Measured:
- build: memoryd's indexer reading every log into a new index file and swapping it in
  (`Index.rebuild`: what memoryd does at start with no index, and `bxctl reindex`), records/s;
- recall: the LoCoMo questions through memoryd's recall layer (`Recaller.recall`, k = 10), p50/p99 ms,
  and the same questions end to end: a real memoryd process on the home, asked on its brokerd socket;
- write: `memory` calls through memoryd's service (`add`, then `remove` to stay under the limit,
  and `note` every third call), each journalled and fsynced, p50/p99 ms (once, on the smallest home).
"""

from __future__ import annotations

import argparse
import json
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from benchkit import open_home, percentiles
from boxmaker.memoryd import tool
from boxmaker.memoryd.config import load as load_config
from boxmaker.memoryd.service import Memoryd
from boxmaker.proto import wire
from boxmaker.proto.labels import DataClass
from boxmaker.proto.messages import MemoryCall, ToolRequest, ToolResponse
from corpus import Corpus, write_sessions
from growth import growth


def measure_size(corpus: Corpus, size: int, queries: list[str]) -> dict[str, Any]:
    """Build an index of `size` records and time recall on it."""
    with tempfile.TemporaryDirectory(prefix="bx-scale-") as tmp:
        home = Path(tmp)
        sessions = write_sessions(corpus, home / "sessions", size)
        index, recaller = open_home(home)
        started = time.perf_counter()
        index.rebuild()  # what memoryd does at start with an empty index, and `bxctl reindex`
        build_s = time.perf_counter() - started
        for question in queries[:50]:
            recaller.recall(question, 10, session="bench", bench=True)
        times = []
        for question in queries:
            began = time.perf_counter()
            recaller.recall(question, 10, session="bench", bench=True)
            times.append((time.perf_counter() - began) * 1000)
        size_mb = sum(p.stat().st_size for p in (home / "index").iterdir()) / 1e6
        index.close()
        over_socket = socket_recalls(home, queries)
    p50, p99 = percentiles(times)
    s50, s99 = percentiles(over_socket)
    return {
        "records": size,
        "sessions": sessions,
        "build_s": round(build_s, 2),
        "build_rate": round(size / build_s),
        "index_mb": round(size_mb, 1),
        "recall_p50_ms": round(p50, 3),
        "recall_p99_ms": round(p99, 3),
        "socket_p50_ms": round(s50, 3),
        "socket_p99_ms": round(s99, 3),
        "queries": len(times),
    }


def socket_recalls(home: Path, queries: list[str]) -> list[float]:
    """Time the same recalls end to end: a real memoryd on the home, asked on its brokerd socket."""
    process = subprocess.Popen(
        [sys.executable, "-m", "boxmaker.memoryd", "serve", "--home", str(home)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        broker = home / "run" / "broker-memory" / "memory.sock"
        deadline = time.monotonic() + 300
        while not broker.exists():
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("memoryd did not start")
            time.sleep(0.05)
        times = []
        for n, question in enumerate([*queries[:50], *queries]):
            request = ToolRequest(
                session="bench-socket",
                call_id=f"q{n}",
                tool="recall",
                arguments={"query": question[:500], "k": 10},
            )
            began = time.perf_counter()
            reply = wire.call(
                broker, MemoryCall(request=request, taint=DataClass.PRIVATE, untrusted=False), timeout=120
            )
            if n >= 50:
                times.append((time.perf_counter() - began) * 1000)
            if not isinstance(reply, ToolResponse) or reply.code != "ok":
                raise RuntimeError(f"recall failed: {reply}")
        return times
    finally:
        process.send_signal(signal.SIGTERM)
        process.wait(timeout=60)


def measure_writes(count: int) -> dict[str, Any]:
    """Time `memory` calls through memoryd's service on a fresh home (every one fsynced)."""
    with tempfile.TemporaryDirectory(prefix="bx-write-") as tmp:
        memory = Memoryd(load_config(None, str(Path(tmp) / "home")))
        memory.open()
        times = []
        for n in range(count):
            if n % 3 == 2:
                arguments = {
                    "action": "note",
                    "text": f"Seen on the dashboard: build {n} passed in {n % 97} minutes.",
                }
            elif n % 3 == 0:
                arguments = {
                    "action": "add",
                    "file": "memory",
                    "text": f"Deploy window {n}: Thursdays after 14:00 UTC.",
                }
            else:
                arguments = {
                    "action": "remove",
                    "file": "memory",
                    "old": f"Deploy window {n - 1}: Thursdays after 14:00 UTC.",
                }
            call = MemoryCall(
                request=ToolRequest(
                    session="bench-writes", call_id=f"c{n}", tool="memory", arguments=arguments
                ),
                taint=DataClass.PRIVATE,
                untrusted=False,
            )
            began = time.perf_counter()
            reply = tool.call(memory.memory, call)
            times.append((time.perf_counter() - began) * 1000)
            if reply.code not in ("ok", "noted"):
                raise RuntimeError(f"write {n} refused: {reply.output}")
        memory.close()
    p50, p99 = percentiles(times)
    return {"writes": count, "write_p50_ms": round(p50, 3), "write_p99_ms": round(p99, 3)}


def growth_table(found: dict[str, Any]) -> str:
    """The growth benchmark as Markdown (the README's performance section)."""
    rows = found["rows"]
    head = "| existing notes | " + " | ".join(f"{r['items']:,}" for r in rows) + " |"
    lines = [head, "|---" * (len(rows) + 1) + "|"]

    def row(name: str, cell: Any) -> None:
        lines.append(f"| {name} | " + " | ".join(cell(r) for r in rows) + " |")

    for what in ("note", "add", "remove", "recall"):
        row(f"`{what}` p50 / p99 ms", lambda r, w=what: f"{r[w]['p50_ms']:.1f} / {r[w]['p99_ms']:.1f}")
    row("memoryd start (answers) s", lambda r: f"{r['start_s']:.2f}")
    row("memoryd ready (recall) s", lambda r: f"{r['ready_s']:.2f}")
    row("peak RSS MB (start-up and workload)", lambda r: f"{r['peak_rss_mb']:.0f}")
    row("peak RSS MB (and the commands)", lambda r: f"{r.get('peak_rss_with_commands_mb', 0):.0f}")
    for name in rows[0]["commands"]:
        row(f"`bxctl memory {name}` ms", lambda r, n=name: f"{r['commands'][n]:,.0f}")
    for r in rows:
        for name, why in r.get("failed", {}).items():
            lines.append(f"- at {r['items']:,} items `{name}` failed: {why}")
    lines.append("")
    lines.append(f"p50 ratios to the first size: {json.dumps(found['p50_ratio_to_first'])}")
    lines.append(
        f"fsync floor: {json.dumps(found['fsync'])}; "
        f"fsyncs per commit: {json.dumps(found['fsyncs_per_commit'])}"
    )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark and print its numbers (a table, or JSON)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="10000,100000,1000000", help="comma-separated record counts")
    parser.add_argument("--queries", type=int, default=1000, help="recall queries per size")
    parser.add_argument("--writes", type=int, default=1000, help="memory writes to time")
    parser.add_argument(
        "--data", type=Path, default=Path(__file__).resolve().parents[2] / "shared/data/locomo-dev.json"
    )
    parser.add_argument(
        "--items",
        default="",
        help="comma-separated item counts for the growth table (e.g. 0,1000,10000,100000)",
    )
    parser.add_argument("--growth-writes", type=int, default=200, help="notes, adds and removes per home")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--json", action="store_true", help="print only a JSON object")
    args = parser.parse_args(argv)
    if not args.data.is_file():
        parser.error(f"{args.data} does not exist (the LoCoMo file the text is made from)")
    corpus = Corpus(args.data, args.seed)
    queries = (corpus.questions * (1 + args.queries // max(1, len(corpus.questions))))[: args.queries]
    if args.items:
        found = growth(
            corpus,
            [int(n) for n in args.items.split(",")],
            args.growth_writes,
            queries[:200],
            Path(tempfile.gettempdir()),
        )
        print(json.dumps(found) if args.json else growth_table(found))
        return 0
    results = []
    for size in (int(s) for s in args.sizes.split(",")):
        results.append(measure_size(corpus, size, queries))
        if not args.json:
            row = results[-1]
            print(
                f"{row['records']:>9,} records: build {row['build_rate']:>7,}/s ({row['build_s']} s, "
                f"{row['index_mb']} MB), recall p50 {row['recall_p50_ms']} ms, p99 {row['recall_p99_ms']} ms;"
                f" over the socket p50 {row['socket_p50_ms']} ms, p99 {row['socket_p99_ms']} ms",
                flush=True,
            )
    writes = measure_writes(args.writes)
    if args.json:
        print(json.dumps({"sizes": results, **writes}))
    else:
        print(f"memory write (fsync): p50 {writes['write_p50_ms']} ms, p99 {writes['write_p99_ms']} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
