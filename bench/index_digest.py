"""A digest of what `Index.rebuild` puts in an index, to check that a change to the build leaves the
index exactly as it was (issue 16: the build's speed work must not change a row).

Usage::

    python bench/index_digest.py HOME [--varied N]

HOME is a folder with ``sessions/`` (seeded by `corpus.write_sessions`, or a real home). ``--varied N``
first writes N extra sessions of mixed records into it (assistant turns with tool calls, tool results
of each class, tool summaries, turns loopd closed, loopd's own prompt, credentials of many shapes,
CJK, lone surrogates, texts past the context limit, a second epoch), seeded, so the same N gives the
same logs. The index is built into a temporary copy of the home's index folder; HOME's logs are only
read.

Printed: one SHA-256 per part and one over all: the ``logs``, ``origins`` and ``notes`` tables, every
token of the FTS5 table with its row, column and position (``fts5vocab`` instance), and the top 20
rowids with their bm25 scores for a few questions. Equal digests before and after a change mean the same
rows in the same rowid order, the same labels, the same indexed (redacted) text token for token, and
so the same scores and snippets (snippets are read back from the log lines the rows name).
"""

from __future__ import annotations

import argparse
import datetime as dt
import hashlib
import json
import random
import shutil
import sys
import tempfile
from pathlib import Path

from benchkit import open_home
from boxmaker.memoryd.index.query import build
from boxmaker.proto import fsio
from boxmaker.proto.labels import DataClass
from boxmaker.proto.records import (
    Assistant,
    SessionStart,
    ToolCall,
    ToolResult,
    ToolSummary,
    TurnEnd,
    User,
    encode_record,
    format_time,
)

_QUESTIONS = (
    "What did Caro say about the trip?",
    "when did they go hiking",
    "registry token npm",
    "password database",
    "北京 旅行",
)
_SECRETS = (
    "my key is AKIAIOSFODNN7EXAMPLE ok",
    "password=hunter2",
    "token: ghp_A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8",
    "db: postgres://app:Tr0ub4dor3@db.internal:5432/prod",
    "key split: sk-proj-Ab12Cd34 Ef56Gh78 Ij90Kl12 Mn34Op56 Qr78St90",
    "SERVICE_TOKEN=Zq8Xw2Ve6Rt4Yu1Io9Pa3Sd7Fg5Hj0Kl",
    "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAA\n-----END OPENSSH PRIVATE KEY-----",
    "ｓｋ－ｐｒｏｊ－Ａｂ１２Ｃｄ３４Ｅｆ５６Ｇｈ７８Ｉｊ９０",
    "the key AKIA\u200bIOSFODNN7EXAMPLE hides",
)
_SURROGATE_LINE = '{{"type":"user","time":"{when}","content":"bad \\ud83d half {n}"}}'
_WORDS = [
    "the",
    "a",
    "trip",
    "hiking",
    "Caro",
    "went",
    "to",
    "Paris",
    "in",
    "2023",
    "and",
    "MacBook",
    "iPhone",
    "TV",
    "USA",
    "we",
    "had",
    "fun",
    "with",
    "it",
    "北京",
    "旅行",
    "数据",
    "café",
    "naïve",
    "résumé",
    "ＡＢＣ",
    "don't",
    "X-Ray",
    "v2.1",
    "foo_bar",
    "a/b",
    "c=d",
    "e:f",
]


def _text(rng: random.Random, long: bool = False) -> str:
    words = [rng.choice(_WORDS) for _ in range(rng.randint(1, 3000 if long else 40))]
    if rng.random() < 0.15:
        words.insert(rng.randrange(len(words) + 1), rng.choice(_SECRETS))
    return rng.choice((" ", " ", "\n", "  ", "\t")).join(words)


def write_varied(sessions: Path, count: int, seed: int = 16) -> None:
    """Write `count` sessions of mixed records under `sessions` (module docstring)."""
    rng = random.Random(seed)
    start = dt.datetime(2024, 1, 1, tzinfo=dt.UTC)
    for n in range(count):
        folder = sessions / f"chat-varied{n:05d}"
        fsio.ensure_dir(folder)
        for epoch in range(rng.choice((1, 1, 2))):
            at = start + dt.timedelta(days=rng.randrange(900))
            lines = [
                encode_record(
                    SessionStart(time=format_time(at), epoch=epoch, slot=None, baseline="sha256:" + "0" * 64)
                )
            ]
            for i in range(rng.randint(5, 30)):
                when = format_time(at + dt.timedelta(seconds=20 * i))
                kind = rng.random()
                if kind < 0.4:
                    speaker = rng.choice((None, "Caro", "Mel", "loopd"))
                    lines.append(
                        encode_record(
                            User(time=when, content=_text(rng, rng.random() < 0.02), speaker=speaker)
                        )
                    )
                elif kind < 0.65:
                    calls = [
                        ToolCall(
                            id=f"c{i}{j}",
                            name=rng.choice(("recall", "shell")),
                            arguments=json.dumps({"q": _text(rng)}),
                        )
                        for j in range(rng.choice((0, 0, 1, 2)))
                    ]
                    content = rng.choice(("", "  ", _text(rng)))
                    lines.append(encode_record(Assistant(time=when, content=content, tool_calls=calls)))
                elif kind < 0.75:
                    label = rng.choice((DataClass.PUBLIC, DataClass.PRIVATE, DataClass.SECRET))
                    lines.append(
                        encode_record(
                            ToolResult(
                                time=when,
                                call="shell",
                                tool_call_id="c",
                                content=_text(rng),
                                data_class=label,
                                untrusted=rng.random() < 0.5,
                            )
                        )
                    )
                elif kind < 0.82:
                    lines.append(
                        encode_record(
                            ToolSummary(
                                time=when,
                                call="shell",
                                tool_call_id="c",
                                content=_text(rng),
                                data_class=DataClass.PRIVATE,
                                untrusted=rng.random() < 0.3,
                            )
                        )
                    )
                elif kind < 0.88:
                    lines.append(encode_record(Assistant(time=when, content="The turn was cancelled.")))
                    lines.append(encode_record(TurnEnd(time=when, reason="cancelled", code="x")))
                else:  # a lone surrogate, as a model may write one (escaped in the JSON)
                    lines.append(_SURROGATE_LINE.format(when=when, n=rng.randrange(99)).encode())
            (folder / f"{epoch}.jsonl").write_bytes(b"\n".join(lines) + b"\n")


def digest(home: Path) -> dict[str, str]:
    """Build the index of `home`'s sessions in a temporary home and return the digests."""
    with tempfile.TemporaryDirectory(prefix="bx-digest-") as tmp:
        work = Path(tmp)
        (work / "sessions").symlink_to((home / "sessions").resolve())
        index, _ = open_home(work)
        index.rebuild()
        conn = index.db.conn
        found: dict[str, str] = {}
        for part, sql in (
            ("logs", "SELECT id, name, records, offset, class, untrusted, tail FROM logs ORDER BY id"),
            ("origins", "SELECT * FROM origins ORDER BY rowid"),
            ("notes", "SELECT * FROM notes ORDER BY rowid"),
        ):
            found[part] = _hash(conn.execute(sql))
        conn.execute("CREATE VIRTUAL TABLE temp.v USING fts5vocab(main, hits, instance)")
        found["tokens"] = _hash(
            conn.execute("SELECT term, doc, col, offset FROM temp.v ORDER BY doc, col, offset")
        )
        scores = []
        for question in _QUESTIONS:
            match = build(question).match
            scores += conn.execute(
                "SELECT rowid, round(bm25(hits), 9) FROM hits WHERE hits MATCH ?"
                " ORDER BY bm25(hits), rowid LIMIT 20",
                (match,),
            ).fetchall()
        found["bm25"] = _hash(scores)
        found["rows"] = str(conn.execute("SELECT count(*) FROM origins").fetchone()[0])
        index.close()
    found["all"] = hashlib.sha256(json.dumps(found, sort_keys=True).encode()).hexdigest()[:16]
    return found


def _hash(rows: object) -> str:
    h = hashlib.sha256()
    for row in rows:  # type: ignore[attr-defined]
        h.update(repr(tuple(row)).encode("utf-8", "surrogatepass"))
    return h.hexdigest()[:16]


def main(argv: list[str] | None = None) -> int:
    """Print the digests of `HOME`'s index (module docstring)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("home", type=Path)
    parser.add_argument("--varied", type=int, default=0, help="write this many mixed sessions first")
    args = parser.parse_args(argv)
    if args.varied:
        if (args.home / "sessions").exists():
            shutil.rmtree(args.home / "sessions")
        write_varied(args.home / "sessions", args.varied)
    print(json.dumps(digest(args.home)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
