"""Seed a home with notes shaped exactly as memoryd writes them, fast (issue 16's growth benchmark).

Usage::

    python bench/seed.py --home DIR [--items 100000] [--records 100000] [--years 5] [--burst 3000]
                         [--data ../shared/data/locomo-dev.json]

Each item is what one `memory` ``note`` call leaves: its entry in ``memory/notes.md`` (header
``§ noted <time> in session <id> · private · <mem-id> · <kind>``), its capture event in
``memory/items.jsonl`` and its journal line in ``memory/edits/YYYY-MM.jsonl`` (``events`` and ``notes``),
made with memoryd's own functions (`notes.render`, `items.capture_event`, `journal.encode_line`), so the
bytes are the writer's (tests/test_bench.py compares them with notes written through `Writer.note`).

The items are spread over `--years` of days (about the same number each day, at increasing times), and
`--burst` of them fall on one day (an import can produce thousands of ids of one day: ``-1000`` and on).
Most are knowledge notes without a scope (the ``lessons`` topic, memoryd's largest page); one in six
has a scope out of 40, one in twenty is a state item of one of 2,000 subjects. The texts are LoCoMo
sentences recombined (`corpus.Corpus`). `--records` adds that many session records (``sessions/``).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import sys
from pathlib import Path

from boxmaker.memoryd.files import chain
from boxmaker.memoryd.files.journal import Append, appended, encode_line
from boxmaker.memoryd.files.names import ITEMS_FILE
from boxmaker.memoryd.files.notes import Note, header_time, render, render_header
from boxmaker.memoryd.items.store import capture_event, item_id
from boxmaker.proto import fsio
from boxmaker.proto.ids import edit_id
from boxmaker.proto.labels import DataClass, Label
from corpus import Corpus, write_sessions

PRIVATE = Label(DataClass.PRIVATE, False)
START = dt.datetime(2021, 1, 4, 8, 0, tzinfo=dt.UTC)


def moments(count: int, years: int, burst: int) -> list[dt.datetime]:
    """`count` capture times: `burst` within an hour of one day in the middle, the rest spread evenly
    over `years`, in order."""
    period = 365 * years * 86400
    spread = count - min(burst, count)
    found = [START + dt.timedelta(seconds=n * period // max(1, spread)) for n in range(spread)]
    middle = START + dt.timedelta(days=365 * years // 2, hours=9, minutes=7)
    found += [middle + dt.timedelta(seconds=n) for n in range(min(burst, count))]
    return sorted(found)


def note_lines(
    position: int,
    moment: dt.datetime,
    ident: str,
    edit: str,
    *,
    text: str,
    kind: str,
    subject: str | None,
    scope: str | None,
    session: str,
    notes_at: int = 0,
    items_at: int = 0,
) -> tuple[bytes, bytes, bytes]:
    """What memoryd's writer appends for a session's `note` (call ``c<position>``): its notes.md entry,
    its items.jsonl event and its journal line, each with its newline; `notes_at` and `items_at` are the
    sizes of notes.md and items.jsonl before it (the journal line records where its appends landed)."""
    call = f"c{position}"
    entry = Note("noted", header_time(moment), session, "", PRIVATE, text, position, (ident, kind))
    time = moment.strftime("%Y-%m-%dT%H:%M:%SZ")
    event = capture_event(
        ident=ident,
        time=time,
        kind=kind,
        subject=subject,
        scope=scope,
        confidence=None,
        text=text,
        label=PRIVATE,
        source=f"sessions/{session}#call={call}",
        session=session,
        call=call,
        note=entry.key,
        edit=edit,
    )
    line = {
        "id": edit,
        "time": time,
        "session": session,
        "call": call,
        "untrusted": False,
        "action": "note",
        "file": "notes.md",
        "where": "notes.md",
        "before": [],
        "after": [text],
        "notes": [{"header": render_header(entry), "text": text}],
        "events": [event],
    }
    note, item = render(entry).encode("utf-8"), encode_line(event) + b"\n"
    line["appended"] = [
        appended(Append("notes.md", note), notes_at),
        appended(Append(ITEMS_FILE, item), items_at),
    ]
    return note, item, encode_line(line) + b"\n"


def seed_items(memory: Path, corpus: Corpus, count: int, years: int = 5, burst: int = 3000) -> int:
    """Write `count` notes as memoryd's writer would (module docstring); returns how many."""
    fsio.ensure_dir(memory / "edits")
    rng = corpus.rng
    scopes = [f"Project {corpus.names[i]}" for i in range(40)]
    subjects = [f"host{n}:address" for n in range(2000)]
    ordinals: dict[dt.date, int] = {}
    edits: dict[dt.date, int] = {}
    notes: list[bytes] = []
    events: list[bytes] = []
    journal: dict[str, list[bytes]] = {}
    notes_at = items_at = 0
    head = chain.GENESIS
    for position, moment in enumerate(moments(count, years, burst)):
        day = moment.date()
        ordinals[day] = ordinals.get(day, 0) + 1
        edits[day] = edits.get(day, 0) + 1
        ident, edit = item_id(day, ordinals[day]), edit_id(day, edits[day])
        roll = rng.random()
        kind, subject, scope = "knowledge", None, None
        if roll < 0.05:
            kind, subject = "state", rng.choice(subjects)
        elif roll < 0.22:
            scope = rng.choice(scopes)
        session = f"chat-{day:%Y%m%d}-{position % 3}"
        text = corpus.turn(rng.choice(corpus.names))[:600].strip() or "noted"
        made = note_lines(
            position,
            moment,
            ident,
            edit,
            text=text,
            kind=kind,
            subject=subject,
            scope=scope,
            session=session,
            notes_at=notes_at,
            items_at=items_at,
        )
        notes.append(made[0])
        events.append(made[1])
        notes_at, items_at = notes_at + len(made[0]), items_at + len(made[1])
        sealed = chain.seal(json.loads(made[2]), head)  # the journal's hash chain, as memoryd seals it
        head = str(sealed[chain.CHAIN])
        journal.setdefault(f"{moment:%Y-%m}", []).append(encode_line(sealed) + b"\n")
    (memory / "notes.md").write_bytes(b"".join(notes))
    (memory / "items.jsonl").write_bytes(b"".join(events))
    for month, lines in journal.items():
        (memory / "edits" / f"{month}.jsonl").write_bytes(b"".join(lines))
    return count


def seed_home(
    home: Path, corpus: Corpus, items: int, records: int, years: int = 5, burst: int = 3000
) -> None:
    """A home with `items` notes and `records` session records (memoryd creates the rest at start)."""
    fsio.ensure_dir(home / "memory")
    seed_items(home / "memory", corpus, items, years, burst)
    if records:
        write_sessions(corpus, home / "sessions", records)


def main(argv: list[str] | None = None) -> int:
    """Seed the home named on the command line."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--home", type=Path, required=True, help="a new or empty folder")
    parser.add_argument("--items", type=int, default=100_000)
    parser.add_argument("--records", type=int, default=100_000, help="session records")
    parser.add_argument("--years", type=int, default=5)
    parser.add_argument("--burst", type=int, default=3000, help="items captured on one day")
    parser.add_argument(
        "--data", type=Path, default=Path(__file__).resolve().parents[2] / "shared/data/locomo-dev.json"
    )
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args(argv)
    if (args.home / "memory").exists() and any((args.home / "memory").iterdir()):
        parser.error(f"{args.home}/memory is not empty: seed a new home")
    if not args.data.is_file():
        parser.error(f"{args.data} does not exist (the LoCoMo file the texts are made from)")
    seed_home(args.home, Corpus(args.data, args.seed), args.items, args.records, args.years, args.burst)
    print(f"seeded {args.home}: {args.items:,} items, {args.records:,} session records")
    return 0


if __name__ == "__main__":
    sys.exit(main())
