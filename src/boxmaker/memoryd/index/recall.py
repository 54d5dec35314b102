"""The `recall` tool and the owner's search (M5a section 5; DESIGN 10.4).

`Recaller.recall` validates the query (1 to 500 characters), builds it (`query.build`: the model's
text reaches FTS5 only as quoted terms), searches the index, renders the hits with their source tags,
computes the result's label, and appends one line to the recall log ``recalls/YYYY-MM.jsonl`` naming
each hit by its stable source key, so hit counts survive a reindex. Owner searches and benchmark runs
are marked and do not count toward tiers.

Withdrawn content (seed 003 section 12.2) is filtered out before anything is rendered or logged:
hits the `Exclusion` names are dropped, and the index is asked for more (up to `SEARCH_CEILING`) so
`k` hits still come back when some were withdrawn. Controls that cannot be read refuse the recall
(fail closed).

Skeptical recall (seed 003 section 15.2; `skeptic`): hits that are items carry their kind, status,
date, Source and confidence on the header line, superseded ones point to the live item, and a
conflict block follows when an active state hit's subject has two or more active state items; the
result's label is the strictest of everything shown. items.jsonl that cannot be read refuses the
recall (``refused:unavailable``) rather than show items without their status.

Metamemory (seed 003 section 23.2; `review.feedback`): the log line IS the retrieval record
(``retrieval_id``, ``task_id``, ``memory_item_ids``, ``use_role``, ``retrieved_at``), and an answer
with hits ends with one line naming its retrieval id, ``(retrieval memret-YYYY-MM-DD-NNN)``, which
the `memory` action ``feedback`` cites.
"""

from __future__ import annotations

import datetime as dt
import logging
import re
import sqlite3
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from boxmaker.memoryd.check.secrets import redact
from boxmaker.memoryd.files.entries import IDENTITY_FILES
from boxmaker.memoryd.files.journal import encode_line
from boxmaker.memoryd.files.store import FileUnreadable, Store
from boxmaker.memoryd.index import hits as hit_text
from boxmaker.memoryd.index import retrievals, skeptic
from boxmaker.memoryd.index.hits import Hit
from boxmaker.memoryd.index.index import Index
from boxmaker.memoryd.index.query import build
from boxmaker.memoryd.items.live import Fold
from boxmaker.memoryd.sentences import Refusal, identity, withdrawal
from boxmaker.memoryd.withdrawal.exclusion import Exclusion
from boxmaker.proto import fsio
from boxmaker.proto.labels import Label

log = logging.getLogger("boxmaker.memoryd.recall")

QUERY_LIMIT = 500
#: At most this many hits are asked of the index when withdrawn hits are filtered out.
SEARCH_CEILING = 1000
#: How long a recall waits for the index to be ready at start before it says it is not, in seconds.
READY_WAIT = 20.0


@dataclass(frozen=True, slots=True)
class RecallResult:
    """What recall answers: the text the model reads, its label, and the hits behind it."""

    text: str
    label: Label
    hits: tuple[Hit, ...]
    data: list[dict[str, Any]] = field(default_factory=list)
    reading: skeptic.Reading | None = None
    retrieval: str = ""


def starts_a_word(entry: str, terms: Sequence[str]) -> bool:
    """True when a word of `entry` starts with one of the query's `terms` ("deploy" finds "Deploys",
    "o" finds nothing in "Prefers answers")."""
    lowered = entry.lower()
    return any(re.search(rf"(?<!\w){re.escape(t)}", lowered) for t in terms if len(t) > 1)


class Recaller:
    """Answers recall calls from the index and logs them.

    Args:
        index: the live index.
        recalls: the recall log folder (``memory/recalls``).
        now: the clock.
        log_recalls: False to keep no recall log (never in memoryd; for offline measurements).
        exclusion: what is withdrawn now (`controls.Controls.exclusion`); its hits are never shown.
        items: the item store's fold (`live.ItemStore.current`); None: hits are shown without item
            metadata (offline measurements).
        turns: counts a session's turns for the retrieval record's task id (None: turn 0).
    """

    def __init__(
        self,
        index: Index,
        recalls: Path,
        now: Callable[[], dt.datetime],
        log_recalls: bool = True,
        exclusion: Callable[[], Exclusion] | None = None,
        *,
        items: Callable[[], Fold] | None = None,
        turns: retrievals.Turns | None = None,
    ) -> None:
        self.index = index
        self.recalls = recalls
        self.now = now
        self.log_recalls = log_recalls
        self.exclusion = exclusion or Exclusion
        self.items = items
        self.turns = turns
        self.ids = retrievals.RetrievalIds(recalls)

    def search(self, text: str, k: int) -> tuple[list[Hit], tuple[str, ...]] | Refusal:
        """The structured layer under recall: validated, built, searched; no rendering, no log."""
        if not 1 <= len(text) <= QUERY_LIMIT:
            return identity.query_length(len(text))
        if not self.index.wait_ready(READY_WAIT):
            return identity.INDEX_NOT_READY
        query = build(text)
        try:
            excluded = self.exclusion()
        except OSError as exc:
            log.error("recall refused: the withdrawal controls cannot be read: %s", exc)
            return withdrawal.controls_unreadable(str(exc))
        try:
            self.index.refresh_notes()
            wanted = k
            while True:
                found = self.index.search(query, wanted)
                kept = [hit for hit in found if not excluded.hit(hit)]
                if len(kept) >= k or len(found) < wanted or wanted >= SEARCH_CEILING:
                    return kept[:k], query.terms
                wanted = min(wanted * 4, SEARCH_CEILING)
        except sqlite3.Error as exc:
            log.error("memory-index-damaged: recall could not read the index: %s", exc)
            return identity.index_unreadable(str(exc))

    def recall(
        self,
        text: str,
        k: int,
        session: str,
        *,
        owner: bool = False,
        bench: bool = False,
        via: Mapping[str, object] | None = None,
    ) -> RecallResult | Refusal:
        """Answer one recall (M5a section 5).

        Args:
            text: the model's query, 1 to 500 characters.
            k: at most this many hits (1 to 10 for the tool).
            session: the asking session (or "owner").
            owner, bench: mark the log line as an owner search or a benchmark run.
            via: for an MCP client's recall, the client and the peer's uid and pid, logged under
                ``mcp`` (issue 17).
        """
        found = self.search(text, k)
        if isinstance(found, Refusal):
            return found
        hits, terms = found
        reading = self._read(hits)
        if isinstance(reading, Refusal):
            return reading
        try:
            retrieval = self._log(session, text, k, hits, reading, owner=owner, bench=bench, via=via)
        except OSError as exc:  # a full disk: the recall still answers, without a retrieval record
            log.error("the recall log cannot be written, so this recall has no retrieval id: %s", exc)
            retrieval = ""
        if not hits:
            return RecallResult(identity.no_matches(text), hit_text.result_label([]), (), retrieval=retrieval)
        fields = [skeptic.fields(i, reading.current.get(i.id)) if i else "" for i in reading.items]
        after = [
            skeptic.current_line(reading.current[i.id]) if i and i.id in reading.current else ""
            for i in reading.items
        ]
        parts = [hit_text.render(hits, terms, fields, after)]
        parts += [skeptic.conflict_block(c) for c in reading.conflicts]
        if retrieval:
            parts.append(f"(retrieval {retrieval})")
        label = hit_text.result_label(hits).stricter(reading.label)
        return RecallResult("\n\n".join(parts), label, tuple(hits), reading=reading, retrieval=retrieval)

    def _read(self, hits: list[Hit]) -> skeptic.Reading | Refusal:
        """The items among `hits` (`skeptic.read`), withdrawn ones left out."""
        if self.items is None or not hits:
            return skeptic.Reading(tuple(None for _ in hits), {}, (), ())
        try:
            found = self.items()
            excluded = self.exclusion()
        except OSError as exc:
            log.error("recall refused: items.jsonl or the controls cannot be read: %s", exc)
            return identity.items_unreadable(str(exc))
        return skeptic.read(hits, found, excluded.item)

    def _log(
        self,
        session: str,
        text: str,
        k: int,
        hits: list[Hit],
        reading: skeptic.Reading,
        *,
        owner: bool,
        bench: bool,
        via: Mapping[str, object] | None = None,
    ) -> str:
        """Append the recall log line, which is the retrieval record; returns its retrieval id
        ("" when no log is kept)."""
        if not self.log_recalls:
            return ""
        moment = self.now().astimezone(dt.UTC)
        turn = self.turns.turn_of(session) if self.turns is not None and not owner else 0
        with self.ids.lock:
            ident = self.ids.next(moment.date())
            line = {
                "time": moment.strftime("%Y-%m-%dT%H:%M:%SZ"),
                "session": session,
                "query": redact(text),  # a credential the model put in its query is never stored
                "k": k,
                "hits": [h.key for h in hits],
                "owner": owner,
                "bench": bench,
                "retrieval_id": ident,
                "task_id": retrievals.task_id(session, turn),
                "memory_item_ids": reading.ids,
                "use_role": retrievals.DEFAULT_ROLE,
                "retrieved_at": retrievals.stamp(moment),
            }
            if via is not None:
                line["mcp"] = dict(via)
            fsio.ensure_dir(self.recalls)
            fsio.append_line(self.recalls / f"{moment:%Y-%m}.jsonl", encode_line(line), sync=False)
        return ident

    def owner_search(
        self, text: str, k: int, store: Store, hidden: frozenset[tuple[str, str]] = frozenset()
    ) -> RecallResult | Refusal:
        """The owner's search: identity entries holding a word that starts with a term of the query (at
        most `k`, except the withdrawn ones, `hidden` as (file, text)), then recall's hits."""
        result = self.recall(text, k, "owner", owner=True)
        if isinstance(result, Refusal):
            return result
        terms = build(text).terms
        lines: list[str] = []
        data: list[dict[str, Any]] = []
        for spec in IDENTITY_FILES.values():
            try:
                entries = store.read_identity(spec).entries
            except FileUnreadable:
                continue
            for entry in entries:
                if (spec.name, entry) in hidden:
                    continue
                if len(data) < k and starts_a_word(entry, terms):
                    data.append({"tag": "identity", "where": spec.name, "text": entry})
                    lines.append(
                        f"[{spec.name}] identity · an entry of {spec.name} (in every prompt)\n{entry}"
                    )
        reading = result.reading or skeptic.Reading(tuple(None for _ in result.hits), {}, (), ())
        for number, (hit, item) in enumerate(zip(result.hits, reading.items, strict=True), start=1):
            row: dict[str, Any] = {
                "tag": hit.tag,
                "where": hit_text.where(hit),
                "class": hit.label.data_class.value,
                "key": hit.key,
                "text": hit.text,
            }
            fields = ""
            if item is not None:
                current = reading.current.get(item.id)
                fields = skeptic.fields(item, current)
                row.update({"item": item.id, "kind": item.kind, "status": item.status, "source": item.source})
            data.append(row)
            body = hit_text.defuse(hit_text.snippet(hit.text, terms))
            lines.append(f"{hit_text.header(number, hit, fields)}\n{body}")
            if item is not None and item.id in reading.current:
                lines.append(skeptic.current_line(reading.current[item.id]))
        lines += [skeptic.conflict_block(c) for c in reading.conflicts]
        text_out = "\n".join(lines) if lines else identity.no_matches(text)
        return RecallResult(text_out, result.label, result.hits, data, reading, result.retrieval)
