"""Withdrawing and reinstating, and the surface receipt (seed 003 sections 12.1 and 12.2; DESIGN 11).

Who may withdraw: the owner (``bxctl memory withdraw``, ``reinstate``; ``memory_admin``), and a session
that has not read untrusted content, on the owner's request (the `memory` tool's ``forget`` action;
a tainted session is refused with ``refused:tainted``). Each control event is one journal commit
(action ``withdraw`` or ``reinstate``, ``where: controls.jsonl``, the line carrying
``"controls": [record]``) that appends the record to controls.jsonl, so a crash completes it.

Non-admission (seed 12.2 and checklist 18): only selectors that entered Memory are recorded. A named
item that is not in the item store (or was erased), a session with no log, note, item or identity
edit in the journal, an archive
ref naming nothing archived, a record anchor past the end of its log: none of these is captured, and
when nothing named was captured the answer is ``Memory: no capture; nothing was recorded`` and no
record is made.

The answer is the surface receipt of seed 12.1, built from what memoryd knows, never the bare word
"forgotten"::

    Context / Workspace: …the current conversation still holds what it read…
    Original project / External effects: …memoryd does not see them; none were changed…
    Promoted / derived artifacts: memory.md holds 1 entry with a withdrawn item's text (…) | none known
    Memory: withdrew mem-… as memwd-…; retained and recoverable by reinstatement (…)
"""

from __future__ import annotations

import datetime as dt
import logging
import os
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from boxmaker.memoryd.files.entries import BY_NAME, IDENTITY_FILES
from boxmaker.memoryd.files.journal import Append, Change, Journal
from boxmaker.memoryd.files.store import FileUnreadable, Store
from boxmaker.memoryd.sentences import Refusal, identity, unavailable, withdrawal
from boxmaker.memoryd.withdrawal.controls import Controls
from boxmaker.memoryd.withdrawal.exclusion import from_chains, withdrawn_entries
from boxmaker.memoryd.withdrawal.records import (
    EFFECTS,
    REASONS,
    RECORD_TYPE,
    Chain,
    Scope,
    WithdrawalRecord,
    check,
    normalize,
    parse_anchor,
    same_scope,
    scope_problem,
    session_decider,
)
from boxmaker.proto.archives import archive_path, is_import_id
from boxmaker.proto.fsio import complete_lines
from boxmaker.proto.ids import OWNER_SESSION

log = logging.getLogger("boxmaker.memoryd")

CONTEXT = (
    "a conversation that already read this text still holds it; memoryd cannot erase it from a "
    "current context; no new recall, memory block or listing will show it"
)
EXTERNAL = (
    "memoryd does not see project files, commits, branches, services or workspaces; none were changed "
    "by this withdrawal"
)
NONE_KNOWN = "none known"


@dataclass(frozen=True, slots=True)
class Receipt:
    """A surface receipt (seed 12.1) and what it reports.

    Attributes:
        context, external, derived, memory: the four surfaces' sentences.
        record: the control event appended, or None (non-admission, or already in force).
        captured: the selectors that entered Memory; not_captured: those that did not.
        entries: identity entries (file, text) holding a withdrawn item's text or written by a
            withdrawn session.
    """

    context: str
    external: str
    derived: str
    memory: str
    record: WithdrawalRecord | None = None
    captured: tuple[str, ...] = ()
    not_captured: tuple[str, ...] = ()
    entries: tuple[tuple[str, str], ...] = field(default=())

    @property
    def text(self) -> str:
        """The receipt as the model or the owner reads it."""
        return (
            f"Context / Workspace: {self.context}\n"
            f"Original project / External effects: {self.external}\n"
            f"Promoted / derived artifacts: {self.derived}\n"
            f"Memory: {self.memory}"
        )

    def data(self) -> dict[str, Any]:
        """The receipt as JSON (``bxctl memory withdraw --json``)."""
        return {
            "code": "ok",
            "withdrawal": None if self.record is None else self.record.to_dict(),
            "captured": list(self.captured),
            "not_captured": list(self.not_captured),
            "surfaces": {
                "context": self.context,
                "external": self.external,
                "derived": self.derived,
                "memory": self.memory,
            },
            "derived_entries": [{"file": f, "text": t} for f, t in self.entries],
        }


@dataclass(frozen=True, slots=True)
class Reinstated:
    """A reinstatement made: the record and the sentence saying so."""

    record: WithdrawalRecord
    text: str


class Withdrawals:
    """Appends control events through the journal and answers with receipts.

    Args:
        controls: controls.jsonl and its exclusion.
        store: the identity files (for the receipt's derived artifacts).
        journal: the edit journal.
        lock: the writer's lock (every commit holds it).
        now: the clock.
        sessions: the sessions folder (what a session captured).
        on_change: called after each control event (memoryd rebuilds its index in the background).
    """

    def __init__(
        self,
        controls: Controls,
        *,
        store: Store,
        journal: Journal,
        lock: threading.Lock,
        now: Callable[[], dt.datetime],
        sessions: Path,
        on_change: Callable[[], None],
        imports: Path | None = None,
    ) -> None:
        self.imports = imports
        self.controls = controls
        self.store = store
        self.journal = journal
        self.lock = lock
        self.now = now
        self.sessions = sessions
        self.on_change = on_change

    # Appending --------------------------------------------------------------------------------------

    def append(self, record: WithdrawalRecord, session: str, call: str = "") -> dict[str, Any] | Refusal:
        """Check `record` against controls.jsonl (`records.check`) and commit it; the journal line,
        or the refusal (files unchanged). Takes the writer's lock (callers must not hold it)."""
        with self.lock:
            return self._append(record, session, call)

    def _append(self, record: WithdrawalRecord, session: str, call: str) -> dict[str, Any] | Refusal:
        refusal = check(record, self.controls.records())
        if refusal is not None:
            return refusal
        line = record.line() + b"\n"
        entry = {
            "session": session,
            "call": call,
            "untrusted": False,
            "action": record.action,
            "file": "controls.jsonl",
            "where": "controls.jsonl",
            "before": [],
            "after": [],
            "controls": [record.to_dict()],
        }
        committed = self.journal.commit(Change(entry, [Append("controls.jsonl", line)]))
        self.on_change()
        return committed

    def _record(
        self, action: str, scope: Scope, reason: str, decided_by: str, supersedes: str | None
    ) -> WithdrawalRecord:
        moment = self.now()
        return WithdrawalRecord(
            withdrawal_id=self.controls.next_id(moment.astimezone(dt.UTC).date()),
            record_type=RECORD_TYPE,
            action=action,
            scope=normalize(scope),
            reason=reason,
            decided_by=decided_by,
            decided_at=moment.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
            effect=EFFECTS[action],
            supersedes=supersedes,
        )

    # Withdraw ---------------------------------------------------------------------------------------

    def withdraw(
        self,
        scope: Scope,
        reason: str,
        *,
        session: str = OWNER_SESSION,
        call: str = "",
        supersedes: str | None = None,
    ) -> Receipt | Refusal:
        """Withdraw the captured part of `scope` and answer with the receipt.

        The owner (`session` "owner") names the prior controlling event of the same exact scope in
        `supersedes` (refused otherwise, naming it); an exact scope already withdrawn and in force is
        refused with ``refused:duplicate`` ("already withdrawn as memwd-…") when none is named. For a
        session acting on the owner's request, memoryd names it itself, and a scope already withdrawn
        is reported, not withdrawn again.

        Raises:
            OSError: a file cannot be read (nothing was recorded).
        """
        problem = scope_problem(scope)
        if problem is not None:
            return problem
        if reason not in REASONS:
            return withdrawal.bad_reason(reason)
        owner = session == OWNER_SESSION
        decided_by = OWNER_SESSION if owner else session_decider(session)
        with self.lock:
            items = self.controls.items()
            notes = self.controls.notes()
            captured, missing = self._captured(normalize(scope), items, {n.session for n in notes})
            if captured.empty():
                return self._receipt(None, captured, missing, withdrawal.no_capture(missing))
            chain = self._chain(captured)
            if owner and supersedes is None and chain is not None and chain.state == "in-force":
                head = chain.heads[0].withdrawal_id
                return identity.withdrawn_already(head)
            if not owner and chain is not None:
                if chain.excluded and chain.controlling is not None:
                    head = chain.controlling.withdrawal_id
                    return self._receipt(None, captured, missing, withdrawal.already_withdrawn(head))
                if chain.controlling is not None:
                    supersedes = chain.controlling.withdrawal_id
            record = self._record("withdraw", captured, reason, decided_by, supersedes)
            committed = self._append(record, session, call)
            if isinstance(committed, Refusal):
                return committed
            memory = withdrawal.withdrew(_describe(captured), record.withdrawal_id, reason, missing)
            return self._receipt(record, captured, missing, memory)

    def _chain(self, scope: Scope) -> Chain | None:
        return next((c for c in self.controls.chains() if same_scope(c.scope, scope)), None)

    def _captured(
        self, scope: Scope, items: Mapping[str, Any], noted: set[str]
    ) -> tuple[Scope, tuple[str, ...]]:
        """The part of `scope` that entered Memory, and the selectors that did not."""
        live = {i.id: i for i in items.values() if not i.erased}
        ids = [i for i in scope.memory_item_ids if i in live]
        archives = [
            r
            for r in scope.archive_refs
            if (self.controls.memory_dir / r.partition("#")[0]).is_file()
            or any(
                i.archive_ref is not None and (i.archive_ref == r or i.archive_ref.startswith(r + "#"))
                for i in live.values()
            )
        ]
        sources = [r for r in scope.source_or_run_refs if self._source_captured(r, live, noted)]
        captured = Scope(tuple(ids), tuple(archives), tuple(sources))
        kept = set(captured.selectors())
        return captured, tuple(s for s in scope.selectors() if s not in kept)

    def _source_captured(self, ref: str, live: dict[str, Any], noted: set[str]) -> bool:
        anchor = parse_anchor(ref)
        if anchor is None:
            if ref in noted or any(i.session == ref for i in live.values()):
                return True
            try:
                if any(name.endswith(".jsonl") for name in os.listdir(self.sessions / ref)):
                    return True
            except OSError:
                pass
            if self.imports is not None and is_import_id(ref) and archive_path(self.imports, ref).is_file():
                return True  # an import archive (issue 17)
            return any(
                e.get("session") == ref and e.get("where") in BY_NAME
                for e in self.journal.entries_newest_first()
            )
        if any(i.captured_from == ref for i in live.values()):
            return True
        session, epoch, line = anchor
        path = self.sessions / session / f"{epoch}.jsonl"
        if self.imports is not None and is_import_id(session) and epoch == 0:
            path = archive_path(self.imports, session)  # a record of an import archive (issue 17)
        try:
            data = path.read_bytes()
        except OSError:
            return False
        return len(complete_lines(data)[0]) >= line

    # Receipt ----------------------------------------------------------------------------------------

    def _receipt(
        self, record: WithdrawalRecord | None, scope: Scope, missing: Sequence[str], memory: str
    ) -> Receipt:
        entries: tuple[tuple[str, str], ...] = ()
        derived = NONE_KNOWN
        if not scope.empty():
            entries = tuple(sorted(self._derived(scope)))
            if entries:
                derived = withdrawal.derived_entries(entries)
        return Receipt(
            CONTEXT, EXTERNAL, derived, memory, record, tuple(scope.selectors()), tuple(missing), entries
        )

    def _derived(self, scope: Scope) -> set[tuple[str, str]]:
        """Identity entries holding a withdrawn item's text, or written by a withdrawn session."""
        chain = Chain(scope)
        exclusion = from_chains([chain], self.controls.items(), self.controls.notes())
        files: dict[str, Sequence[str]] = {}
        for spec in IDENTITY_FILES.values():
            try:
                files[spec.name] = self.store.read_identity(spec).entries
            except FileUnreadable:
                continue
        return withdrawn_entries(exclusion, files, self.journal.entries_newest_first())

    # Reinstate --------------------------------------------------------------------------------------

    def reinstate(self, ident: str, reason: str = "owner-decision") -> Reinstated | Refusal:
        """The owner's reinstatement of withdrawal `ident`: same exact scope, superseding it.

        Raises:
            OSError: a file cannot be read (nothing was recorded).
        """
        with self.lock:
            named = next((r for r in self.controls.records() if r.withdrawal_id == ident), None)
            if named is None:
                return withdrawal.unknown_control(ident)
            if named.action != "withdraw":
                return withdrawal.not_a_withdrawal(ident)
            record = self._record("reinstate", named.scope, reason, OWNER_SESSION, ident)
            committed = self._append(record, OWNER_SESSION, "")
            if isinstance(committed, Refusal):
                return committed
        return Reinstated(record, withdrawal.reinstated(ident, record.withdrawal_id, _describe(named.scope)))

    # Listing ----------------------------------------------------------------------------------------

    def listing(self) -> tuple[str, dict[str, Any]]:
        """Every control event with its state, grouped by scope (``bxctl memory controls``).

        ``data``: ``{"controls": [{"record", "state", "superseded_by", "scope_state", "why"}],
        "damaged_lines": [n, ...]}``; ``state`` is ``in-force`` (the scope's controlling event),
        ``reinstated`` (a withdrawal a reinstatement superseded), ``superseded`` or ``conflicting``.
        """
        loaded = self.controls.load()
        rows: list[dict[str, Any]] = []
        lines: list[str] = []
        for chain in loaded.chains:
            lines.append(f"scope: {_describe(chain.scope)} · {_scope_word(chain)}")
            if chain.why:
                lines.append(f"  needs reconciliation: {chain.why}")
            for record in chain.records:
                after = chain.successor(record.withdrawal_id)
                state = _state(chain, record, after)
                rows.append(
                    {
                        "record": record.to_dict(),
                        "state": state,
                        "superseded_by": after,
                        "scope_state": chain.state,
                        "why": chain.why or None,
                    }
                )
                was = f" supersedes {record.supersedes}" if record.supersedes else ""
                lines.append(
                    f"  {record.withdrawal_id}  {record.action:<9} {state:<11} {record.decided_at}  "
                    f"by {record.decided_by} · {record.reason}{was}"
                )
        if loaded.damaged:
            lines.append(f"{len(loaded.damaged):,} damaged line(s) of controls.jsonl skipped")
        text = "\n".join(lines) if lines else "(no withdrawals)"
        return text, {"controls": rows, "damaged_lines": list(loaded.damaged)}


def _state(chain: Chain, record: WithdrawalRecord, after: str | None) -> str:
    if chain.state == "conflicting":
        return "conflicting"
    if chain.controlling is record:
        return "in-force"
    successor = next((r for r in chain.records if r.withdrawal_id == after), None)
    if record.action == "withdraw" and successor is not None and successor.action == "reinstate":
        return "reinstated"
    return "superseded"


def _scope_word(chain: Chain) -> str:
    return {"in-force": "excluded", "reinstated": "eligible", "conflicting": "conflicting (excluded)"}[
        chain.state
    ]


def _describe(scope: Scope) -> str:
    """``items mem-…, mem-…; archive archive/…; sessions chat-…`` for a receipt or a listing."""
    parts = []
    if scope.memory_item_ids:
        parts.append(f"{_noun(len(scope.memory_item_ids), 'item')} {', '.join(scope.memory_item_ids)}")
    if scope.archive_refs:
        parts.append(f"archive {', '.join(scope.archive_refs)}")
    sessions = [r for r in scope.source_or_run_refs if parse_anchor(r) is None]
    anchors = [r for r in scope.source_or_run_refs if parse_anchor(r) is not None]
    if sessions:
        parts.append(f"{_noun(len(sessions), 'session')} {', '.join(sessions)}")
    if anchors:
        parts.append(f"{_noun(len(anchors), 'record')} {', '.join(anchors)}")
    return "; ".join(parts)


def _noun(count: int, word: str) -> str:
    return word if count == 1 else word + "s"


def withdraw(
    withdrawals: Withdrawals,
    scope: Scope,
    reason: str,
    *,
    session: str = OWNER_SESSION,
    call: str = "",
    supersedes: str | None = None,
) -> Receipt | Refusal:
    """Withdraw `scope` (`Withdrawals.withdraw`), a file that cannot be read becoming
    ``refused:unavailable`` (nothing recorded): the `memory` action ``forget`` and the owner's
    ``bxctl memory withdraw`` both come here."""
    try:
        return withdrawals.withdraw(scope, reason, session=session, call=call, supersedes=supersedes)
    except (FileUnreadable, OSError) as exc:
        log.error("withdrawal refused: %s", exc)
        return unavailable(str(exc), "nothing was recorded")
