"""Withdrawal controls: what is kept out of every exposure, and why (seed 003 sections 12.1 and 12.2).

``memory/controls.jsonl`` is append-only; each line is one `WithdrawalRecord` exactly as seed 12.2
gives it (ASCII JSON, `journal.encode_line`)::

    {"withdrawal_id": "memwd-2026-11-29-001", "record_type": "withdrawal-control-v1",
     "action": "withdraw", "scope": {"memory_item_ids": ["mem-2026-11-29-003"]},
     "reason": "failed-exploration", "decided_by": "owner", "decided_at": "2026-11-29T18:30:00Z",
     "effect": "exclude-from-influence", "supersedes": null}

Selectors (`Scope`): ``memory_item_ids`` (``mem-YYYY-MM-DD-NNN``), ``archive_refs``
(``archive/YYYY-MM-DD.md``, a whole day, or ``archive/YYYY-MM-DD.md#mem-…``, one item in it) and
``source_or_run_refs`` (a session id such as ``chat-…``, ``job-…`` or ``heartbeat``, or one record of a
session log ``sessions/<id>/<epoch>.jsonl#<line>``, line 1-based). Each array is a set: `normalize`
sorts it and drops duplicates, and an empty array is absent, so two records have the same exact scope
exactly when their normalized scopes are equal (`Scope.key`). At least one selector is required.

Rules (`check`, for a record about to be appended; `problems`, for any record read back):

- ``action: withdraw`` has ``effect: exclude-from-influence``; ``reinstate`` has
  ``restore-eligibility``, the same exact scope as the withdrawal it names in ``supersedes``.
- A new event for a scope that already has events must name that scope's controlling event (its
  newest in causal order) in ``supersedes``; the first event of a scope is a withdrawal naming none.
- ``reason`` is one of `REASONS` (explanatory metadata, never a truth verdict); ``decided_by`` is
  ``owner`` or ``session:<id> on the owner's request``.

Resolution (`resolve`) follows each scope's ``supersedes`` chain, never the clock or the file order:
the scope's one head (the event no other event supersedes) decides it. A withdrawal head keeps the
scope excluded; a reinstatement head makes it eligible again. Two heads (a fork, or two roots), or an
event whose ``supersedes`` names no event of its scope, leave the scope *conflicting*: excluded (fail
closed) and reported by ``bxctl memory controls`` as needing reconciliation. Since seed 12.2 gives
``supersedes`` one id, a fork is reconciled by the owner: an event with ``reason: reconciliation``,
``decided_by: owner``, superseding one head; the head whose chain holds a reconciliation no other
head's chain holds then controls the scope.

`Controls.exclusion` gives an `Exclusion`: the union of every excluded scope (in force or
conflicting), applied before anything is exposed (recall, the owner's search, the memory block,
the indexer, tiers, the generated index and topics, export).
"""

from __future__ import annotations

import datetime as dt
import logging
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, TypeAlias

import msgspec

from boxmaker.memoryd.files.journal import encode_line
from boxmaker.memoryd.items.store import is_item_id
from boxmaker.memoryd.sentences import Refusal, withdrawal
from boxmaker.proto.ids import OWNER_SESSION, is_session_id

log = logging.getLogger("boxmaker.memoryd.controls")

RECORD_TYPE = "withdrawal-control-v1"
#: The closed reason vocabulary (seed 12.2: explanatory metadata, not a truth verdict).
REASONS: tuple[str, ...] = (
    "failed-exploration",
    "owner-decision",
    "mistaken",
    "poisoned",
    "reconciliation",
    "other",
)
RECONCILIATION = "reconciliation"
EFFECTS = {"withdraw": "exclude-from-influence", "reinstate": "restore-eligibility"}

Action: TypeAlias = Literal["withdraw", "reinstate"]
Effect: TypeAlias = Literal["exclude-from-influence", "restore-eligibility"]
#: A scope's resolved state.
ScopeState: TypeAlias = Literal["in-force", "reinstated", "conflicting"]

_DATE = r"[0-9]{4}-[0-9]{2}-[0-9]{2}"
_ID = re.compile(rf"^memwd-({_DATE})-([0-9]{{3,}})\Z")
_ARCHIVE = re.compile(rf"^archive/({_DATE})\.md(?:#(mem-{_DATE}-[0-9]{{3,}}))?\Z")
_ANCHOR = re.compile(r"^sessions/([a-z0-9][a-z0-9-]{0,63})/(0|[1-9][0-9]{0,8})\.jsonl#([1-9][0-9]{0,9})\Z")
_SESSION_DECIDER = re.compile(r"^session:([a-z0-9][a-z0-9-]{0,63}) on the owner's request\Z")
_TIME = re.compile(r"^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}Z\Z")


class Scope(msgspec.Struct, frozen=True, forbid_unknown_fields=True, omit_defaults=True):
    """A bounded scope: three selector sets (seed 12.2). Build normalized ones with `normalize`."""

    memory_item_ids: tuple[str, ...] = ()
    archive_refs: tuple[str, ...] = ()
    source_or_run_refs: tuple[str, ...] = ()

    def key(self) -> tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...]]:
        """The exact-scope key: equal for two scopes exactly when their normalized sets are equal."""
        scope = normalize(self)
        return scope.memory_item_ids, scope.archive_refs, scope.source_or_run_refs

    def selectors(self) -> list[str]:
        """Every selector, items first."""
        return [*self.memory_item_ids, *self.archive_refs, *self.source_or_run_refs]

    def empty(self) -> bool:
        """True when no selector is given."""
        return not self.selectors()


class WithdrawalRecord(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """One line of controls.jsonl, exactly seed 12.2's fields."""

    withdrawal_id: str
    record_type: str
    action: str
    scope: Scope
    reason: str
    decided_by: str
    decided_at: str
    effect: str
    supersedes: str | None

    def to_dict(self) -> dict[str, Any]:
        """The record as JSON values (the scope's empty arrays absent)."""
        value: dict[str, Any] = msgspec.json.decode(msgspec.json.encode(self))
        return value

    def line(self) -> bytes:
        """The record as one ASCII JSON line (no newline)."""
        return encode_line(self.to_dict())


def normalize(scope: Scope) -> Scope:
    """The scope with each selector array as a sorted set (duplicates and order are irrelevant;
    empty arrays are absent once encoded)."""
    return Scope(
        tuple(sorted(set(scope.memory_item_ids))),
        tuple(sorted(set(scope.archive_refs))),
        tuple(sorted(set(scope.source_or_run_refs))),
    )


def same_scope(a: Scope, b: Scope) -> bool:
    """True when `a` and `b` are the same exact scope (seed 12.2)."""
    return a.key() == b.key()


def is_withdrawal_id(value: str) -> bool:
    """True for ``memwd-YYYY-MM-DD-NNN`` with a real date."""
    match = _ID.match(value)
    return match is not None and _real_date(match.group(1))


def withdrawal_id(day: dt.date, n: int) -> str:
    """The id of the `n`-th control event (from 1) of `day`."""
    return f"memwd-{day.isoformat()}-{n:03d}"


def _real_date(value: str) -> bool:
    try:
        dt.date.fromisoformat(value)
    except ValueError:
        return False
    return True


def is_archive_ref(value: str) -> bool:
    """True for ``archive/YYYY-MM-DD.md`` or ``archive/YYYY-MM-DD.md#mem-…`` with real dates."""
    match = _ARCHIVE.match(value)
    if match is None or not _real_date(match.group(1)):
        return False
    return match.group(2) is None or is_item_id(match.group(2))


def parse_anchor(value: str) -> tuple[str, int, int] | None:
    """(session, epoch, line) of ``sessions/<id>/<epoch>.jsonl#<line>``, or None."""
    match = _ANCHOR.match(value)
    if match is None or match.group(1) == OWNER_SESSION:
        return None
    return match.group(1), int(match.group(2)), int(match.group(3))


def is_source_ref(value: str) -> bool:
    """True for an agent's session id or a session-log record anchor."""
    if is_session_id(value):
        return value != OWNER_SESSION
    return parse_anchor(value) is not None


def session_decider(session: str) -> str:
    """``decided_by`` for a session acting on the owner's request."""
    return f"session:{session} on the owner's request"


def scope_problem(scope: Scope) -> Refusal | None:
    """Why a scope cannot be a withdrawal's scope (``refused:scope``), or None."""
    if scope.empty():
        return withdrawal.SCOPE_EMPTY
    for value in scope.memory_item_ids:
        if not is_item_id(value):
            return withdrawal.bad_selector(value, "an item id is mem-YYYY-MM-DD-NNN, of a real date")
    for value in scope.archive_refs:
        if not is_archive_ref(value):
            return withdrawal.bad_selector(
                value, "an archive ref is archive/YYYY-MM-DD.md[#mem-…], of a real date"
            )
    for value in scope.source_or_run_refs:
        if not is_source_ref(value):
            return withdrawal.bad_selector(
                value, "a source ref is a session id or sessions/<id>/<epoch>.jsonl#<line>"
            )
    return None


def shape_problem(record: WithdrawalRecord) -> Refusal | None:
    """The first rule of seed 12.2 a record breaks on its own (without the log), or None."""
    if not is_withdrawal_id(record.withdrawal_id):
        return withdrawal.bad_record(f"withdrawal_id {record.withdrawal_id!r} is not memwd-YYYY-MM-DD-NNN")
    if record.record_type != RECORD_TYPE:
        return withdrawal.bad_record(f"record_type must be {RECORD_TYPE}")
    if record.action not in EFFECTS:
        return withdrawal.bad_record("action must be withdraw or reinstate")
    if record.effect != EFFECTS[record.action]:
        return withdrawal.bad_record(f"action {record.action} requires effect {EFFECTS[record.action]}")
    problem = scope_problem(record.scope)
    if problem is not None:
        return problem
    if record.reason not in REASONS:
        return withdrawal.bad_reason(record.reason)
    if record.decided_by != OWNER_SESSION and not _SESSION_DECIDER.match(record.decided_by):
        return withdrawal.bad_record("decided_by must be owner or session:<id> on the owner's request")
    if not _TIME.match(record.decided_at):
        return withdrawal.bad_record("decided_at must be YYYY-MM-DDTHH:MM:SSZ")
    if record.supersedes is not None and not is_withdrawal_id(record.supersedes):
        return withdrawal.bad_record(f"supersedes {record.supersedes!r} is not a withdrawal id")
    if record.action == "reinstate" and record.supersedes is None:
        return withdrawal.REINSTATE_NEEDS_SUPERSEDES
    if record.reason == RECONCILIATION and record.decided_by != OWNER_SESSION:
        return withdrawal.bad_record("only the owner reconciles conflicting controls")
    return None


def decode(line: dict[str, Any]) -> WithdrawalRecord:
    """A record from a decoded JSON line.

    Raises:
        msgspec.ValidationError: when it does not have the record's shape.
    """
    return msgspec.convert(line, WithdrawalRecord)


# Resolution ------------------------------------------------------------------------------------------


@dataclass(slots=True)
class Chain:
    """Every event of one exact scope and how it resolves.

    Attributes:
        scope: the normalized scope.
        records: its events in file order.
        heads: the events no other event of the scope supersedes (one when resolved).
        state: in-force (excluded), reinstated (eligible) or conflicting (excluded).
        why: for a conflicting scope, a sentence saying why.
    """

    scope: Scope
    records: list[WithdrawalRecord] = field(default_factory=list)
    heads: list[WithdrawalRecord] = field(default_factory=list)
    state: ScopeState = "in-force"
    why: str = ""

    @property
    def excluded(self) -> bool:
        """True while the scope is kept out of every exposure."""
        return self.state != "reinstated"

    @property
    def controlling(self) -> WithdrawalRecord | None:
        """The one head, or None when the scope is conflicting."""
        return self.heads[0] if self.state != "conflicting" else None

    def successor(self, ident: str) -> str | None:
        """The id of the first event that supersedes `ident` in this scope, or None."""
        return next((r.withdrawal_id for r in self.records if r.supersedes == ident), None)


def resolve(records: Iterable[WithdrawalRecord]) -> list[Chain]:
    """Group `records` by exact scope and resolve each chain (see the module docstring)."""
    chains: dict[tuple[tuple[str, ...], ...], Chain] = {}
    for record in records:
        key = record.scope.key()
        chain = chains.get(key)
        if chain is None:
            chain = chains[key] = Chain(normalize(record.scope))
        chain.records.append(record)
    for chain in chains.values():
        _resolve(chain)
    return list(chains.values())


def _resolve(chain: Chain) -> None:
    ids = {r.withdrawal_id: r for r in chain.records}
    superseded = {r.supersedes for r in chain.records if r.supersedes is not None}
    chain.heads = [r for r in chain.records if r.withdrawal_id not in superseded]
    broken = [
        r
        for r in chain.records
        if shape_problem(r) is not None
        or (r.supersedes is not None and r.supersedes not in ids)
        or (r.supersedes is None and r.action != "withdraw")
        or (r.action == "reinstate" and r.supersedes in ids and ids[r.supersedes].action != "withdraw")
    ]
    if broken:
        chain.state = "conflicting"
        chain.why = withdrawal.chain_broken(broken[0].withdrawal_id)
        return
    if len(chain.heads) > 1:
        chosen = _reconciled(chain.heads, ids)
        if chosen is None:
            chain.state = "conflicting"
            chain.why = withdrawal.chain_forked([h.withdrawal_id for h in chain.heads])
            return
        chain.heads = [chosen]
    if not chain.heads:  # a cycle: every event supersedes another
        chain.state = "conflicting"
        chain.why = withdrawal.chain_broken(chain.records[0].withdrawal_id)
        return
    chain.state = "in-force" if chain.heads[0].action == "withdraw" else "reinstated"


def _ancestry(record: WithdrawalRecord, ids: dict[str, WithdrawalRecord]) -> list[WithdrawalRecord]:
    seen: list[WithdrawalRecord] = []
    current: WithdrawalRecord | None = record
    while current is not None and current not in seen:
        seen.append(current)
        current = ids.get(current.supersedes) if current.supersedes else None
    return seen


def _reconciled(
    heads: Sequence[WithdrawalRecord], ids: dict[str, WithdrawalRecord]
) -> WithdrawalRecord | None:
    """The one head whose chain holds an owner's reconciliation no other head's chain holds."""
    chains = {h.withdrawal_id: _ancestry(h, ids) for h in heads}
    chosen = []
    for head in heads:
        others = [r.withdrawal_id for h in heads if h is not head for r in chains[h.withdrawal_id]]
        own = [
            r
            for r in chains[head.withdrawal_id]
            if r.reason == RECONCILIATION and r.decided_by == OWNER_SESSION and r.withdrawal_id not in others
        ]
        if own:
            chosen.append(head)
    return chosen[0] if len(chosen) == 1 else None


def check(record: WithdrawalRecord, existing: Sequence[WithdrawalRecord]) -> Refusal | None:
    """Why `record` may not be appended to a log holding `existing`, or None (module docstring).

    Codes: ``refused:arguments`` (shape), ``refused:scope`` (selectors; a reinstatement's scope is not
    its withdrawal's), ``refused:reason``, ``refused:chain`` (supersedes does not name the scope's
    controlling event, or the scope is conflicting), ``refused:duplicate`` (the id is taken).
    """
    problem = shape_problem(record)
    if problem is not None:
        return problem
    ids = {r.withdrawal_id: r for r in existing}
    if record.withdrawal_id in ids:
        return withdrawal.duplicate_control(record.withdrawal_id)
    named = ids.get(record.supersedes) if record.supersedes else None
    if record.supersedes is not None and named is None:
        return withdrawal.unknown_control(record.supersedes)
    if named is not None and not same_scope(named.scope, record.scope):
        return withdrawal.other_scope(named.withdrawal_id)
    chain = next((c for c in resolve(existing) if same_scope(c.scope, record.scope)), None)
    if chain is None:
        if record.action == "reinstate":
            return withdrawal.nothing_to_reinstate()
        return None
    if chain.state == "conflicting":
        heads = [h.withdrawal_id for h in chain.heads]
        if record.reason != RECONCILIATION or record.supersedes not in heads:
            return withdrawal.conflicting(heads)
        return None
    head = chain.heads[0]
    if record.supersedes != head.withdrawal_id:
        return withdrawal.not_controlling(head.withdrawal_id, head.action)
    if record.action == "reinstate" and head.action != "withdraw":
        return withdrawal.already_eligible(head.withdrawal_id)
    return None


def next_number(records: Iterable[WithdrawalRecord], day: dt.date) -> int:
    """The ordinal the next control event of `day` gets (the day's highest plus one)."""
    prefix = f"memwd-{day.isoformat()}-"
    numbers = [int(r.withdrawal_id[len(prefix) :]) for r in records if r.withdrawal_id.startswith(prefix)]
    return max(numbers, default=0) + 1
