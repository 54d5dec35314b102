"""The journal read from its end (`journal.read_jsonl_newest_first`, issue 16): the same objects as
`read_jsonl` reversed, the same warnings naming the same line numbers, the torn tail left out, at every
block size, a caller that stops early never reading the start, and `containing` passing lines over."""

from __future__ import annotations

import json
import logging
import random
from pathlib import Path

import pytest

from boxmaker.memoryd.files import journal


def _file(rng: random.Random) -> bytes:
    lines = []
    for n in range(rng.randint(0, 30)):
        kind = rng.random()
        if kind < 0.1:
            lines.append(b"")
        elif kind < 0.2:
            lines.append(b"not json \xff")
        elif kind < 0.25:
            lines.append(b'{"id": 1}')  # a key missing
        elif kind < 0.3:
            lines.append(b"[1, 2]")
        else:
            record = {
                "id": n,
                "where": "x" * rng.randint(0, 40),
                "text": "caf\u00e9 \u2028 " * rng.randint(0, 3),
            }
            lines.append(json.dumps(record, ensure_ascii=False).encode())
    data = b"\n".join(lines) + (b"\n" if lines and rng.random() < 0.7 else b"")
    if rng.random() < 0.3:
        data += b'{"id": 99, "where": "torn' * rng.randint(1, 3)
    return data


def test_it_equals_read_jsonl_reversed_at_every_block_size(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    rng = random.Random(16)
    for trial in range(400):
        monkeypatch.setattr(journal, "BACKWARD_BLOCK", rng.choice([1, 2, 3, 7, 16, 64, 1 << 20]))
        path = tmp_path / f"{trial}.jsonl"
        path.write_bytes(_file(rng))
        with caplog.at_level(logging.WARNING):
            caplog.clear()
            want = list(reversed(journal.read_jsonl(path, ("id", "where"))))
            warned = sorted(r.getMessage() for r in caplog.records)
            caplog.clear()
            got = list(journal.read_jsonl_newest_first(path, ("id", "where")))
            assert got == want, path.read_bytes()
            assert sorted(r.getMessage() for r in caplog.records) == warned


def test_it_reads_only_the_end_for_the_newest_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "2026-12.jsonl"
    path.write_bytes(b"".join(json.dumps({"id": n, "where": "w"}).encode() + b"\n" for n in range(5000)))
    monkeypatch.setattr(journal, "BACKWARD_BLOCK", 4096)
    reads: list[int] = []
    real_open = Path.open

    class Counting:
        def __init__(self, handle: object) -> None:
            self.handle = handle

        def __getattr__(self, name: str) -> object:
            return getattr(self.handle, name)

        def read(self, size: int = -1) -> bytes:
            data: bytes = self.handle.read(size)  # type: ignore[attr-defined]
            reads.append(len(data))
            return data

        def __enter__(self) -> Counting:
            return self

        def __exit__(self, *exc: object) -> None:
            self.handle.close()  # type: ignore[attr-defined]

    monkeypatch.setattr(Path, "open", lambda self, *a, **k: Counting(real_open(self, *a, **k)))
    newest = next(journal.read_jsonl_newest_first(path, ("id", "where")))
    assert newest == {"id": 4999, "where": "w"}
    assert sum(reads) <= 4096 < path.stat().st_size


def test_containing_passes_other_lines_over_undecoded(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "2026-11.jsonl"
    path.write_bytes(
        b'{"id": 1, "where": "archive/2026-11-01.md"}\nnot json at all\n{"id": 2, "where": "notes.md"}\n'
    )
    with caplog.at_level(logging.WARNING):
        found = list(journal.read_jsonl_newest_first(path, ("id", "where"), containing=b"archive"))
    assert found == [{"id": 1, "where": "archive/2026-11-01.md"}]
    assert not caplog.records  # the bad line has no "archive" in it: not decoded, not warned about
