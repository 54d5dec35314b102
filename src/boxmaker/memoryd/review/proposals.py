"""Promotion proposals and the owner's conventions (seed 003 sections 5, 17 and 23.5; DESIGN 8).

An agent never writes ``memory/conventions.md``. A live session files a proposal with the `memory`
action ``propose``; only the owner's ``bxctl memory proposals accept ID`` writes the rule into
conventions.md. Repeated evidence makes a proposal *eligible* (at least `ELIGIBLE` independent
supporting references), never *authorised*: no code path here or elsewhere writes conventions.md
without that accept.

``memory/proposals.jsonl`` is append-only, one event a line, each appended by a journal commit whose
line carries the same event under ``"proposals"`` (so `replay` rebuilds the file):

- a proposal (the `memory` action ``propose``; journal action ``propose``, where proposals.jsonl)::

      {"event": "proposal", "proposal_id": "mempolicy-YYYY-MM-DD-NNN", "target": "conventions"
       | "<element>:<name>", "proposed_change": str (1-500), "supporting_refs": [str, ...] (1-20),
       "expected_benefit": str (1-300), "risk": str (1-300), "status": "pending-review",
       "proposed_by": session id, "proposed_at": "YYYY-MM-DDTHH:MM:SSZ",
       "label": {"class", "untrusted"}}   # untrusted when the session had read untrusted content

- a decision (the owner's accept or reject; journal actions ``accept-proposal``, where conventions.md,
  with the file's ``before`` and ``after`` entries and the rewrite, or ``reject-proposal``)::

      {"event": "decision", "proposal_id", "status": "accepted" | "rejected", "decided_by": "owner",
       "decided_at": time, "edit": the journal edit id}

Supporting references (`ref_problem`): item ids ``mem-…`` must name an item of the store that is not
erased or withdrawn; archive anchors ``archive/YYYY-MM-DD.md`` (optionally ``#mem-…``) must name an
archive file that exists and is not withdrawn; feedback ids ``memfb-YYYY-MM-DD-NNN`` and retrieval
ids ``memret-YYYY-MM-DD-NNN`` (seed 23.2) must name an event of feedback.jsonl or a line of the recall
log (else ``refused:not-found`` naming the ref). Independence (`independent`): references count once
per origin: an item (or an archive anchor naming one) by the session that captured it, a merged item
and its members as one, an archive day by its file, a feedback or retrieval id by itself.

Every text field passes the write check (`rules.check_text`, ``refused:secret`` included); a refusal
writes nothing. Accepting re-runs the checks of an `add` to conventions.md (`edits.add`: empty,
duplicate, 2,000 characters, the content rules) and the steering budget (soul.md with conventions.md
at most 4,000 characters) in one commit: the decision event, and conventions.md's rewrite (the
journal keeps ``before`` and ``after``; `bxctl memory undo EDIT` restores it like an identity edit).
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Annotated, Any

import msgspec

from boxmaker.memoryd.check.rules import check_text
from boxmaker.memoryd.files import edits
from boxmaker.memoryd.files.entries import CONVENTIONS, STEERING_LIMIT, file_content, prepare, render_entries
from boxmaker.memoryd.files.journal import Append, Change, Rewrite, encode_line, read_jsonl
from boxmaker.memoryd.files.names import ARCHIVE_DIR, PROPOSALS_FILE, RECALLS_DIR
from boxmaker.memoryd.files.store import STEERING, FileOverLimit, FileUnreadable
from boxmaker.memoryd.index import retrievals
from boxmaker.memoryd.items.store import Item, is_item_id
from boxmaker.memoryd.review.feedback import read_feedback
from boxmaker.memoryd.sentences import OK, Code, Refusal, identity, promotion, unavailable
from boxmaker.memoryd.withdrawal.controls import Controls
from boxmaker.memoryd.withdrawal.exclusion import Exclusion
from boxmaker.memoryd.write.answer import Answer, Caller
from boxmaker.memoryd.write.origin import Origin, needs_confirmation
from boxmaker.memoryd.write.writer import Writer
from boxmaker.proto.escape import escape_line
from boxmaker.proto.ids import OWNER_SESSION
from boxmaker.proto.labels import Label

PENDING = "pending-review"
ACCEPTED = "accepted"
REJECTED = "rejected"
#: Independent supporting references that make a proposal eligible for the owner's review.
ELIGIBLE = 2
CHANGE_LIMIT = 500
TEXT_LIMIT = 300
MAX_REFS = 20

_PROPOSAL_ID = re.compile(r"^mempolicy-(\d{4}-\d{2}-\d{2})-(\d{3,})\Z")
_DATED = r"(\d{4}-\d{2}-\d{2})-\d{3,}"
_FEEDBACK = re.compile(rf"^memfb-{_DATED}\Z")
_RETRIEVAL = re.compile(rf"^memret-{_DATED}\Z")
_ARCHIVE = re.compile(r"^archive/(\d{4}-\d{2}-\d{2})\.md(?:#(mem-\d{4}-\d{2}-\d{2}-\d{3,}))?\Z")
_TARGET = re.compile(
    r"^(?:conventions|[a-z][a-z0-9-]{0,39}:[^\s\x00-\x1f\x7f-\x9f\u2028\u2029][^\x00-\x1f\x7f-\x9f\u2028\u2029]{0,79})\Z"
)


class Proposal(msgspec.Struct, frozen=True, kw_only=True):
    """One proposal as the fold of its events leaves it (seed 003 section 23.5's fields, plus who,
    when, the label, and the owner's decision once made)."""

    proposal_id: str
    target: str
    proposed_change: str
    supporting_refs: tuple[str, ...]
    expected_benefit: str
    risk: str
    status: str
    proposed_by: str
    proposed_at: str
    label: Label
    decided_by: str | None = None
    decided_at: str | None = None
    edit: str | None = None


def is_proposal_id(value: str) -> bool:
    """True for ``mempolicy-YYYY-MM-DD-NNN`` with a real date."""
    match = _PROPOSAL_ID.match(value)
    return match is not None and _real_date(match.group(1))


def _real_date(day: str) -> bool:
    try:
        dt.date.fromisoformat(day)
    except ValueError:
        return False
    return True


def read_events(path: Path) -> list[dict[str, Any]]:
    """proposals.jsonl's events, oldest first (a line that is not one is skipped with a log line)."""
    return read_jsonl(path, ("event", "proposal_id"))


def fold(events: Iterable[dict[str, Any]]) -> dict[str, Proposal]:
    """Every proposal by id, in filing order, with its latest decision applied. Events of unknown
    proposals, and malformed ones, are skipped."""
    found: dict[str, Proposal] = {}
    for event in events:
        ident = str(event.get("proposal_id"))
        try:
            if event.get("event") == "proposal" and ident not in found:
                found[ident] = Proposal(
                    proposal_id=ident,
                    target=str(event["target"]),
                    proposed_change=str(event["proposed_change"]),
                    supporting_refs=tuple(str(r) for r in event["supporting_refs"]),
                    expected_benefit=str(event["expected_benefit"]),
                    risk=str(event["risk"]),
                    status=PENDING,
                    proposed_by=str(event["proposed_by"]),
                    proposed_at=str(event["proposed_at"]),
                    label=msgspec.convert(event["label"], Label),
                )
            elif event.get("event") == "decision" and ident in found:
                found[ident] = msgspec.structs.replace(
                    found[ident],
                    status=str(event["status"]),
                    decided_by=str(event["decided_by"]),
                    decided_at=str(event["decided_at"]),
                    edit=str(event.get("edit") or "") or None,
                )
        except (KeyError, TypeError, msgspec.ValidationError):
            continue
    return found


def next_id(events: Iterable[dict[str, Any]], day: dt.date) -> str:
    """The next ``mempolicy-YYYY-MM-DD-NNN`` of `day`."""
    prefix = f"mempolicy-{day.isoformat()}-"
    numbers = [
        int(str(e["proposal_id"])[len(prefix) :])
        for e in events
        if str(e.get("proposal_id", "")).startswith(prefix) and str(e["proposal_id"])[len(prefix) :].isdigit()
    ]
    return f"{prefix}{max(numbers, default=0) + 1:03d}"


# Supporting references ---------------------------------------------------------------------------


def ref_problem(ref: str, items: Mapping[str, Item], excluded: Exclusion, memory_dir: Path) -> Refusal | None:
    """Why `ref` cannot support a proposal, or None (module docstring)."""
    if is_item_id(ref):
        item = items.get(ref)
        if item is None or item.erased or excluded.item(item):
            return promotion.bad_ref(ref, "names no item of the store (see bxctl memory items)")
        return None
    archived = _ARCHIVE.match(ref)
    if archived is not None:
        if (
            not _real_date(archived.group(1))
            or not (memory_dir / ARCHIVE_DIR / f"{archived.group(1)}.md").is_file()
        ):
            return promotion.bad_ref(ref, "names no archive file")
        if excluded.archive(ref):
            return promotion.bad_ref(ref, "names no archive file")
        named = archived.group(2)
        if named is not None and (named not in items or items[named].erased or excluded.item(items[named])):
            return promotion.bad_ref(ref, "names no item of the store (see bxctl memory items)")
        return None
    for form in (_FEEDBACK, _RETRIEVAL):
        match = form.match(ref)
        if match is not None:
            if not _real_date(match.group(1)):
                return promotion.bad_ref(ref, "has no real date")
            if form is _FEEDBACK:
                known = any(e.get("event_id") == ref for e in read_feedback(memory_dir))
            else:
                known = retrievals.find_retrieval(memory_dir / RECALLS_DIR, ref) is not None
            return None if known else promotion.ref_not_found(ref)
    return promotion.bad_ref(
        ref, "is not an item id mem-…, an archive anchor archive/YYYY-MM-DD.md, memfb-… or memret-…"
    )


def origins(ref: str, items: Mapping[str, Item]) -> set[str]:
    """What a reference's evidence comes from, for counting independent references: an item's
    capturing session and, for a merged item or one of its members, the merge (``merge:<id>``)."""
    archived = _ARCHIVE.match(ref)
    ident = ref if is_item_id(ref) else (archived.group(2) if archived else None)
    if ident is not None and ident in items:
        item = items[ident]
        found = {f"session:{item.session}"}
        seen: set[str] = set()
        while item.merged_into and item.merged_into in items and item.id not in seen:
            seen.add(item.id)
            item = items[item.merged_into]
        if item.sources or item.id != ident:
            found.add(f"merge:{item.id}")
        return found
    if archived is not None:
        return {f"archive:{archived.group(1)}"}
    return {ref}


def independent(refs: Iterable[str], items: Mapping[str, Item]) -> int:
    """How many independent pieces of evidence `refs` cite: references sharing an origin
    (`origins`: a session, a merge, an archive day) count once, transitively."""
    groups: list[set[str]] = []
    for ref in dict.fromkeys(refs):
        keys = origins(ref, items)
        joined = [g for g in groups if g & keys]
        for group in joined:
            keys |= group
            groups.remove(group)
        groups.append(keys)
    return len(groups)


# The memory action `propose` ---------------------------------------------------------------------


def _field(name: str, value: str, limit: int) -> str | Refusal:
    text = prepare(value)
    if not text or len(text) > limit:
        return identity.arguments(f"`{name}` must be 1 to {limit:,} characters after trimming")
    refusal = check_text(text)
    if refusal is not None:
        return promotion.proposal_field(name, refusal.rule, refusal.sentence)
    return text


def propose(writer: Writer, controls: Controls, caller: Caller, args: ProposeArgs) -> Answer:
    """File a proposal (status pending-review) for `caller`, or refuse with nothing written.

    Refusals: ``refused:arguments`` (lengths, the target's form), a write-check code on any text
    field (``refused:secret`` …), ``refused:refs`` (none given, or one that names nothing),
    ``refused:not-found`` (a feedback or retrieval id not recorded),
    ``refused:duplicate`` (the same change to the same target already pending),
    ``refused:unavailable`` (a store file cannot be read).
    """
    target, refs = args.target, list(args.refs)
    if not _TARGET.match(target) or " \u00b7 " in target:
        return Answer.refused(promotion.bad_target(target))
    checked: list[str] = []
    for name, value, limit in (
        ("text", args.text, CHANGE_LIMIT),
        ("benefit", args.benefit, TEXT_LIMIT),
        ("risk", args.risk, TEXT_LIMIT),
    ):
        text = _field(name, value, limit)
        if isinstance(text, Refusal):
            return Answer.refused(text)
        checked.append(text)
    change, benefit, risk = checked
    wanted = list(dict.fromkeys(r.strip() for r in refs))
    if not wanted or not all(wanted):
        return Answer.refused(promotion.NO_SUPPORT)
    path = writer.store.proposals_path
    with writer.lock:
        try:
            events = read_events(path)
            items = writer.items.items()
            excluded = controls.exclusion()
            problems = (ref_problem(ref, items, excluded, writer.store.dir) for ref in wanted)
            problem = next((p for p in problems if p is not None), None)
        except OSError as exc:
            return Answer.refused(unavailable(str(exc)))
        if problem is not None:
            return Answer.refused(problem)
        for existing in fold(events).values():
            if existing.status == PENDING and (existing.target, existing.proposed_change) == (target, change):
                return Answer.refused(promotion.proposal_duplicate(existing.proposal_id))
        reserved = writer.journal.reserve()
        event = {
            "event": "proposal",
            "proposal_id": next_id(events, reserved.moment.date()),
            "target": target,
            "proposed_change": change,
            "supporting_refs": wanted,
            "expected_benefit": benefit,
            "risk": risk,
            "status": PENDING,
            "proposed_by": caller.session,
            "proposed_at": reserved.time,
            "label": msgspec.to_builtins(caller.label),
        }
        entry = {
            "session": caller.session,
            "call": caller.call,
            "untrusted": caller.label.untrusted,
            "action": "propose",
            "file": PROPOSALS_FILE,
            "where": PROPOSALS_FILE,
            "before": [],
            "after": [],
            "proposals": [event],
        }
        line = writer.journal.commit(Change(entry, [_append(event)], reserved=reserved))
    count = independent(wanted, items)
    return Answer(promotion.proposed(str(event["proposal_id"]), len(wanted), count), OK, str(line["id"]))


def _append(event: dict[str, Any]) -> Append:
    return Append(PROPOSALS_FILE, encode_line(event) + b"\n")


# The owner's decisions ---------------------------------------------------------------------------


def decide(writer: Writer, ident: str, accept: bool, untrusted_ok: bool = False) -> Answer:
    """The owner's accept (the rule appended to conventions.md) or reject of a pending proposal, in
    one journal commit; refused with nothing written: ``refused:not-found``, ``refused:decided``,
    ``refused:untrusted`` (accepting a proposal filed by a session that had read untrusted content
    needs `untrusted_ok`), ``refused:confirm`` (so does one filed by a session above private: the
    identity-write rule, `write.origin`; the accepted line carries ``origin`` and ``class``),
    ``refused:duplicate`` (conventions.md already holds the rule), ``refused:limit`` (2,000 characters,
    or soul.md with conventions.md over 4,000), a write-check code, ``refused:unavailable``."""
    with writer.lock:
        try:
            found = fold(read_events(writer.store.proposals_path)).get(ident)
        except OSError as exc:
            return Answer.refused(unavailable(str(exc), "nothing was changed"))
        if found is None:
            return Answer.refused(promotion.proposal_not_found(ident))
        if found.status != PENDING:
            return Answer.refused(promotion.proposal_decided(ident, found.status))
        if accept and found.label.untrusted and not untrusted_ok:
            return Answer.refused(promotion.proposal_untrusted(ident, found.proposed_by))
        if accept and needs_confirmation(found.label) and not untrusted_ok:
            cls = found.label.data_class.value
            return Answer.refused(promotion.proposal_above_private(ident, found.proposed_by, cls))
        reserved = writer.journal.reserve()
        decision = {
            "event": "decision",
            "proposal_id": ident,
            "status": ACCEPTED if accept else REJECTED,
            "decided_by": OWNER_SESSION,
            "decided_at": reserved.time,
            "edit": reserved.id,
        }
        entry: dict[str, Any] = {
            "session": OWNER_SESSION,
            "call": "",
            "untrusted": False,
            "proposal": ident,
            "proposals": [decision],
        }
        if not accept:
            entry.update(
                action="reject-proposal", file=PROPOSALS_FILE, where=PROPOSALS_FILE, before=[], after=[]
            )
            writer.journal.commit(Change(entry, [_append(decision)], reserved=reserved))
            return Answer(promotion.rejected_proposal(ident, reserved.id), OK, reserved.id)
        try:
            soul = writer.store.read_soul()
            current = writer.store.read_conventions()
        except (FileUnreadable, FileOverLimit) as exc:
            return Answer.refused(unavailable(str(exc)))
        outcome = edits.add(CONVENTIONS, current.entries, found.proposed_change)
        if isinstance(outcome, Refusal):
            if outcome.code == Code.LIMIT:
                size = len(render_entries((*current.entries, prepare(found.proposed_change))))
                return Answer.refused(promotion.conventions_limit(CONVENTIONS.name, size, CONVENTIONS.limit))
            return Answer.refused(outcome)
        size = len(render_entries(outcome.entries))
        if len(soul) + size > STEERING_LIMIT:
            return Answer.refused(promotion.conventions_limit(STEERING, len(soul) + size, STEERING_LIMIT))
        entry.update(
            action="accept-proposal",
            file=CONVENTIONS.name,
            where=CONVENTIONS.name,
            before=list(current.entries),
            after=list(outcome.entries),
        )
        entry["class"] = found.label.data_class.value
        entry["origin"] = Origin("session", found.proposed_by, found.label).record()
        rewrite = Rewrite(CONVENTIONS.name, current.raw, file_content(outcome.entries))
        change = Change(entry, [_append(decision)], rewrite, reserved)
        writer.journal.commit(change)
    return Answer(promotion.accepted_proposal(ident, reserved.id, size, CONVENTIONS.limit), OK, reserved.id)


# The owner's listing -----------------------------------------------------------------------------


def listing(writer: Writer, show_all: bool) -> tuple[str, list[dict[str, Any]]] | Refusal:
    """The pending proposals (every one with `show_all`), oldest first: text and data. Each row
    carries its refs, how many are independent, and ``eligible`` (at least `ELIGIBLE`): eligible for
    the owner's review, never authorised."""
    try:
        found = fold(read_events(writer.store.proposals_path))
        items = writer.items.items()
    except OSError as exc:
        return unavailable(str(exc), "nothing to list")
    rows: list[dict[str, Any]] = []
    lines: list[str] = []
    for proposal in found.values():
        if proposal.status != PENDING and not show_all:
            continue
        count = independent(proposal.supporting_refs, items)
        row: dict[str, Any] = msgspec.to_builtins(proposal)
        row.update(refs=len(proposal.supporting_refs), independent=count, eligible=count >= ELIGIBLE)
        rows.append(row)
        lines += _describe(proposal, count)
    if not rows:
        return ("(no proposals waiting for review)" if not show_all else "(no proposals)"), rows
    return "\n".join(lines), rows


def _describe(proposal: Proposal, count: int) -> list[str]:
    who = "the owner" if proposal.proposed_by == OWNER_SESSION else f"session {proposal.proposed_by}"
    if proposal.label.untrusted:
        who += " (untrusted: it had read untrusted content)"
    head = f"{proposal.proposal_id}  {proposal.status}  target {proposal.target}  by {who}"
    head += f"  {proposal.proposed_at}"
    if proposal.status != PENDING:
        head += (
            f"  ({proposal.status} by {proposal.decided_by} at {proposal.decided_at}, edit {proposal.edit})"
        )
    refs = len(proposal.supporting_refs)
    if count >= ELIGIBLE:
        standing = "eligible for review; only your accept writes it"
    else:
        standing = f"not yet eligible: {ELIGIBLE} independent refs make it eligible"
    return [
        escape_line(head),
        f"  change: {escape_line(proposal.proposed_change)}",
        f"  refs ({refs}, {count} independent: {standing}): "
        + ", ".join(escape_line(r) for r in proposal.supporting_refs),
        f"  benefit: {escape_line(proposal.expected_benefit)}",
        f"  risk: {escape_line(proposal.risk)}",
    ]


_Ref = Annotated[str, msgspec.Meta(min_length=1, max_length=200)]


class ProposeArgs(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """``{"action": "propose", "target", "text", "refs": [...], "benefit", "risk"}``: a promotion or
    memory-policy proposal (seed 003 sections 17 and 23.5; `proposals`). `text` is the proposed rule
    (stored as ``proposed_change``), `refs` the supporting references (``supporting_refs``), `benefit`
    and `risk` the expected benefit and the risk. Lengths and content are checked by `proposals.propose`."""

    action: str
    target: Annotated[str, msgspec.Meta(min_length=1, max_length=120)]
    text: Annotated[str, msgspec.Meta(min_length=1, max_length=2_000)]
    refs: Annotated[list[_Ref], msgspec.Meta(min_length=1, max_length=20)]
    benefit: Annotated[str, msgspec.Meta(min_length=1, max_length=1_000)]
    risk: Annotated[str, msgspec.Meta(min_length=1, max_length=1_000)]
