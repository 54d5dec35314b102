"""What memoryd's start-up check costs (issue 14): a home of N notes (each a journal line, a notes.md
entry and an items.jsonl capture, shaped as memoryd writes them, with ``appended``), checked three ways:

- without a checkpoint (the first start after an upgrade, or a lost checkpoint): the whole journal;
- with a checkpoint and K commits since (a start after a crash);
- with a checkpoint and nothing since (a start after a clean stop).

Usage: ``.venv/bin/python bench/startcheck.py [--items 100000] [--since 100] [--json]``. The home is
written directly (no fsync) so building it is quick; the check reads it as memoryd does at start.
"""

from __future__ import annotations

import argparse
import datetime as dt
import hashlib
import json
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from boxmaker.memoryd.files.checkpoint import Checkpoints
from boxmaker.memoryd.files.journal import Append, Journal, appended, encode_line
from boxmaker.memoryd.startcheck import check
from boxmaker.proto import fsio

START = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)


class Home:
    """A memory folder being written as memoryd writes notes: journal line, notes.md, items.jsonl."""

    def __init__(self, memory: Path) -> None:
        self.memory = memory
        fsio.ensure_dir(memory / "edits")
        self.sizes = {"notes.md": 0, "items.jsonl": 0}
        self.count = 0

    def write(self, n: int) -> None:
        """Append `n` notes (one journal line each), in one write per file."""
        journal, notes, items = [], [], []
        for _ in range(n):
            self.count += 1
            k = self.count
            moment = START + dt.timedelta(seconds=k * 37)
            stamp = moment.strftime("%Y-%m-%dT%H:%M:%SZ")
            ident = f"mem-{moment:%Y-%m-%d}-{k:03d}"
            text = f"note {k}: the ferry to the north quay leaves at {k % 24:02d}:15 when the tide allows"
            header = f"§ noted {moment:%Y-%m-%dT%H:%MZ} in session chat-bench · private · {ident} · knowledge"
            note = f"{header}\n{text}\n\n".encode()
            event = {"event": "capture", "id": ident, "time": stamp, "kind": "knowledge", "text": text}
            event_bytes = encode_line(event) + b"\n"
            line: dict[str, Any] = {
                "id": f"{moment:%Y-%m-%d}-{k:04d}",
                "time": stamp,
                "session": "chat-bench",
                "call": f"c{k}",
                "action": "note",
                "file": "notes.md",
                "where": "notes.md",
                "before": [],
                "after": [text],
                "untrusted": False,
                "notes": [{"header": header, "text": text}],
                "events": [event],
                "appended": [
                    appended(Append("notes.md", note), self.sizes["notes.md"]),
                    appended(Append("items.jsonl", event_bytes), self.sizes["items.jsonl"]),
                ],
            }
            self.sizes["notes.md"] += len(note)
            self.sizes["items.jsonl"] += len(event_bytes)
            notes.append(note)
            items.append(event_bytes)
            journal.append(encode_line(line) + b"\n")
        fsio.append_bytes(self.memory / "edits" / "2026-01.jsonl", b"".join(journal), sync=False)
        fsio.append_bytes(self.memory / "notes.md", b"".join(notes), sync=False)
        fsio.append_bytes(self.memory / "items.jsonl", b"".join(items), sync=False)


def timed(memory: Path, journal: Journal) -> tuple[float, int]:
    started = time.perf_counter()
    found = check(memory, journal)
    return time.perf_counter() - started, len(found)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--items", type=int, default=100_000)
    parser.add_argument("--since", type=int, default=100)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bx-startcheck-") as root:
        memory = Path(root) / "memory"
        home = Home(memory)
        for _ in range(args.items // 10_000):
            home.write(10_000)
        home.write(args.items % 10_000)
        journal = Journal(memory, lambda: START)
        none_s, none_found = timed(memory, journal)
        checkpoints = Checkpoints(memory, journal, threading.Lock())
        checkpoints.checked_now([])
        clean_s, clean_found = timed(memory, journal)
        home.write(args.since)
        since_s, since_found = timed(memory, journal)
        result = {
            "items": args.items,
            "journal_mb": round((memory / "edits" / "2026-01.jsonl").stat().st_size / 1e6, 1),
            "notes_mb": round((memory / "notes.md").stat().st_size / 1e6, 1),
            "no_checkpoint_s": round(none_s, 3),
            "checkpoint_nothing_since_s": round(clean_s, 4),
            "checkpoint_since": args.since,
            "checkpoint_with_since_s": round(since_s, 4),
            "findings": none_found + clean_found + since_found,
            "digest": hashlib.sha256((memory / "notes.md").read_bytes()[-4096:]).hexdigest()[:12],
        }
    if args.json:
        print(json.dumps(result))
        return
    print(
        f"start-up check at {result['items']:,} notes (journal {result['journal_mb']} MB, notes.md "
        f"{result['notes_mb']} MB): no checkpoint {result['no_checkpoint_s']} s; checkpoint and nothing "
        f"since {result['checkpoint_nothing_since_s']} s; checkpoint and {args.since} commits since "
        f"{result['checkpoint_with_since_s']} s; findings {result['findings']}"
    )


if __name__ == "__main__":
    main()
