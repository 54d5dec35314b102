"""The sections of the review plan (`plan`; seed 003 section 16): each a pure function of what the plan
read (`Inputs`), giving its rows and the command the owner runs about them. The module docstring of
`plan` lists the sections in order and what each names.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from boxmaker.memoryd.dream.inputs import undistilled_days
from boxmaker.memoryd.files import names
from boxmaker.memoryd.files.entries import CONVENTIONS, parse_entries
from boxmaker.memoryd.files.names import ARCHIVE_DIR
from boxmaker.memoryd.files.notes import Note
from boxmaker.memoryd.items import projections
from boxmaker.memoryd.items.store import KINDS, Item, active_by_subject, item_id_of
from boxmaker.memoryd.review.feedback import CANDIDATE_AT, Tally, tally
from boxmaker.memoryd.review.itempass import ItemPass
from boxmaker.memoryd.review.texts import RULE, facts, near_pairs, normalised
from boxmaker.memoryd.withdrawal.records import Chain
from boxmaker.proto.escape import escape_line

INDEX_LINES = 200


#: Each section shows at most this many rows (text and data), then a count of the rest, so the reply
#: stays far under the frame limit whatever the home's size.
SHOWN = 20


#: A row's list of item ids is cut to this many (``items_count`` gives them all).
ROW_IDS = 20


#: Near-duplicate comparison is pairwise: groups (kind, topic) larger than this get exact matches only.
NEAR_GROUP = 400


LEGACY_MARKERS = ("[待清理]", "[待确认]")


_MONTH = (
    r"(?:jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|may|june?|july?|aug(?:ust)?|"
    r"sep(?:t(?:ember)?)?|oct(?:ober)?|nov(?:ember)?|dec(?:ember)?)"
)


_DATED = re.compile(
    rf"\b\d{{4}}-\d{{2}}-\d{{2}}\b|\b{_MONTH}\.? \d{{1,2}}\b|\b\d{{1,2}} {_MONTH}\b"
    r"|\b(?:yesterday|last night)\b",
    re.IGNORECASE,
)


@dataclass(slots=True)
class Section:
    """One part of the plan."""

    name: str
    title: str
    do: str
    rows: list[dict[str, Any]] = field(default_factory=list)
    lines: list[str] = field(default_factory=list)
    summary: str = ""
    #: Where the owner sees every row when the section shows only the first `SHOWN`.
    see: str = "bxctl memory items"
    #: Lines past the first `SHOWN` counted but not made (`text_lines` says how many more there are).
    unmade: int = 0

    def data(self) -> dict[str, Any]:
        """The section as ``--json`` prints it: at most `SHOWN` rows, ``count`` all of them, ``more``
        how many were left out and ``see`` where to list them."""
        return {
            "name": self.name,
            "title": self.title,
            "count": len(self.rows),
            "do": self.do,
            "rows": self.rows[:SHOWN],
            "more": max(0, len(self.rows) - SHOWN),
            "see": self.see,
        }

    def text_lines(self) -> list[str]:
        """At most `SHOWN` lines, then ``… and K more; see <command>``."""
        more = len(self.lines) + self.unmade - SHOWN
        return self.lines[:SHOWN] + ([f"… and {more:,} more; see {self.see}"] if more > 0 else [])


@dataclass(frozen=True, slots=True)
class Inputs:
    """Everything the plan reads (`gather`)."""

    items: Mapping[str, Item]
    excluded: Callable[[Item], bool]
    chains: Sequence[Chain]
    identity: Mapping[str, Sequence[str]]
    withdrawn_entries: frozenset[tuple[str, str]]
    soul: str
    conventions: str | None
    #: notes.md's notes the sections may name (legacy notes, notes holding a marker), or every note.
    notes: Sequence[Note]
    note_excluded: Callable[[Note], bool]
    index_text: str
    generated: Mapping[str, str]
    events: Sequence[dict[str, Any]]
    shown: frozenset[str]
    feedback: Sequence[dict[str, Any]]


def _short(text: str, limit: int = 80) -> str:
    flat = escape_line(" ".join(text.split()))
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def build(inputs: Inputs) -> list[Section]:
    """The plan's sections, in order (module docstring). Pure but for `_NEAR` (each topic's near pairs
    kept for the next plan). The items are read in one pass (`itempass.ItemPass`), each section then
    given only the items it may name, in store order; `_duplicates` finds which read like rules, for
    `_boundary`."""
    counts = tally(inputs.feedback)
    read = ItemPass.of(inputs.items.values(), inputs.excluded, inputs.shown, counts)
    return [
        _misleading(read.with_feedback, inputs.feedback, counts),
        _index(inputs.index_text),
        _pending(read.pending, inputs),
        _duplicates(read.compared, read.groups, read.ruled),
        _conflicts(read.states),
        _boundary(read.rule_candidates, inputs, read.ruled),
        _withdrawals(inputs, read.excluded),
        _archive(inputs, read.days),
        _schema(read.drift, inputs),
        _triggers(read.by_topic),
    ]


def _item_row(item: Item, **extra: Any) -> dict[str, Any]:
    return {
        "id": item.id,
        "kind": item.kind,
        "status": item.status,
        "date": item.date,
        "text": item.text,
        **extra,
    }


def _misleading(
    visible: Sequence[Item], feedback: Sequence[dict[str, Any]], counts: Mapping[str, Tally] | None = None
) -> Section:
    section = Section(
        "misleading",
        "Items with repeated misleading feedback (most misleading first)",
        "each is a candidate for a proposal, never changed by its feedback: read it (bxctl memory feedback "
        "--item ID); if it no longer holds, bxctl memory status ID stale; a rule or policy change goes out "
        "as a proposal (the memory action propose) that you accept or reject (bxctl memory proposals)",
        see="bxctl memory feedback",
    )
    counts = tally(feedback) if counts is None else counts
    found = [(item, counts[item.id]) for item in visible if item.id in counts]
    repeated = [(i, t) for i, t in found if t.misleading >= CANDIDATE_AT]
    repeated.sort(key=lambda pair: (-pair[1].misleading, -pair[1].misleading_by_owner, pair[0].id))
    for item, counted in repeated:
        weak = counted.misleading - counted.misleading_by_owner
        section.rows.append(
            _item_row(
                item,
                misleading=counted.misleading,
                misleading_by_owner=counted.misleading_by_owner,
                self_rated=weak,
                helpful=counted.verdicts["helpful"],
                feedback=counted.events,
                candidate="proposal",
            )
        )
        section.lines.append(
            f"{item.id} · {counted.misleading} misleading ({counted.misleading_by_owner} by the owner, "
            f"{weak} self-rated by sessions: weak) · {counted.verdicts['helpful']} helpful · "
            "candidate for a proposal"
            f" · {_short(item.text)}"
        )
    return section


def _index(text: str) -> Section:
    lines = len(text.splitlines())
    over = lines > INDEX_LINES
    section = Section(
        "index",
        "index.md length",
        "keep it a navigation index: let autodream cool or merge items, or retire old ones "
        "(bxctl memory status ID stale)"
        if over
        else "nothing to do",
    )
    section.summary = f"{lines:,} lines (about {INDEX_LINES} at most){': too long' if over else ''}"
    if over:
        section.rows.append({"file": names.INDEX_FILE, "lines": lines, "limit": INDEX_LINES})
    return section


def _pending(visible: Sequence[Item], inputs: Inputs) -> Section:
    section = Section(
        "pending-cleanup",
        "Pending cleanup (only you clear these)",
        "decide each: keep it (bxctl memory status ID active) or retire it (bxctl memory status ID stale); "
        "nothing is deleted; a legacy marker: capture the entry as an item and remove the marker by hand",
        see="bxctl memory items --status pending-cleanup",
    )
    for item in visible:
        if item.status == "pending-cleanup":
            section.rows.append(_item_row(item, source=item.source))
            section.lines.append(f"{item.id} · ({item.kind}) {item.date} · {_short(item.text)}")
    for name, entries in inputs.identity.items():
        for entry in entries:
            if (name, entry) not in inputs.withdrawn_entries and any(m in entry for m in LEGACY_MARKERS):
                section.rows.append({"file": name, "text": entry, "legacy_marker": True})
                section.lines.append(f"{name} · legacy marker · {_short(entry)}")
    for note in inputs.notes:
        if not inputs.note_excluded(note) and any(m in note.text for m in LEGACY_MARKERS):
            section.rows.append(
                {"file": "notes.md", "note": note.key, "text": note.text, "legacy_marker": True}
            )
            section.lines.append(f"notes.md {note.key} · legacy marker · {_short(note.text)}")
    return section


def _duplicates(
    compared: Sequence[Item],
    groups: Mapping[tuple[str, str], Sequence[int]] | None = None,
    ruled: set[str] | None = None,
) -> Section:
    """Identical and near-identical texts among `compared` (active and pending-cleanup items), compared
    within each (kind, topic): `groups` gives their positions in `compared` when known. The ids of those
    whose text reads like a rule are added to `ruled`."""
    section = Section(
        "duplicates",
        "Duplicates (identical or near-identical text)",
        "state: keep the newest (bxctl memory supersede OLD NEW); knowledge: keep both, or retire one "
        "(bxctl memory status ID stale); autodream merges duplicates keeping every source",
        see="bxctl memory items",
    )
    if groups is None:
        compared = [i for i in compared if i.status in ("active", "pending-cleanup")]
        found: dict[tuple[str, str], list[int]] = {}
        for n, item in enumerate(compared):
            found.setdefault((item.kind, projections.topic_of(item)), []).append(n)
        groups = found
    every_key, rules = facts([i.text for i in compared])
    if ruled is not None:
        ruled.update(compared[n].id for n in rules)
    near = {}
    for group, where in groups.items():
        if len(where) < 2:  # nothing to pair with
            continue
        members = [compared[n] for n in where]
        keys = [every_key[n] for n in where]
        first: dict[int, int] = {}  # the first member of each key
        split: dict[int, dict[str, int]] = {}  # a key members share: the first of each normalised text
        for b, key in enumerate(keys):
            a = first.setdefault(key, b)
            if a == b:
                continue
            texts = split.get(key)
            if texts is None:
                texts = split[key] = {normalised(members[a].text): a}
            a = texts.setdefault(normalised(members[b].text), b)
            if a != b:  # identical: each pairs with the first of its text
                _duplicate(section, members[a], members[b], "identical")
        distinct = sorted({*first.values(), *(a for texts in split.values() for a in texts.values())})
        if members[0].kind != "knowledge" or len(distinct) > NEAR_GROUP:
            continue
        hashes = tuple(hash(i.text) for i in members)
        known = _NEAR.get(group)
        if known is None or known[0] != hashes:  # a topic that changed since the last plan: again
            known = (hashes, near_pairs({i: normalised(members[i].text) for i in distinct}, distinct))
        near[group] = known
        for a, b in known[1]:
            _duplicate(section, members[a], members[b], "near-identical")
    _NEAR.clear()
    _NEAR.update(near)
    return section


#: The near-identical pairs of each (kind, topic) group as last compared, with the hashes of the
#: group's texts then: the same texts, the same pairs.
_NEAR: dict[tuple[str, str], tuple[tuple[int, ...], list[tuple[int, int]]]] = {}


def _duplicate(section: Section, one: Item, two: Item, how: str) -> None:
    section.rows.append({"ids": [one.id, two.id], "kind": one.kind, "match": how})
    if len(section.lines) < SHOWN:  # the text shows the first `SHOWN`
        section.lines.append(f"{one.id} and {two.id} ({one.kind}, {how}) · {_short(one.text, 60)}")


def _conflicts(visible: Sequence[Item]) -> Section:
    section = Section(
        "conflicts",
        "Conflicts (two or more active state items of one subject)",
        "choose the current value: bxctl memory reconcile SUBJECT --keep ID (the others become history)",
        see="bxctl memory items --kind state",
    )
    for subject, rows in sorted(active_by_subject(visible).items()):
        if len(rows) < 2:
            continue
        ordered = sorted(rows, key=lambda i: (i.time, i.id))
        section.rows.append({"subject": subject, "ids": [i.id for i in ordered], "newest": ordered[-1].id})
        if len(section.lines) >= SHOWN:  # counted, not shown: made only for the text's first lines
            section.unmade += 1
            continue
        listed = "; ".join(f"[{i.date}] {i.id} {_short(i.text, 40)}" for i in ordered)
        section.lines.append(f"subject {_short(subject)}: {listed}")
    return section


def _boundary(visible: Sequence[Item], inputs: Inputs, ruled: set[str] | None = None) -> Section:
    """Identity entries and active knowledge items (not merged) that read like rules, with the ids of
    the items that do in `ruled` when they are known (`_duplicates`); dated lines of soul.md and
    conventions.md."""
    section = Section(
        "boundary",
        "Steering/memory boundary",
        "a standing rule belongs in conventions.md, through a proposal you accept (the memory action "
        "propose; "
        "bxctl memory proposals accept ID) or your own edit; a one-off incident in soul.md or conventions.md "
        "belongs in memory: bxctl memory note TEXT, then remove it from that file by hand",
        see="bxctl memory items --kind knowledge",
    )
    for name, entries in inputs.identity.items():
        for entry in entries:
            if (name, entry) not in inputs.withdrawn_entries and RULE.search(entry):
                section.rows.append(
                    {"file": name, "text": entry, "reads_like": "standing rule", "candidate": "proposal"}
                )
                section.lines.append(
                    f"{name} · reads like a standing rule: candidate for a proposal · {_short(entry)}"
                )
    candidates = [
        i
        for i in visible
        if i.kind == "knowledge"
        and i.status == "active"
        and i.merged_into is None  # a merged member is history: its consolidated item is proposed
    ]
    if ruled is None:
        ruled = {candidates[n].id for n in facts([i.text for i in candidates])[1]}
    for item in candidates:
        if item.id in ruled:
            section.rows.append(_item_row(item, reads_like="standing rule", candidate="proposal"))
            if len(section.lines) < SHOWN:  # the text shows the first `SHOWN`
                section.lines.append(
                    f"{item.id} · reads like a standing rule: candidate for a proposal · {_short(item.text)}"
                )
    files = [("soul.md", [line for line in inputs.soul.splitlines() if line.strip()])]
    if inputs.conventions is not None:
        files.append((CONVENTIONS.name, parse_entries(inputs.conventions)))
    for name, lines in files:
        for line in lines:
            if not line.lstrip().startswith("#") and _DATED.search(line):
                section.rows.append({"file": name, "text": line, "reads_like": "one-off incident"})
                section.lines.append(f"{name} · reads like a one-off incident with a date · {_short(line)}")
    return section


def _withdrawals(inputs: Inputs, excluded: Sequence[str] | None = None) -> Section:
    """The withdrawal chains not reinstated, and withdrawn ids (of the chains' scopes, and `excluded`:
    the items withdrawn, when known) found in a generated page."""
    section = Section(
        "withdrawals",
        "Withdrawal chains",
        "a conflicting chain: bxctl memory withdraw (its exact scope) --reason reconciliation "
        "--supersedes ONE-OF-THE-HEADS; an in-force withdrawal ends only by bxctl memory reinstate ID; "
        "a withdrawn id in a generated page: restart memoryd (bxctl down; bxctl up), which writes them again",
        see="bxctl memory controls",
    )
    withdrawn: set[str] = set()
    for chain in inputs.chains:
        if chain.state == "reinstated":
            continue
        heads = [r.withdrawal_id for r in chain.heads]
        section.rows.append(
            {"state": chain.state, "heads": heads, "scope": chain.scope.selectors(), "why": chain.why or None}
        )
        said = f"{chain.state}: {', '.join(heads)} · {', '.join(chain.scope.selectors())}"
        section.lines.append(said + (f" · {chain.why}" if chain.why else ""))
        withdrawn.update(chain.scope.memory_item_ids)
    if excluded is None:
        excluded = [i.id for i in inputs.items.values() if inputs.excluded(i)]
    withdrawn.update(excluded)
    for name, text in inputs.generated.items():
        leaked = sorted(i for i in withdrawn if re.search(rf"{re.escape(i)}(?!\d)", text))
        if leaked:
            section.rows.append(
                {"file": name, "withdrawn_ids": leaked, "problem": "withdrawn item in a generated page"}
            )
            section.lines.append(f"{name} shows withdrawn {', '.join(leaked)}: a generated page must not")
    return section


def _archive(inputs: Inputs, days: Mapping[str, list[str]] | None = None) -> Section:
    """The archive files with items not yet distilled (`days`: their ids by archive day, found by
    `build`'s pass as `undistilled_days` finds them)."""
    section = Section(
        "archive",
        "Archive not yet distilled (archived items no autodream pass's dream-input has shown)",
        "let the autodream job distil them (it runs daily; bxctl jobs shows it), or distil by hand with "
        "bxctl memory note; withdrawn items are not counted",
        see="bxctl memory items (their Source names the archive file)",
    )
    if days is None:
        days = undistilled_days(inputs.items, inputs.excluded, set(inputs.shown))
    for day, ids in sorted(days.items()):
        file = f"{ARCHIVE_DIR}/{day}.md"
        section.rows.append({"file": file, "items": sorted(ids)[:ROW_IDS], "items_count": len(ids)})
        section.lines.append(f"{file} · {len(ids):,} item{'' if len(ids) == 1 else 's'} not distilled")
    return section


def _schema(visible: Sequence[Item], inputs: Inputs) -> Section:
    section = Section(
        "schema",
        "Schema drift (items missing kind or Source; legacy notes without an item id)",
        "capture each as an item with its kind: bxctl memory note --kind knowledge TEXT, or --kind state "
        "--subject S TEXT (the legacy note stays as it was)",
        see="bxctl memory items",
    )
    for item in visible:
        missing = [
            name for name, bad in (("kind", item.kind not in KINDS), ("Source", not item.source)) if bad
        ]
        if missing:
            section.rows.append(_item_row(item, missing=missing))
            section.lines.append(f"{item.id} · missing {', '.join(missing)} · {_short(item.text)}")
    for note in inputs.notes:
        if (
            note.kind != "noted"
            or item_id_of(note) is not None
            or inputs.note_excluded(note)
            or not note.text
        ):
            continue
        section.rows.append(
            {"file": "notes.md", "note": note.key, "text": note.text, "missing": ["kind", "Source"]}
        )
        section.lines.append(f"notes.md {note.key} · a legacy note without an item id · {_short(note.text)}")
    return section


def _triggers(visible: Sequence[Item] | Mapping[str, Sequence[Item]]) -> Section:
    """The topics (of `visible`, or `visible` already by topic) whose items give no trigger."""
    section = Section(
        "triggers",
        "Topics without triggers of their own",
        "give the topic's items a scope or subject when they are captured (autodream assigns topics and "
        "triggers), so index.md says when to read the page",
        see="bxctl memory items",
    )
    by_topic: Mapping[str, Sequence[Item]] = visible if isinstance(visible, Mapping) else _by_topic(visible)
    for name, members in sorted(by_topic.items()):
        if not any(i.scope or i.subject or i.triggers for i in members):  # incl. autodream's assign
            section.rows.append(
                {
                    "topic": f"{names.TOPICS_DIR}/{name}.md",
                    "items": [i.id for i in members[:ROW_IDS]],
                    "items_count": len(members),
                }
            )
            section.lines.append(
                f"{names.TOPICS_DIR}/{name}.md · {len(members):,} item{'' if len(members) == 1 else 's'}, "
                "no scope or subject"
            )
    return section


def _by_topic(items: Sequence[Item]) -> dict[str, list[Item]]:
    found: dict[str, list[Item]] = {}
    for item in items:
        found.setdefault(projections.topic_of(item), []).append(item)
    return found
