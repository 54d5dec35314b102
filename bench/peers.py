"""boxmaker's recall beside the engines a user could pick instead, on the same records in the same run
(issue 16). Needs the optional extra: ``pip install -e '.[bench]'`` (tantivy, bm25s, rank-bm25).

Usage::

    python bench/peers.py [--sizes 100000,1000000] [--queries 500] [--json]
                          [--data ../shared/data/locomo-dev.json]

Quality: every LoCoMo conversation of `--data`, as bench/locomo_recall.py indexes it (one home per
conversation, each turn ``speaker: text [image: caption]``), asked every question through boxmaker's
recall (k = 10), tantivy and bm25s over the same turn texts; any@5, frac@5 and mrr per engine.

Latency, per size in `--sizes`: that many session records of chat text (`corpus.Corpus`). Measured in one
run: boxmaker's build (`Index.rebuild`, what memoryd does with no index and ``bxctl reindex``), a plain
FTS5 table's insert of the same texts (``CREATE VIRTUAL TABLE t USING fts5(text)``), tantivy's build
(one thread), the index bytes per record; then the LoCoMo questions, interleaved query by query, through
boxmaker's recall in process (`Recaller.recall`, k = 10) and tantivy (English stemming tokenizer, one
searcher reused, k = 10, the question's terms as an OR query, the parse included, one thread), warm (the
first 50 questions are asked twice); then the same over Unix sockets: a real memoryd asked on its broker
socket, and tantivy behind the same framing in a process of its own (``--serve-tantivy``). p50/p99 ms
and their ratios boxmaker / tantivy.
"""

from __future__ import annotations

import argparse
import json
import re
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import msgspec

import locomo_recall
from benchkit import open_home, percentiles
from boxmaker.proto import frame
from boxmaker.proto.records import User, decode_record
from corpus import Corpus, write_sessions
from growth import broker_call, spawn, wait_for

_TERM = re.compile(r"[^\W_]+")


def tantivy_index(texts: list[str], folder: Path | None = None) -> Any:
    """A tantivy index of `texts` (document number = position), English stemming, one writer thread."""
    import tantivy

    builder = tantivy.SchemaBuilder()
    builder.add_text_field("body", stored=False, tokenizer_name="en_stem")
    builder.add_integer_field("n", stored=True, fast=True, indexed=False)
    index = tantivy.Index(builder.build(), path=None if folder is None else str(folder))
    writer = index.writer(heap_size=200_000_000, num_threads=1)
    for n, text in enumerate(texts):
        writer.add_document(tantivy.Document(body=text, n=n))
    writer.commit()
    writer.wait_merging_threads()
    index.reload()
    return index


def tantivy_search(index: Any, searcher: Any, question: str, k: int = 10) -> list[int]:
    """The best `k` document numbers for the question's terms as an OR query (the parse included)."""
    terms = [t.lower() for t in _TERM.findall(question)] or ["nothing"]
    query = index.parse_query(" OR ".join(terms), ["body"])
    return [searcher.doc(address)["n"][0] for _, address in searcher.search(query, k).hits]


def bm25s_search(texts: list[str]) -> Any:
    """bm25s over `texts` (English stemming and stop words): a function question -> positions."""
    import bm25s

    retriever = bm25s.BM25()
    retriever.index(bm25s.tokenize(texts, stopwords="en", show_progress=False), show_progress=False)

    def search(question: str, k: int = 10) -> list[int]:
        tokens = bm25s.tokenize([question], stopwords="en", show_progress=False)
        found, _ = retriever.retrieve(tokens, k=min(k, len(texts)), show_progress=False)
        return [int(n) for n in found[0]]

    return search


def quality(data: Path) -> dict[str, Any]:
    """LoCoMo any@5, frac@5, mrr for boxmaker, tantivy and bm25s (module docstring)."""
    outcomes: dict[str, list[locomo_recall.Outcome]] = {"boxmaker": [], "tantivy": [], "bm25s": []}
    for conv in locomo_recall.load(data):
        outcomes["boxmaker"] += locomo_recall.run_conversation(conv)
        turns = [
            (t["dia_id"], f"{t['speaker']}: {t.get('text', '')}" + _caption(t))
            for _, _, session in conv.sessions
            for t in session
        ]
        texts = [text for _, text in turns]
        index = tantivy_index(texts)
        searcher = index.searcher()
        bm25 = bm25s_search(texts)
        for question in conv.questions:
            for name, found in (
                ("tantivy", tantivy_search(index, searcher, question.text)),
                ("bm25s", bm25(question.text)),
            ):
                outcomes[name].append(locomo_recall.Outcome(question, [turns[n][0] for n in found], 0.0))
    wanted = ("any@1", "any@5", "frac@5", "any@10", "mrr")
    return {
        name: {k: v for k, v in locomo_recall.metrics(found).items() if k in wanted}
        for name, found in outcomes.items()
    }


def _caption(turn: dict[str, Any]) -> str:
    return f" [image: {turn['blip_caption']}]" if turn.get("blip_caption") else ""


def session_texts(sessions: Path) -> list[str]:
    """The text boxmaker indexes for each user record (``speaker: text``), log by log."""
    texts = []
    for log in sorted(sessions.glob("*/0.jsonl")):
        for line in log.read_bytes().splitlines():
            record = decode_record(line)
            if isinstance(record, User):
                texts.append(f"{record.speaker}: {record.content}" if record.speaker else record.content)
    return texts


def latency(corpus: Corpus, size: int, queries: list[str]) -> dict[str, Any]:
    """Build and query boxmaker and tantivy on `size` records (module docstring)."""
    with tempfile.TemporaryDirectory(prefix="bx-peers-") as tmp:
        home = Path(tmp) / "home"
        write_sessions(corpus, home / "sessions", size)
        texts = session_texts(home / "sessions")
        index, recaller = open_home(home)
        began = time.perf_counter()
        index.rebuild()
        build_s = time.perf_counter() - began
        index_bytes = sum(p.stat().st_size for p in (home / "index").iterdir())
        fts5_s = plain_fts5(Path(tmp) / "plain.sqlite3", texts)
        began = time.perf_counter()
        engine = tantivy_index(texts, _made(Path(tmp) / "tantivy"))
        tantivy_s = time.perf_counter() - began
        searcher = engine.searcher()
        ours, theirs = [], []
        for n, question in enumerate([*queries[:50], *queries]):
            t0 = time.perf_counter()
            recaller.recall(question[:500], 10, session="bench", bench=True)
            t1 = time.perf_counter()
            tantivy_search(engine, searcher, question)
            t2 = time.perf_counter()
            if n >= 50:
                ours.append((t1 - t0) * 1000)
                theirs.append((t2 - t1) * 1000)
        index.close()
        del searcher, engine
        sockets = over_sockets(home, Path(tmp) / "tantivy", queries)
    p50, p99 = percentiles(ours)
    t50, t99 = percentiles(theirs)
    return {
        "records": size,
        "build_s": round(build_s, 2),
        "build_rate": round(size / build_s),
        "plain_fts5_s": round(fts5_s, 2),
        "build_vs_plain_fts5": round(build_s / fts5_s, 2),
        "tantivy_build_s": round(tantivy_s, 2),
        "bytes_per_record": round(index_bytes / size),
        "in_process": _pair(p50, p99, t50, t99),
        "over_socket": sockets,
    }


def _made(folder: Path) -> Path:
    folder.mkdir()
    return folder


def _pair(p50: float, p99: float, t50: float, t99: float) -> dict[str, float]:
    return {
        "boxmaker_p50_ms": round(p50, 3),
        "boxmaker_p99_ms": round(p99, 3),
        "tantivy_p50_ms": round(t50, 3),
        "tantivy_p99_ms": round(t99, 3),
        "p50_ratio": round(p50 / t50, 2),
        "p99_ratio": round(p99 / t99, 2),
    }


def plain_fts5(path: Path, texts: list[str]) -> float:
    """Seconds to insert `texts` into a plain FTS5 table (one transaction)."""
    conn = sqlite3.connect(path)
    began = time.perf_counter()
    conn.execute("CREATE VIRTUAL TABLE t USING fts5(text)")
    with conn:
        conn.executemany("INSERT INTO t(text) VALUES (?)", ((t,) for t in texts))
    elapsed = time.perf_counter() - began
    conn.close()
    return elapsed


def over_sockets(home: Path, tantivy_dir: Path, queries: list[str]) -> dict[str, float]:
    """The same questions, interleaved: memoryd's broker socket and tantivy behind the same framing."""
    socket_path = home / "tantivy.sock"
    server = subprocess.Popen(
        [sys.executable, __file__, "--serve-tantivy", str(tantivy_dir), str(socket_path)],
        stdout=subprocess.DEVNULL,
    )
    memoryd = spawn(home)
    try:
        wait_for(memoryd, lambda: broker_call(home, 0, "recall", {"query": "warm up", "k": 10}))
        while not socket_path.exists():
            time.sleep(0.05)
        ours, theirs = [], []
        for n, question in enumerate([*queries[:50], *queries]):
            t0 = time.perf_counter()
            broker_call(home, n, "recall", {"query": question[:500], "k": 10})
            t1 = time.perf_counter()
            ask_tantivy(socket_path, question)
            t2 = time.perf_counter()
            if n >= 50:
                ours.append((t1 - t0) * 1000)
                theirs.append((t2 - t1) * 1000)
    finally:
        memoryd.send_signal(signal.SIGTERM)
        memoryd.wait(timeout=600)
        server.send_signal(signal.SIGTERM)
        server.wait(timeout=60)
    return _pair(*percentiles(ours), *percentiles(theirs))


def ask_tantivy(path: Path, question: str) -> list[int]:
    """One question to the tantivy server (a frame out, a frame back, as memoryd's sockets do)."""
    import socket

    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.connect(str(path))
        frame.send_frame(sock, msgspec.json.encode({"query": question, "k": 10}))
        return list(msgspec.json.decode(frame.recv_frame(sock))["hits"])


def serve_tantivy(folder: Path, path: Path) -> None:
    """Answer framed questions on `path` from the tantivy index in `folder`, one at a time."""
    import socket

    import tantivy

    index = tantivy.Index.open(str(folder))
    searcher = index.searcher()
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as server:
        server.bind(str(path))
        server.listen(16)
        signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
        while True:
            conn, _ = server.accept()
            with conn:
                asked = msgspec.json.decode(frame.recv_frame(conn))
                hits = tantivy_search(index, searcher, asked["query"], asked["k"])
                frame.send_frame(conn, msgspec.json.encode({"hits": hits}))


def main(argv: list[str] | None = None) -> int:
    """Run the comparison and print it (a summary, or JSON)."""
    if argv is None and len(sys.argv) == 4 and sys.argv[1] == "--serve-tantivy":
        serve_tantivy(Path(sys.argv[2]), Path(sys.argv[3]))
        return 0
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="100000,1000000", help="comma-separated record counts")
    parser.add_argument("--queries", type=int, default=500)
    parser.add_argument(
        "--data", type=Path, default=Path(__file__).resolve().parents[2] / "shared/data/locomo-dev.json"
    )
    parser.add_argument("--skip-quality", action="store_true")
    parser.add_argument("--json", action="store_true", help="print only a JSON object")
    args = parser.parse_args(argv)
    try:
        import bm25s  # noqa: F401
        import tantivy  # noqa: F401
    except ImportError:
        parser.error("the peers need the bench extra: pip install -e '.[bench]'")
    corpus = Corpus(args.data, 1)
    queries = (corpus.questions * (1 + args.queries // len(corpus.questions)))[: args.queries]
    found: dict[str, Any] = {"quality": None if args.skip_quality else quality(args.data), "sizes": []}
    if not args.json and found["quality"]:
        print(json.dumps(found["quality"]), flush=True)
    for size in (int(s) for s in args.sizes.split(",") if s):
        found["sizes"].append(latency(corpus, size, queries))
        if not args.json:
            print(json.dumps(found["sizes"][-1]), flush=True)
    if args.json:
        print(json.dumps(found))
    return 0


if __name__ == "__main__":
    sys.exit(main())
