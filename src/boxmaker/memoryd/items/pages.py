"""index.md and topics/ kept equal to a full render, one change at a time (seed 003 sections 10-11;
DESIGN 8; issue 16).

`projections.render` makes every page from every item; at 100,000 items that is seconds per note. `Pages`
keeps what the pages are made of (each topic's items, its triggers and labels counted, the newest hot
items, the pending-cleanup items) and is told of every change by the item store (`ItemStore.listeners`):
only the topics a change touched are rendered again, with index.md, and written where their bytes
changed. The bytes are always those `projections.render` would give for the same items and controls.

When a page is written:

- after every commit (`flush`, the journal's listener), a touched topic page of at most `SYNC_ITEMS`
  items and index.md, before the answer goes back;
- a larger topic page (an import of thousands of notes without a scope: the ``lessons`` topic) on a
  background thread, at most once per `DEBOUNCE` seconds while writes go on (and never more than a
  fifth of the time: `BACKGROUND_SHARE`), in the gaps between requests (`requests`, which memoryd
  holds around each: `pagefiles.Requests`); the `memory` tool's ``index`` and ``topic`` actions never
  read the files (`page`), so no reader of memoryd sees an old page.

The mark (``memory/.projections.json``, `PAGES_MARK`): once every page is written, the item log's
identity and the offset through which the pages show it, and the controls' size and mtime. At start
(`open`) the log is folded up to that offset, the lines after it are folded as changes, and the pages they
touch are rendered: a crash between a commit and its pages (kill -9) leaves pages equal to a full render
after the restart. A missing or unusable mark, or controls changed since, renders every page. The mark
holds numbers only and is written without fsync: a mark that did not reach the disk is older, which only
renders more. The files side (a page written only when its bytes change, a large page streamed, the
mark) is `pagefiles`.
"""

from __future__ import annotations

import bisect
import heapq
import logging
import os
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path

from boxmaker.memoryd.files.names import INDEX_FILE, TOPICS_DIR
from boxmaker.memoryd.items import pagefiles
from boxmaker.memoryd.items.live import Change, ItemStore
from boxmaker.memoryd.items.pageparts import (
    NOT_YET,
    Hidden,
    Withheld,
    hot_key,
    strictest,
    take_away,
    trigger_values,
)
from boxmaker.memoryd.items.projections import (
    FALLBACK_TOPIC,
    FALLBACK_TRIGGER,
    MAX_PENDING,
    MAX_TOPICS,
    RECENT,
    Page,
    index_text,
    topic_chunks,
    topic_of,
    topic_page,
)
from boxmaker.memoryd.items.store import Item
from boxmaker.memoryd.sentences import Refusal
from boxmaker.memoryd.sentences import files as files_sentences
from boxmaker.proto import fsio
from boxmaker.proto.labels import Label

log = logging.getLogger("boxmaker.memoryd.projections")

#: A topic page of more items than this is written on the background thread.
SYNC_ITEMS = 2000
#: The background thread waits this long (seconds) after a change before it writes, so a burst of
#: writes costs one page write.
DEBOUNCE = 0.5
#: After writing large pages for S seconds the background writer waits at least this many times S,
#: so it takes a small share of the CPU while notes stream in.
BACKGROUND_SHARE = 4
#: How many of the newest hot items are kept at hand for index.md's recent activity.
KEPT_RECENT = 4 * RECENT


class Pages:
    """The projections of one home, kept up to date (module docstring). Thread-safe.

    Args:
        memory_dir: the home's ``memory/``.
        items: the home's item store (this registers itself as its listener).
        withheld: what is withdrawn now (`Controls.exclusion`).
        controls: controls.jsonl, whose size and mtime the mark records.
        requests: the requests memoryd answers (shared with the index's upkeep; a new one when not
            given).
    """

    def __init__(
        self,
        memory_dir: Path,
        items: ItemStore,
        withheld: Callable[[], Withheld],
        controls: Path,
        requests: pagefiles.Requests | None = None,
    ) -> None:
        self.memory_dir = memory_dir
        self.items = items
        self.withheld = withheld
        self.controls = controls
        self._mutex = threading.RLock()
        self._wake = threading.Condition(self._mutex)
        self._current: Withheld = NOT_YET
        self._withholding = False  # something is withdrawn now
        self._members: dict[str, dict[str, None]] = {}
        self._unsorted: set[str] = set()
        self._triggers: dict[str, Counter[str]] = {}
        self._labels: dict[str, Counter[Label]] = {}
        self._summaries: dict[str, tuple[list[str], Label]] = {}  # index.md's Topic Map, per topic
        self._recent: list[tuple[str, str]] = []  # ascending; the newest KEPT_RECENT hot keys
        self._complete = True  # _recent holds every hot key
        self._pending: dict[str, None] = {}
        self._pointing: dict[str, set[str]] = {}
        self._dirty: set[str] = set()
        self._deferred: set[str] = set()
        self._writing = 0
        self._index = ""
        self._stopping = False
        self._thread: threading.Thread | None = None
        #: Page writes done (topic pages and index.md), for the benchmark and tests.
        self.written = 0
        #: The requests being answered now: the background writer waits for a gap between them.
        self.requests = requests or pagefiles.Requests()

    # Start and stop -----------------------------------------------------------------------------

    def open(self) -> None:
        """Fold the log up to the mark, take the lines after it as changes, write the pages they
        touch (every page without a usable mark), and start the background writer.

        Raises:
            OSError: when the log cannot be read (the pages are then written at the next change).
        """
        self.requests.stopping(None)  # a reopen after `close`
        for leftover in (self.memory_dir / TOPICS_DIR).glob(".*.tmp-*"):  # a write a crash interrupted
            leftover.unlink(missing_ok=True)
        mark = pagefiles.read_mark(self.memory_dir, self.items.path, self.controls)
        self.items.refold(upto=mark)
        with self._mutex:
            self._rebuild(everything=mark is None, shown=mark is not None)
            self.items.listeners.append(self.changed)
        self.items.follow()
        self.flush()
        self._thread = threading.Thread(target=self._background, name="projections", daemon=True)
        self._thread.start()

    def close(self) -> None:
        """Write what the background writer still holds, at full speed, then stop it. A large page not
        written within `pagefiles.STOP_BUDGET` seconds is left as it was on disk, with the mark not
        moved past the change: the next start renders it (as after a crash), so a stop never waits
        long (a 20 MB page written in the gaps took 30 s after the stop signal)."""
        self.requests.stopping(pagefiles.STOP_BUDGET)
        with self._mutex:
            self._stopping = True
            self._wake.notify_all()
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        self._write_deferred()

    # Keeping the parts up to date ----------------------------------------------------------------

    def changed(self, changes: list[Change] | None) -> None:
        """The item store's listener: `changes` (before, after), or None after a whole refold."""
        with self._mutex:
            if changes is None:
                self._rebuild(everything=True)
                return
            if self._check_controls():
                return
            for old, new in changes:
                self._move(old, new)

    def _check_controls(self) -> bool:
        """Count the parts again when what is withdrawn changed since; True when it had."""
        if self.withheld() == self._current:
            return False
        self._rebuild(everything=False)
        return True

    def _rebuild(self, everything: bool, shown: bool = False) -> None:
        """Count every part again from the fold (at start, after a refold: every page is written; after
        the controls changed: the pages whose items, or whose pointers' targets, were withdrawn or
        reinstated; at start with a usable mark, `shown`: the pages already show this fold, so only
        index.md is rendered again, and the lines after the mark mark their own pages)."""
        before = self._members  # its dicts are replaced below, never changed: no copy is needed
        self._current = self.withheld()
        self._withholding = bool(self._current)
        self._members, self._triggers, self._labels, self._summaries = {}, {}, {}, {}
        self._unsorted.clear()
        self._pending, self._pointing = {}, {}
        for item in self.items.folded.items.values():
            self._move(None, item, quiet=True)
        self._rescan_recent()
        self._dirty.add(INDEX_FILE)
        if everything:
            self._dirty |= set(before) | set(self._members)
            return
        if shown:  # but a page deleted since is written again
            try:
                present = {entry.removesuffix(".md") for entry in os.listdir(self.memory_dir / TOPICS_DIR)}
            except OSError:
                present = set()
            self._dirty |= self._members.keys() - present
            return
        # compared key by key, never as sets of every id (14 MB at 100,000 items, at every start)
        empty: dict[str, None] = {}
        changed = {
            name
            for name in before.keys() | self._members.keys()
            if before.get(name, empty).keys() != self._members.get(name, empty).keys()
        }
        self._dirty |= changed
        fold = self.items.folded
        for target, pointers in self._pointing.items():
            # only what is withdrawn changed, not the items: a target is in its own topic or in none
            found = fold.items.get(target)
            name = topic_of(found) if found is not None else ""
            if (target in before.get(name, empty)) == (target in self._members.get(name, empty)):
                continue
            for ident in pointers:
                pointer = fold.items.get(ident)
                if pointer is not None and self._visible(pointer):
                    self._dirty.add(topic_of(pointer))

    def _visible(self, item: Item | None) -> bool:
        return item is not None and not item.erased and not (self._withholding and self._current.item(item))

    def _move(self, old: Item | None, new: Item, quiet: bool = False) -> None:
        was, now = self._visible(old), self._visible(new)
        if old is not None and old.superseded_by:
            self._pointing.get(old.superseded_by, set()).discard(old.id)
        if new.superseded_by:
            self._pointing.setdefault(new.superseded_by, set()).add(new.id)
        if was and old is not None:
            self._leave(old, stays=now and topic_of(old) == topic_of(new))
        if now:
            # a capture is the fold's newest item, and a rebuild enters items in capture order: only an
            # item moving between topics can land before a member (so the fold's position table, 6 MB
            # at 100,000 items, is made only then)
            self._enter(new, in_order=quiet or old is None)
        if not quiet:
            self._dirty.add(INDEX_FILE)
            self._dirty.update(topic_of(i) for i in (old, new) if i is not None and self._visible(i))
            if was != now:  # pages that point at it now say (withdrawn), or its id again
                for ident in self._pointing.get(new.id, ()):
                    pointer = self.items.folded.items.get(ident)
                    if pointer is not None and self._visible(pointer):
                        self._dirty.add(topic_of(pointer))

    def _leave(self, item: Item, stays: bool) -> None:
        topic = topic_of(item)
        members = self._members[topic]
        if not stays:
            members.pop(item.id, None)
        self._summaries.pop(topic, None)
        if members:
            take_away(self._triggers[topic], trigger_values(item))
            take_away(self._labels[topic], (item.label,))
        else:
            del self._members[topic], self._triggers[topic], self._labels[topic]
            self._unsorted.discard(topic)
        self._pending.pop(item.id, None)
        key = hot_key(item)
        if key is not None:
            at = bisect.bisect_left(self._recent, key)
            if at < len(self._recent) and self._recent[at] == key:
                del self._recent[at]
                if len(self._recent) < RECENT and not self._complete:
                    self._rescan_recent()

    def _enter(self, item: Item, in_order: bool) -> None:
        topic = topic_of(item)
        members = self._members.setdefault(topic, {})
        if item.id not in members:
            fold = self.items.folded
            if not in_order and members and fold.position(item.id) < fold.position(next(reversed(members))):
                self._unsorted.add(topic)
            members[item.id] = None
        self._summaries.pop(topic, None)
        triggers = self._triggers.get(topic)
        if triggers is None:
            triggers = self._triggers[topic] = Counter()
            self._labels[topic] = Counter()
        values = trigger_values(item)
        if values:
            triggers.update(values)
        self._labels[topic][item.label] += 1
        if item.status == "pending-cleanup" and item.merged_into is None:
            self._pending[item.id] = None
        key = hot_key(item)
        if key is not None and (len(self._recent) < KEPT_RECENT or key > self._recent[0]):
            bisect.insort(self._recent, key)
            if len(self._recent) > KEPT_RECENT:
                del self._recent[0]
                self._complete = False

    def _rescan_recent(self) -> None:
        # the newest KEPT_RECENT keys, never a list of every item's key (100,000 tuples at start)
        found = 0

        def keys() -> Iterator[tuple[str, str]]:
            nonlocal found
            for item in self.items.folded.items.values():
                key = hot_key(item)
                if key is not None and self._visible(item):
                    found += 1
                    yield key

        self._recent = sorted(heapq.nlargest(KEPT_RECENT, keys()))
        self._complete = found <= KEPT_RECENT

    # Rendering -----------------------------------------------------------------------------------

    def page(self, topic: str | None) -> Page | None:
        """index.md (`topic` None) or a topic page as it is now, or None for an unknown topic."""
        with self._mutex:
            self._check_controls()
            if topic is not None:
                return self._topic(topic)
            text = self._index_text()
            label = strictest(label for counts in self._labels.values() for label in counts)
            return Page(text, label, ())

    def topic_named(self, topic: str) -> Page | Refusal:
        """The topic page the `memory` tool's ``topic`` action names (``topics/`` and ``.md`` may be
        given or not), or ``refused:not-found`` naming the known topics."""
        name = topic.removeprefix(f"{TOPICS_DIR}/").removesuffix(".md")
        page = self.page(name)
        return files_sentences.unknown_topic(topic, self.topics()) if page is None else page

    def topics(self) -> list[str]:
        """The topics that have a page now."""
        with self._mutex:
            return sorted(self._members)

    def _topic(self, name: str) -> Page | None:
        parts = self._parts(name)
        return None if parts is None else topic_page(name, *parts())

    def _parts(self, name: str) -> Callable[[], tuple[list[Item], Hidden]] | None:
        """What a topic page is made of, taken under the mutex; rendering it (from what the returned
        call gives) needs no lock, so a large page is rendered while writes go on (its later changes
        mark it again)."""
        members = self._members.get(name)
        if not members:
            return None
        ids, unsorted = list(members), name in self._unsorted
        fold, hidden = self.items.folded, Hidden(self.items.folded.items, self._current)

        def parts() -> tuple[list[Item], Hidden]:
            if unsorted:
                ids.sort(key=fold.position)
            return [fold.items[i] for i in ids], hidden

        return parts

    def _index_text(self) -> str:
        fold = self.items.folded
        recent = [fold.items[ident] for _, ident in reversed(self._recent[-RECENT:])]
        names = sorted(self._members)
        topics = []
        for name in names[:MAX_TOPICS]:
            summary = self._summaries.get(name)
            if summary is None:
                triggers = sorted(self._triggers[name]) or [
                    FALLBACK_TRIGGER if name == FALLBACK_TOPIC else name.replace("-", " ")
                ]
                summary = self._summaries[name] = (triggers, strictest(self._labels[name]))
            topics.append((name, *summary))
        pending = sorted(self._pending, key=fold.position)
        shown = [fold.items[i] for i in pending[:MAX_PENDING]]
        hidden = Hidden(fold.items, self._current)
        return index_text(
            recent, topics, topic_count=len(names), pending=shown, pending_count=len(pending), hidden=hidden
        )

    # Writing ---------------------------------------------------------------------------------------

    def flush(self) -> None:
        """Write index.md and the touched topic pages of at most `SYNC_ITEMS` items now; hand the
        larger ones to the background writer (the journal's listener, after every commit). A failure
        is logged: the pages are written again at the next change and at start."""
        with self._mutex:
            self._check_controls()
            taken, self._dirty = self._dirty, set()
            now: dict[str, Page | None] = {}
            for name in sorted(taken):
                if name == INDEX_FILE:
                    continue
                if len(self._members.get(name, ())) > SYNC_ITEMS:
                    self._deferred.add(name)
                    self._wake.notify_all()
                else:
                    now[name] = self._topic(name)
            index = self._index_text() if INDEX_FILE in taken else None
            self._writing += 1
        try:
            self._write(now, index)
        finally:
            self._done()

    def _write(self, pages: dict[str, Page | None], index: str | None) -> None:
        try:
            folder = self.memory_dir / TOPICS_DIR
            fsio.ensure_dir(folder)
            for name, page in pages.items():
                path = folder / f"{name}.md"
                if page is None:
                    if path.exists():
                        path.unlink()
                        self.written += 1
                else:
                    self._put(path, page.text)
            if index is not None and index != self._index:
                self._put(self.memory_dir / INDEX_FILE, index)
                self._index = index
        except OSError as exc:
            log.error("cannot write memory/index.md or memory/topics/: %s", exc)
            with self._mutex:
                self._dirty |= {*pages, INDEX_FILE}
                self._index = ""

    def _put(self, path: Path, text: str) -> None:
        if pagefiles.put(path, text):
            self.written += 1

    def _done(self) -> None:
        """One write finished: once nothing is dirty, deferred or being written, write the mark."""
        with self._mutex:
            self._writing -= 1
            self._wake.notify_all()
            if self._writing or self._dirty or self._deferred:
                return
            offset, identity = self.items.position()
            controls = pagefiles.stat(self.controls)
        pagefiles.write_mark(self.memory_dir, offset, identity, controls)

    def settle(self) -> None:
        """Write what the background writer holds now, and wait until no page write is under way
        (tests, the benchmark)."""
        self._write_deferred()
        with self._mutex:
            self._wake.wait_for(lambda: not self._writing and not self._deferred, timeout=60)

    def _background(self) -> None:
        pause = DEBOUNCE
        while True:
            with self._mutex:
                self._wake.wait_for(lambda: self._deferred or self._stopping)
                if self._wake.wait_for(lambda: self._stopping, timeout=pause):  # a stop cuts the pause
                    return
            started = time.monotonic()
            self._write_deferred()
            pause = max(DEBOUNCE, BACKGROUND_SHARE * (time.monotonic() - started))

    def _write_deferred(self) -> None:
        """Write the large pages handed over, each streamed to its file (never held whole)."""
        with self._mutex:
            taken, self._deferred = self._deferred, set()
            if not taken:
                return
            self._writing += 1
        try:
            for name in sorted(taken):
                self.requests.wait()
                with self._mutex:
                    parts = self._parts(name)
                path = self.memory_dir / TOPICS_DIR / f"{name}.md"
                try:
                    if parts is None:
                        path.unlink(missing_ok=True)
                    else:
                        found, hidden = parts()
                        lines = topic_chunks(name, found, hidden, self.requests.pause)
                        chunks = pagefiles.batched(lines, self.requests)
                        fsio.atomic_write_chunks(path, chunks, sync_every=pagefiles.SYNC_BYTES)
                    self.written += 1
                except pagefiles.Abandoned:
                    left = sorted(taken)[sorted(taken).index(name) :]
                    log.info("stopping: %s left for the next start to write", ", ".join(left))
                    with self._mutex:
                        self._deferred.update(left)
                    return
                except OSError as exc:
                    log.error("cannot write %s: %s", path, exc)
                    with self._mutex:
                        self._deferred.add(name)
        finally:
            self._done()
