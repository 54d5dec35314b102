"""Skeptical recall: what the model reads about the items among recall's hits (seed 003 section 15.2,
15.2.1; DESIGN 10.4 and 11).

A hit that is a note captured as an item (its stable key is the item's ``note``) keeps M5a's header
(tag · where and when · class, `hits.header`) and gets the item's metadata after it, compact::

    [1] memory · note, 2026-11-29 18:30 UTC, session chat-ip2 · private · mem-2026-11-29-002 ·
        state host:ip · active · 2026-11-29 · Source sessions/chat-ip2/0.jsonl#7 · confidence observed-once

(one line; ``knowledge`` has no subject, an item without confidence shows none). Hits that are not
items (session records, summaries, moved/dropped identity, notes from before items) are unchanged.
The status part frames what must not be used as a current fact (seed 15.2, rules 2-3):

- ``superseded by mem-…; history, not current``, and after the snippet one line naming the live item
  at the end of the ``superseded_by`` chain: ``→ current: [date] (state) text · mem-…`` (left out,
  with its id, when the live item is withdrawn or erased);
- ``stale; not load-bearing`` and ``pending-cleanup; not load-bearing``;
- ``erased`` for an erased item (its text is already the erasure marker).

When the hits hold an active state item whose subject has two or more active state items (withdrawn
and erased ones never count, and whether or not the others were hits), the answer ends with one
conflict block per such subject, in section 15.2.1's shape, every row dated, newest last::

    Conflict on subject `nas:ip` (2 active state items, not reconciled):
    - [2026-11-20] (state) NAS at 10.0.0.7. Source: sessions/… · mem-2026-11-20-001 · older: retained as …
    - [2026-11-29] (state) NAS at 10.0.0.8. Source: sessions/… · mem-2026-11-29-002 · newest: acting on this
    Acting on [2026-11-29]'s value (mem-2026-11-29-002). The older row is retained as history, not
    current; if it should be the current truth, ask the owner to reconcile
    (bxctl memory reconcile nas:ip --keep ID).

Knowledge is never hidden by other knowledge: contradicting knowledge items are both shown as hits,
each with its own metadata (seed 15.2.1: both remain visible until review).

Every item text shown (a current row, a conflict row) is defused like a snippet (`hits.defuse`), and
its item's label joins the result's label (`Reading.label`), so the answer's label stays the strictest
of what it shows. Pure functions.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from boxmaker.memoryd.index.hits import Hit, defuse, one_line
from boxmaker.memoryd.items.live import Fold
from boxmaker.memoryd.items.store import Item
from boxmaker.proto.escape import escape_line
from boxmaker.proto.labels import DataClass, Label

#: At most this many characters of an item's text in a current or conflict row.
ROW_TEXT = 240
#: A superseded_by chain is followed at most this far (a longer one is damaged).
CHAIN_LIMIT = 64


@dataclass(frozen=True, slots=True)
class Conflict:
    """Two or more active state items of one subject (oldest first)."""

    subject: str
    rows: tuple[Item, ...]


@dataclass(frozen=True, slots=True)
class Reading:
    """The items behind a result: per hit its item or None, the live item of each superseded hit
    (by the hit's item id), the conflicts, and every item shown (hits first, no repeats)."""

    items: tuple[Item | None, ...]
    current: Mapping[str, Item]
    conflicts: tuple[Conflict, ...]
    shown: tuple[Item, ...]

    @property
    def label(self) -> Label:
        """The strictest label of the items shown (at least private)."""
        label = Label(DataClass.PRIVATE, False)
        for item in self.shown:
            label = label.stricter(item.label)
        return label

    @property
    def ids(self) -> list[str]:
        """The ids of every item shown (a retrieval record's ``memory_item_ids``)."""
        return [item.id for item in self.shown]


def read(hits: Sequence[Hit], fold: Fold, excluded: Callable[[Item], bool]) -> Reading:
    """The items among `hits` (by note key), their live items and the conflicts they touch.

    `fold` is the item store's fold (`live.ItemStore.current`: looked up, never walked, so a recall
    costs the same at any size); `excluded` says which items are withdrawn now
    (`controls.Exclusion.item`): never shown, never counted in a conflict.
    """
    found: list[Item | None] = []
    for hit in hits:
        item = fold.by_note(hit.key) if hit.kind == "note" and hit.role == "noted" else None
        found.append(None if item is None or excluded(item) else item)
    shown: dict[str, Item] = {item.id: item for item in found if item is not None}
    current: dict[str, Item] = {}
    for item in found:
        if item is not None and item.status == "superseded":
            live = live_item(item, fold.items)
            if live is not None and not live.erased and not excluded(live):
                current[item.id] = live
    for live in current.values():
        shown.setdefault(live.id, live)
    conflicts: list[Conflict] = []
    for item in found:
        if item is None or item.kind != "state" or item.status != "active" or item.erased:
            continue
        rows = [row for row in fold.active_of(item.subject or "") if not excluded(row)]
        if len(rows) >= 2 and all(c.subject != item.subject for c in conflicts):
            ordered = tuple(sorted(rows, key=lambda i: (i.time, i.id)))
            conflicts.append(Conflict(str(item.subject), ordered))
            for row in ordered:
                shown.setdefault(row.id, row)
    return Reading(tuple(found), current, tuple(conflicts), tuple(shown.values()))


def live_item(item: Item, items: Mapping[str, Item]) -> Item | None:
    """The item at the end of `item`'s ``superseded_by`` chain (None when the chain is broken)."""
    seen = {item.id}
    here = item
    for _ in range(CHAIN_LIMIT):
        after = here.superseded_by
        if after is None:
            return here if here is not item else None
        nxt = items.get(after)
        if nxt is None or nxt.id in seen:
            return None
        seen.add(nxt.id)
        here = nxt
    return None


def status_text(item: Item, current: Item | None) -> str:
    """The status part of an item's header fields (module docstring)."""
    if item.erased:
        return "erased"
    if item.status == "superseded":
        after = item.superseded_by if current is not None else None
        pointer = f" by {after}" if after else ""
        return f"superseded{pointer}; history, not current"
    if item.merged_into is not None:
        return f"{item.status}; merged into {item.merged_into}; history, the consolidated item is current"
    cooled = "; cooled" if item.cooled else ""
    if item.status in ("stale", "pending-cleanup"):
        return f"{item.status}{cooled}; not load-bearing"
    return item.status + cooled


def fields(item: Item, current: Item | None = None) -> str:
    """What a hit's header carries after its class for an item: ``mem-… · state SUBJECT · STATUS ·
    DATE · Source … [· confidence …]``."""
    kind = item.kind if item.subject is None else f"{item.kind} {one_line(escape_line(item.subject), 80)}"
    parts = [item.id, kind, status_text(item, current), item.date, f"Source {escape_line(item.source)}"]
    if item.confidence is not None:
        parts.append(f"confidence {item.confidence}")
    return " · ".join(parts)


def row(item: Item) -> str:
    """An item as one dated row: ``[date] (kind) text · mem-…`` (text defused, at most `ROW_TEXT`)."""
    text = one_line(defuse(item.text), ROW_TEXT)
    return f"[{item.date}] ({item.kind}) {text}"


def current_line(current: Item) -> str:
    """The line after a superseded hit's snippet pointing to the live item."""
    return f"→ current: {row(current)} · {current.id} · {status_text(current, None)}"


def conflict_block(conflict: Conflict) -> str:
    """Section 15.2.1's reconcile shape, in our words (module docstring)."""
    subject = one_line(escape_line(conflict.subject), 80)
    newest = conflict.rows[-1]
    lines = [f"Conflict on subject `{subject}` ({len(conflict.rows)} active state items, not reconciled):"]
    for item in conflict.rows:
        role = "newest: acting on this" if item is newest else "older: retained as history"
        lines.append(f"- {row(item)} Source: {escape_line(item.source)} · {item.id} · {role}")
    lines.append(
        f"Acting on [{newest.date}]'s value ({newest.id}). The older "
        f"{'row is' if len(conflict.rows) == 2 else 'rows are'} retained as history, not current; if one "
        "should be the current truth, ask the owner to reconcile "
        f"(bxctl memory reconcile {subject} --keep ID)."
    )
    return "\n".join(lines)
