"""Index build rate, recall latency and memory-write latency at scale, through memoryd's own code.

Usage::

    python bench/scale.py [--sizes 10000,100000,1000000] [--queries 1000] [--writes 1000] [--json]
                          [--data ../shared/data/locomo-dev.json]

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
import bisect
import datetime as dt
import itertools
import json
import random
import re
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from benchkit import open_home, percentiles, write_session
from boxmaker.memoryd import tool
from boxmaker.memoryd.config import load as load_config
from boxmaker.memoryd.service import Memoryd
from boxmaker.proto import wire
from boxmaker.proto.labels import DataClass
from boxmaker.proto.messages import MemoryCall, ToolRequest, ToolResponse

_SENTENCE = re.compile(r"(?<=[.!?])\s+")
_WORD = re.compile(r"[A-Za-z][A-Za-z']*")
_SYLLABLES = [c + v for c in "bcdfghjklmnprstvwz" for v in ("a", "e", "i", "o", "u", "ai", "ou", "ee")]
_STOP = {"the", "and", "that", "with", "this", "have", "from", "what", "your", "about", "just", "really"}


class Corpus:
    """Chat-like text from LoCoMo sentences, recombined (see the module's docstring)."""

    def __init__(self, data: Path, seed: int) -> None:
        self.rng = random.Random(seed)
        samples = json.loads(data.read_text(encoding="utf-8"))
        turns: list[str] = []
        self.names_seen: set[str] = set()
        self.questions: list[str] = []
        for sample in samples:
            conv = sample["conversation"]
            self.names_seen |= {conv["speaker_a"], conv["speaker_b"]}
            for key, value in conv.items():
                if re.fullmatch(r"session_\d+", key):
                    turns += [t["text"] for t in value]
            self.questions += [qa["question"] for qa in sample["qa"]]
        self.sentences = [s for t in turns for s in _SENTENCE.split(t) if s]
        self.lengths = [len(_SENTENCE.split(t)) for t in turns]
        self.names = sorted({self._word(2).capitalize() for _ in range(3000)})
        self.vocabulary = sorted({self._word(self.rng.randint(2, 4)) for _ in range(120_000)})
        self.rng.shuffle(self.vocabulary)
        self.weights = list(itertools.accumulate(1 / (r + 1) ** 1.05 for r in range(len(self.vocabulary))))

    def _word(self, syllables: int) -> str:
        return "".join(self.rng.choice(_SYLLABLES) for _ in range(syllables))

    def _zipf(self) -> str:
        return self.vocabulary[bisect.bisect_left(self.weights, self.rng.random() * self.weights[-1])]

    def turn(self, other: str) -> str:
        """One turn's text."""

        def swap(match: re.Match[str]) -> str:
            word = match.group()
            if word.split("'")[0] in self.names_seen:
                return other if self.rng.random() < 0.7 else self.rng.choice(self.names)
            if len(word) >= 4 and word.lower() not in _STOP and self.rng.random() < 0.2:
                return self._zipf()
            return word

        count = self.lengths[self.rng.randrange(len(self.lengths))]
        return " ".join(_WORD.sub(swap, self.rng.choice(self.sentences)) for _ in range(count))


def write_sessions(corpus: Corpus, sessions: Path, count: int) -> int:
    """Write `count` user records as session logs; returns the number of sessions."""
    written = 0
    session = 0
    start = dt.datetime(2021, 1, 1, tzinfo=dt.UTC)
    while written < count:
        session += 1
        a, b = corpus.rng.sample(corpus.names, 2)
        day = start + dt.timedelta(days=corpus.rng.randrange(5 * 365))
        turns = []
        for i in range(min(corpus.rng.randint(10, 40), count - written)):
            speaker, other = (a, b) if i % 2 == 0 else (b, a)
            turns.append((day + dt.timedelta(seconds=30 * i), speaker, corpus.turn(other)))
        written += len(turns)
        write_session(sessions / f"s{session}", day, turns)
    return session


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


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark and print its numbers (a table, or JSON)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="10000,100000,1000000", help="comma-separated record counts")
    parser.add_argument("--queries", type=int, default=1000, help="recall queries per size")
    parser.add_argument("--writes", type=int, default=1000, help="memory writes to time")
    parser.add_argument(
        "--data", type=Path, default=Path(__file__).resolve().parents[2] / "shared/data/locomo-dev.json"
    )
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--json", action="store_true", help="print only a JSON object")
    args = parser.parse_args(argv)
    if not args.data.is_file():
        parser.error(f"{args.data} does not exist (the LoCoMo file the text is made from)")
    corpus = Corpus(args.data, args.seed)
    queries = (corpus.questions * (1 + args.queries // max(1, len(corpus.questions))))[: args.queries]
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
