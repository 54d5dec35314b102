"""One pass over the store's items for the review plan (`sections.build`; issue 16): what each section may
name, found together instead of one walk over 100,000 items per section, each list in store order."""

from __future__ import annotations

from collections.abc import Callable, Container, Iterable
from dataclasses import dataclass, field

from boxmaker.memoryd.files.names import ARCHIVE_DIR
from boxmaker.memoryd.items import projections
from boxmaker.memoryd.items.store import KINDS, Item


@dataclass(slots=True)
class ItemPass:
    """What one pass over the store's items found, each list in store order, withdrawn and erased items
    left out (`sections.build`)."""

    with_feedback: list[Item] = field(default_factory=list)
    pending: list[Item] = field(default_factory=list)
    #: Active and pending-cleanup items (compared for duplicates), and their positions in it by (kind,
    #: topic).
    compared: list[Item] = field(default_factory=list)
    groups: dict[tuple[str, str], list[int]] = field(default_factory=dict)
    #: Active state items with a subject.
    states: list[Item] = field(default_factory=list)
    #: Active knowledge items not merged into another (a rule among them is a boundary candidate).
    rule_candidates: list[Item] = field(default_factory=list)
    #: The ids of `compared` items whose text reads like a rule (filled by `_duplicates`).
    ruled: set[str] = field(default_factory=set)
    #: Archived items no autodream pass's dream-input showed, by archive day.
    days: dict[str, list[str]] = field(default_factory=dict)
    #: Items missing kind or Source.
    drift: list[Item] = field(default_factory=list)
    #: The ids of the items withdrawn (`excluded`), erased ones too.
    excluded: list[str] = field(default_factory=list)
    #: Every item by topic.
    by_topic: dict[str, list[Item]] = field(default_factory=dict)

    @classmethod
    def of(
        cls,
        items: Iterable[Item],
        excluded: Callable[[Item], bool],
        shown: Container[str],
        counts: Container[str],
    ) -> ItemPass:
        """Read `items` once: those erased or `excluded` are left out; `shown` are the ids autodream
        passes have shown (not undistilled), `counts` the ids with feedback."""
        read = cls()
        archived, cut = f"{ARCHIVE_DIR}/", len(ARCHIVE_DIR) + 1
        topic_of, by_topic, groups, compared, days = (
            projections.topic_of,
            read.by_topic,
            read.groups,
            read.compared,
            read.days,
        )
        for item in items:
            if excluded(item):  # erased or not: a withdrawn id must not show in a generated page
                read.excluded.append(item.id)
                continue
            if item.erased:
                continue
            topic = topic_of(item)
            by_topic.setdefault(topic, []).append(item)
            status, kind, ident = item.status, item.kind, item.id
            if status in ("active", "pending-cleanup"):
                groups.setdefault((kind, topic), []).append(len(compared))
                compared.append(item)
                if status == "pending-cleanup":
                    read.pending.append(item)
                elif kind == "state":
                    if item.subject:
                        read.states.append(item)
                elif kind == "knowledge" and item.merged_into is None:
                    read.rule_candidates.append(item)
            if ident in counts:
                read.with_feedback.append(item)
            ref = item.archive_ref
            if ref and ref.startswith(archived) and ident not in shown:  # `dream.inputs.undistilled`
                days.setdefault(ref[cut:].partition(".md#")[0], []).append(ident)
            if kind not in KINDS or not item.source:
                read.drift.append(item)
        return read
