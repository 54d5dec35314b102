"""The small parts `pages.Pages` counts with (seed 003 sections 10-11; issue 16): what is withdrawn
(`Withheld`), the ids a pointer may not name (`Hidden`), a topic's trigger values, the recent-activity
key, and label and counter helpers.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from typing import Protocol, TypeVar

from boxmaker.memoryd.items.store import Item
from boxmaker.proto.labels import DataClass, Label

T = TypeVar("T")


class Withheld(Protocol):
    """What is withdrawn now (`withdrawal.exclusion.Exclusion`): compared by value, asked per item."""

    def item(self, item: Item) -> bool: ...


class NotYet:
    """What `Pages` holds before it first asks what is withdrawn (equal to nothing it is given)."""

    def item(self, item: Item) -> bool:
        del item
        return False


NOT_YET = NotYet()


class Hidden:
    """The ids a page's pointer may not name: unknown, erased or withdrawn items."""

    def __init__(self, items: dict[str, Item], withheld: Withheld) -> None:
        self.items = items
        self.withheld = withheld

    def __contains__(self, ident: object) -> bool:
        item = self.items.get(ident) if isinstance(ident, str) else None
        return item is None or item.erased or self.withheld.item(item)


def trigger_values(item: Item) -> set[str]:
    """The scope, subject and triggers of `item` a topic counts."""
    return {value for value in (item.scope, item.subject, *item.triggers) if value}


def hot_key(item: Item) -> tuple[str, str] | None:
    """The key index.md's recent activity orders `item` by; None for a cooled or merged item."""
    return None if item.cooled or item.merged_into is not None else (item.time, item.id)


def take_away(counts: Counter[T], values: Iterable[T]) -> None:
    """Take one of each of `values` from `counts`, dropping the ones that reach 0."""
    for value in values:
        counts[value] -= 1
        if counts[value] <= 0:
            del counts[value]


def strictest(labels: Iterable[Label]) -> Label:
    """The strictest of `labels` (private and trusted when there are none)."""
    label = Label(DataClass.PRIVATE, False)
    for found in labels:
        label = label.stricter(found)
    return label
