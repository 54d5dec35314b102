"""Reverting one journalled edit of an identity file, entry by entry (issue 19, "Revert any edit").

Pure functions over values. An edit is its journal line's ``before`` and ``after`` entries; the entries
it *touched* are those it took out (in ``before``, not in ``after``: `Touched.removed`) and those it put
in (in ``after``, not in ``before``: `Touched.added`), compared after NFC and trimming as `edits` does.
`plan` reverts it against the file as it is now, whatever later edits did to other entries:

- every entry it put in must still be there (else `Blocked` ``gone``: a later edit or a hand edit
  changed it), and none of the entries it took out may be back (else `Blocked` ``present``: putting it
  back would make a duplicate);
- the entries it put in are taken out; the entries it took out come back at their old place among the
  entries that survive: right after the nearest entry that preceded them in ``before`` and is in the file,
  else right before the nearest one that followed them, else at the end;
- when the edit reordered entries it kept (a ``consolidate``) and nothing reordered them since, their
  order of ``before`` comes back too, so a revert of an edit nothing followed gives ``before`` exactly.

An edit whose revert would leave the file as it is gives `Blocked` ``nothing``. Erasure leaves
``[erased memerase-…]`` in place of erased text (`erased_in` finds it).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Literal

from boxmaker.memoryd.files.entries import prepare

#: The marker an erasure leaves for erased text (proto.erasure.marker, which names the erasure; a bare
#: ``[erased]`` is text the owner may have typed).
_ERASED = re.compile(r"\[erased (memerase-\d{4}-\d{2}-\d{2}-\d{3,})\]")


@dataclass(frozen=True, slots=True)
class Touched:
    """The entries one edit took out of its file and put into it, each in its line's order."""

    removed: tuple[str, ...]
    added: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Restore:
    """A revert that applies: the file's entries after it, and what it puts back and takes out."""

    entries: tuple[str, ...]
    restored: tuple[str, ...]
    taken: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Blocked:
    """Why an edit cannot be reverted against the file as it is: ``gone`` (an entry it put in is no
    longer there), ``present`` (an entry it took out is there again), ``nothing`` (the revert would
    change nothing); `entry` is the entry concerned ("" for ``nothing``)."""

    kind: Literal["gone", "present", "nothing"]
    entry: str = ""


def touched(before: Sequence[str], after: Sequence[str]) -> Touched:
    """The entries an edit from `before` to `after` took out and put in (module docstring)."""
    old = {prepare(e) for e in before}
    new = {prepare(e) for e in after}
    return Touched(
        tuple(e for e in before if prepare(e) not in new), tuple(e for e in after if prepare(e) not in old)
    )


def changes(before: Sequence[str], after: Sequence[str], key: str) -> bool:
    """Whether an edit from `before` to `after` took out or put in the entry whose prepared text is
    `key` (a later edit that touched an entry of the edit being reverted)."""
    return (key in {prepare(e) for e in before}) != (key in {prepare(e) for e in after})


def plan(before: Sequence[str], after: Sequence[str], current: Sequence[str]) -> Restore | Blocked:
    """Revert the edit from `before` to `after` against the file's `current` entries (module docstring)."""
    edit = touched(before, after)
    now = [prepare(e) for e in current]
    for entry in edit.added:
        if prepare(entry) not in now:
            return Blocked("gone", entry)
    for entry in edit.removed:
        if prepare(entry) in now:
            return Blocked("present", entry)
    taken = {prepare(e) for e in edit.added}
    result = [e for e in current if prepare(e) not in taken]
    result = _kept_order(before, after, result)
    for entry in edit.removed:
        result.insert(_place(before, entry, [prepare(e) for e in result]), entry)
    if [prepare(e) for e in result] == now and len(result) == len(current):
        return Blocked("nothing")
    return Restore(tuple(result), edit.removed, edit.added)


def _kept_order(before: Sequence[str], after: Sequence[str], survivors: list[str]) -> list[str]:
    """`survivors` with the entries the edit kept put back in `before`'s order, when they still stand
    in the order the edit left them (a later reorder is not undone)."""
    kept = {prepare(e) for e in before} & {prepare(e) for e in after}
    slots = [i for i, e in enumerate(survivors) if prepare(e) in kept]
    here = [prepare(survivors[i]) for i in slots]
    if len(set(here)) != len(here):
        return survivors  # a file with duplicates (typed by hand): leave its order alone
    if here != [prepare(e) for e in after if prepare(e) in set(here)]:
        return survivors
    by_key = {prepare(survivors[i]): survivors[i] for i in slots}
    wanted = [by_key[prepare(e)] for e in before if prepare(e) in by_key]
    result = list(survivors)
    for slot, entry in zip(slots, wanted, strict=True):
        result[slot] = entry
    return result


def _place(before: Sequence[str], entry: str, keys: list[str]) -> int:
    """Where `entry` of `before` goes among the entries whose prepared texts are `keys` (module
    docstring): after its nearest preceding neighbour there, else before its nearest following one,
    else at the end."""
    order = [prepare(e) for e in before]
    at = order.index(prepare(entry))
    for neighbour in reversed(order[:at]):
        if neighbour in keys:
            return keys.index(neighbour) + 1
    for neighbour in order[at + 1 :]:
        if neighbour in keys:
            return keys.index(neighbour)
    return len(keys)


def erased_in(entries: Iterable[str]) -> str | None:
    """The erasure (``memerase-…``) that erased text of one of `entries`, or None when none holds an
    erasure's marker."""
    for entry in entries:
        found = _ERASED.search(entry)
        if found is not None:
            return found.group(1)
    return None
