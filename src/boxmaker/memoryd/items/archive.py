"""The archive: ``memory/archive/YYYY-MM-DD.md``, written by memoryd's own daily timer with no model
(seed 003 sections 7.1-7.2, 9 and 13; DESIGN 11).

A run appends every captured item not yet archived (and not erased) to the archive file of the item's
capture day (a merged item's date is its newest member's; it is archived by its capture time), in
the deterministic Markdown rendering of seed section 9's structured item form
(`render_item`)::

    ## mem-2026-09-24-001

    - [2026-09-24] (state) The staging host is 10.0.0.7.
      - id: mem-2026-09-24-001
      - kind: state
      - subject: host:staging-ip
      - Status: active
      - Source: sessions/chat-…/0.jsonl#7
      - label: private

The ``## mem-…`` heading is the anchor ``archive/2026-09-24.md#mem-2026-09-24-001`` that becomes the
item's Source from then on (seed 9: prefer anchoring into the append-only layer). `Status` is the
status at capture (always `active`); the item store, index.md and the topics show the current one.

Rules:

- A file is only ever appended to (an existing day file is never rewritten), mode 0600, through the
  journal: one commit per run, action ``archive``, with one ``archive`` item event
  ``{"event": "archive", "time", "file", "ids"}`` per file appended to items.jsonl in the same commit.
  A run with nothing to archive journals ``archive-skip`` (no item event). Only an authorised erasure
  (seed 12.3) changes an archive file afterwards.
- Withdrawn items are archived too: the archive is cold raw evidence, never loaded by default (seed
  section 8 and checklist 8: neither the memory block nor recall nor the projections read it), and a
  withdrawal is a control on influence, not deletion (seed 12.2). Erased items are never archived.
- The timer (`ArchiveTimer`) runs once at start when today's run (UTC, by the daemon's clock) has not
  happened, then after each UTC midnight; the owner's ``bxctl memory archive`` runs it at once.
"""

from __future__ import annotations

import datetime as dt
import logging
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import msgspec

from boxmaker.memoryd.files.journal import Append, Change, Journal, encode_line
from boxmaker.memoryd.files.mdtext import label_text, md_text
from boxmaker.memoryd.files.names import ARCHIVE_DIR
from boxmaker.memoryd.items.live import ItemStore
from boxmaker.memoryd.items.store import Item
from boxmaker.proto import fsio

log = logging.getLogger("boxmaker.memoryd.archive")

#: Journal actions of a run (seed 003 section 8's log events).
ACTIONS = ("archive", "archive-skip")
#: The session name journal lines of the timer's runs carry (the owner's runs carry "owner").
TIMER = "memoryd"


def archive_file(day: str) -> str:
    """The archive file of a day, relative to memory/: ``archive/YYYY-MM-DD.md``."""
    return f"{ARCHIVE_DIR}/{day}.md"


def file_header(day: str) -> str:
    """The text a new archive file starts with."""
    return (
        f"# Archive {day}\n\n"
        "<!-- Written by memoryd's archive timer, with no model (seed 003 section 13). Append-only: "
        "nothing here is changed after it is written, except by an authorised erasure. Status is the "
        "status at capture; memory/index.md and memory/topics/ show the current one. Cold: never "
        "loaded into a session by default. -->\n\n"
    )


def render_item(item: Item) -> str:
    """One item in seed 9's structured form, from its capture fields only (deterministic)."""
    lines = [
        f"## {item.id}",
        "",
        f"- [{item.date}] ({item.kind}) {md_text(item.text)}",
        f"  - id: {item.id}",
        f"  - kind: {item.kind}",
    ]
    if item.subject is not None:
        lines.append(f"  - subject: {md_text(item.subject)}")
    if item.scope is not None:
        lines.append(f"  - Scope: {md_text(item.scope)}")
    lines.append("  - Status: active")
    # a merged item's Source enumerates its members' (seed 003 section 14.3)
    lines.append(f"  - Source: {md_text(item.source if item.sources else item.captured_from)}")
    lines.append(f"  - label: {label_text(item.label)}")
    if item.confidence is not None:
        lines.append(f"  - Confidence-Scheme: {md_text(item.confidence_scheme or '')}")
        lines.append(f"  - Confidence: {md_text(item.confidence)}")
    if item.corroborating_refs:
        lines.append("  - corroborating_refs:")
        lines += [f"    - {md_text(ref)}" for ref in item.corroborating_refs]
    if item.inspired_by is not None:
        lines.append(f"  - inspired_by: {md_text(item.inspired_by)}")
    return "\n".join(lines) + "\n\n"


def render_append(memory_dir: Path, file: str, items: Sequence[Item]) -> bytes:
    """The bytes a run appends to `file` (relative to `memory_dir`): the file's header first when the
    file does not exist yet or is empty, then each item."""
    path = memory_dir / file
    fresh = not path.exists() or path.stat().st_size == 0
    day = Path(file).stem
    text = (file_header(day) if fresh else "") + "".join(render_item(i) for i in items)
    return text.encode("utf-8")


def unarchived(items: Iterable[Item]) -> dict[str, list[Item]]:
    """The items a run archives, by archive file (sorted by file; capture order within a file)."""
    found: dict[str, list[Item]] = {}
    for item in items:
        if item.archive_ref is None and not item.erased:
            found.setdefault(archive_file(item.time[:10]), []).append(item)
    return dict(sorted(found.items()))


#: The archive files a run's sentence names one by one; the rest are counted.
LISTED = 10


@dataclass(frozen=True, slots=True)
class Run:
    """What one run did: the journal line's id and each file appended with the ids it got."""

    edit: str
    files: dict[str, list[str]] = field(default_factory=dict)

    @property
    def skipped(self) -> bool:
        """True when there was nothing to archive (journalled as archive-skip)."""
        return not self.files

    def sentence(self) -> str:
        """What the owner reads."""
        if self.skipped:
            return f"nothing to archive (journalled as archive-skip, {self.edit})"
        parts = [
            f"{len(ids):,} item{'' if len(ids) == 1 else 's'} to {file}"
            for file, ids in list(self.files.items())[:LISTED]
        ]
        if len(self.files) > LISTED:  # a first archive of a large import names thousands of days
            rest = list(self.files.values())[LISTED:]
            items = sum(len(ids) for ids in rest)
            parts.append(f"and {items:,} item{'' if items == 1 else 's'} to {len(rest):,} more files")
        return f"archived {', '.join(parts)} ({self.edit})"


def stamp(moment: dt.datetime) -> str:
    """``YYYY-MM-DDTHH:MM:SSZ``."""
    return moment.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def run(memory_dir: Path, items: Mapping[str, Item], journal: Journal, moment: dt.datetime, by: str) -> Run:
    """Archive every item of `items` not yet archived, in one journal commit; the caller holds the
    write lock and passes the fold as it is now.

    Raises:
        OSError: when a write fails (the journal's intent completes the commit at the next start).
    """
    plan = unarchived(items.values())
    entry: dict[str, Any] = {
        "session": by,
        "call": "",
        "action": "archive" if plan else "archive-skip",
        "file": ARCHIVE_DIR + "/",
        "where": next(iter(plan)) if len(plan) == 1 else ARCHIVE_DIR + "/",
        "before": [],
        "after": [],
        "untrusted": False,
    }
    if not plan:
        line = journal.commit(Change(entry))
        return Run(str(line["id"]))
    fsio.ensure_dir(memory_dir / ARCHIVE_DIR)
    time = stamp(moment)
    events = [
        {"event": "archive", "time": time, "file": file, "ids": [i.id for i in found]}
        for file, found in plan.items()
    ]
    appends = [Append(file, render_append(memory_dir, file, found)) for file, found in plan.items()]
    appends.append(Append("items.jsonl", b"".join(encode_line(e) + b"\n" for e in events)))
    entry["events"] = events
    line = journal.commit(Change(entry, appends))
    return Run(str(line["id"]), {file: [i.id for i in found] for file, found in plan.items()})


def archive_now(
    lock: AbstractContextManager[Any],
    items: ItemStore,
    journal: Journal,
    now: Callable[[], dt.datetime],
    by: str,
) -> Run:
    """Run the archive now under the write `lock` (seed 003 section 13), over the item store as it is;
    `by` is "owner" or the timer's name (`TIMER`).

    Raises:
        OSError: when a write fails (the journal's intent completes it at the next start).
    """
    with lock:  # the fold as it is, not a copy: nothing else appends while the lock is held
        return run(items.memory_dir, items.current().items, journal, now(), by)


class _RunLine(msgspec.Struct):
    """The two fields of a journal line `last_run_day` reads (the rest, such as the ids of every item
    an archive run moved, is skipped without being made into objects)."""

    action: object = None
    time: object = None


_RUN_LINE = msgspec.json.Decoder(_RunLine)


def last_run_day(journal: Journal) -> dt.date | None:
    """The UTC day of the newest archive or archive-skip line in the journal, or None."""
    for raw in journal.lines_newest_first(b"archive"):  # every action in ACTIONS has the word
        try:
            line = _RUN_LINE.decode(raw)
        except msgspec.DecodeError:
            continue
        if line.action in ACTIONS:
            try:
                return dt.date.fromisoformat(str(line.time or "")[:10])
            except ValueError:
                continue
    return None


class ArchiveTimer:
    """memoryd's daily archive timer: a thread that runs `job` once at start when today's run has not
    happened (`last_day`), then after each UTC midnight by `now`.

    It wakes at the next midnight, or after `poll` seconds at the latest (so a clock that jumps, a
    suspended machine or a test's clock is noticed), or when `poke` is called. A failing run is logged
    and tried again at the next wake.

    Args:
        job: one archive run (it takes the write lock itself).
        now: the clock (aware UTC datetimes).
        last_day: the day of the last run on record (read once, at start).
        poll: the longest sleep, in seconds.
    """

    def __init__(
        self,
        job: Callable[[], object],
        now: Callable[[], dt.datetime],
        last_day: Callable[[], dt.date | None],
        poll: float = 300.0,
    ) -> None:
        self.job = job
        self.now = now
        self.last_day = last_day
        self.poll = poll
        self._wake = threading.Event()
        self._stopping = threading.Event()
        self._checked = threading.Condition()
        self.checks = 0
        self.runs = 0
        self._thread: threading.Thread | None = None
        self._done: dt.date | None = None

    def start(self) -> None:
        """Run the start-up check in the caller's thread (so today's run is done, or tried, before
        memoryd answers), then start the thread (once)."""
        if self._thread is None:
            try:
                self._done = self.last_day()
            except OSError as exc:
                log.error("archive timer: cannot read the journal (%s); running today's archive", exc)
                self._done = None
            self._check()
            self._thread = threading.Thread(target=self._loop, name="memoryd-archive", daemon=True)
            self._thread.start()

    def stop(self) -> None:
        """Stop the thread and wait for it (a run in progress finishes first)."""
        self._stopping.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout=60)
            self._thread = None

    def poke(self) -> None:
        """Make the thread look at the clock now."""
        self._wake.set()

    def wait_checks(self, count: int, timeout: float = 10.0) -> bool:
        """Wait until the thread has looked at the clock `count` times in all; False on timeout."""
        with self._checked:
            return self._checked.wait_for(lambda: self.checks >= count, timeout)

    def _check(self) -> None:
        today = self.now().astimezone(dt.UTC).date()
        if self._done is None or today > self._done:
            try:
                self.job()
                self._done = today
                self.runs += 1
            except Exception:
                log.exception(
                    "the archive run failed; it is tried again at the next wake (runbook: memory-archive)"
                )
        with self._checked:
            self.checks += 1
            self._checked.notify_all()

    def _loop(self) -> None:
        while not self._stopping.is_set():
            self._wake.wait(self._sleep())
            self._wake.clear()
            if not self._stopping.is_set():
                self._check()

    def _sleep(self) -> float:
        moment = self.now().astimezone(dt.UTC)
        midnight = dt.datetime.combine(moment.date() + dt.timedelta(days=1), dt.time(), dt.UTC)
        return max(0.01, min(self.poll, (midnight - moment).total_seconds() + 0.5))
