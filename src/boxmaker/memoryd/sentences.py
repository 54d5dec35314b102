"""The fixed sentences of the `memory` and `recall` tools (M5a section 5) and their codes.

A sentence is fixed apart from the numbers, file names and ids it names; tests assert the exact text.
The model reads `output`; programs branch on `code` (DESIGN 10.3).
"""

from __future__ import annotations

from dataclasses import dataclass

# Codes of successful calls (DESIGN 10.3).
OK = "ok"
NOTED = "noted"
STAGED = "staged"


@dataclass(frozen=True, slots=True)
class Refusal:
    """A refused call: `code` is ``refused:<reason>``, `sentence` what the model reads."""

    code: str
    sentence: str


def limit(file: str, size: int, limit: int) -> Refusal:
    """DESIGN 10.6 `limit`: the file would be over its limit after the edit (M5a section 5)."""
    return Refusal(
        "refused:limit",
        f"{file} would be {size:,} of {limit:,} characters; use consolidate to move entries to notes",
    )


def note_length(size: int) -> Refusal:
    """DESIGN 10.6 `length`: a note is 1 to 1,000 characters."""
    return Refusal(
        "refused:length", f"refused (length): a note must be 1 to 1,000 characters; this one is {size:,}"
    )


def query_length(size: int) -> Refusal:
    """recall's `query` is 1 to 500 characters (M5a section 5)."""
    return Refusal(
        "refused:length",
        f"refused (length): a recall query must be 1 to 500 characters; this one is {size:,}",
    )


EMPTY = Refusal("refused:empty", "refused (empty): the entry is empty after trimming; nothing was written")


def duplicate(file: str) -> Refusal:
    """An entry identical to one already in the file."""
    return Refusal("refused:duplicate", f"{file} already holds this exact entry; nothing was written")


def not_found(file: str) -> Refusal:
    """`old` names no entry of the file as it is now."""
    return Refusal(
        "refused:not-found",
        f"no entry of {file} is exactly this old text; read the file as it is now and name the "
        "entry by its full text",
    )


def empty_old(file: str) -> Refusal:
    """`old` is empty: it never matches anything (letta PR #1616)."""
    return Refusal("refused:not-found", f"old is empty; name the entry of {file} to change by its full text")


def ambiguous(file: str, count: int) -> Refusal:
    """`old` matches more than one entry (only possible in a file edited by hand)."""
    return Refusal(
        "refused:ambiguous",
        f"old matches {count} entries of {file}; remove the duplicates with consolidate first",
    )


def tainted(file: str) -> Refusal:
    """An identity edit other than `add` from a session that has read untrusted content."""
    return Refusal(
        "refused:tainted",
        f"this session has read untrusted content; it can take notes but not change {file}",
    )


def consolidate_missing(file: str, count: int) -> Refusal:
    """consolidate left out entries of the file."""
    noun = "entry" if count == 1 else "entries"
    return Refusal(
        "refused:consolidate",
        f"consolidate must name every entry of {file} exactly once; {count} {noun} of the file "
        "as it is now are not named",
    )


def consolidate_twice(file: str) -> Refusal:
    """consolidate named an entry more often than the file holds it."""
    return Refusal(
        "refused:consolidate",
        f"consolidate names an entry of {file} more than once, or names one the file does not hold",
    )


CONSOLIDATE_SHAPE = Refusal(
    "refused:consolidate",
    "each consolidate item with old takes exactly one of keep, text, move or drop "
    "(keep, move and drop must be true); an item without old takes text only",
)


def field_refused(field: str, rule: str, sentence: str) -> Refusal:
    """A capture field (subject, scope, corroborating_refs, inspired_by) fails the write check's
    `rule`; `sentence` is the rule's own (``refused (<rule>): the text …``)."""
    _, _, why = sentence.partition("): ")
    return Refusal(f"refused:{rule}", f"refused ({rule}): in the field `{field}`, {why}")


def arguments(why: str) -> Refusal:
    """The call's arguments do not have the tool's shape; `why` names the field."""
    return Refusal("refused:arguments", f"invalid arguments: {why}")


INDEX_NOT_READY = Refusal(
    "refused:unavailable",
    "recall is unavailable while memoryd builds its index after a start; try again in a minute",
)


def index_unreadable(why: str) -> Refusal:
    """The index file cannot be read (runbook memory-index-damaged)."""
    return Refusal(
        "refused:unavailable",
        f"recall cannot read memoryd's index ({why}); the owner can rebuild it with bxctl reindex "
        "(runbook: memory-index-damaged)",
    )


def updated(file: str, size: int, limit: int) -> str:
    """An identity edit was applied."""
    return f"{file} updated ({size:,} of {limit:,} characters); the change takes effect in the next session"


def noted(ident: str, untrusted: bool) -> str:
    """A note captured as item `ident`."""
    return f"noted as {ident}" + (" (untrusted)" if untrusted else "")


def saved_as_note(ident: str) -> str:
    """A tainted session's identity add, captured as untrusted note `ident` instead."""
    return f"saved as note {ident} (untrusted): this session has read untrusted content"


def withdrawn_already(ident: str) -> Refusal:
    """The owner withdraws an exact scope whose controlling event is already a withdrawal."""
    return Refusal(
        "refused:duplicate",
        f"refused (duplicate): already withdrawn as {ident}, in force; nothing new was recorded; to "
        f"record another reason name it: --supersedes {ident}",
    )


def staged(pending_id: str, file: str) -> str:
    """Review is on: the write waits for the owner."""
    return f"waiting for the owner's review as {pending_id}; {file} is unchanged until the owner accepts it"


def no_matches(query: str) -> str:
    """recall found nothing (M5a section 5)."""
    return f'(no matches for "{query}")'


# Withdrawal (seed 003 sections 12.1 and 12.2; `controls`, `withdrawal`) -------------------------------

FORGET_TAINTED = Refusal(
    "refused:tainted",
    "this session has read untrusted content, so it cannot withdraw memory; the owner can, with "
    "bxctl memory withdraw",
)
SCOPE_EMPTY = Refusal(
    "refused:scope", "a withdrawal names at least one item, archive ref or session; nothing was recorded"
)
REINSTATE_NEEDS_SUPERSEDES = Refusal(
    "refused:chain", "a reinstatement names the withdrawal it supersedes; nothing was recorded"
)


def bad_selector(value: str, form: str) -> Refusal:
    """A scope selector without its form."""
    return Refusal("refused:scope", f"{value!r} is not a selector ({form}); nothing was recorded")


def bad_record(why: str) -> Refusal:
    """A control record without seed 12.2's shape."""
    return Refusal("refused:arguments", f"invalid withdrawal record: {why}; nothing was recorded")


def bad_reason(reason: str) -> Refusal:
    """A reason outside the closed vocabulary."""
    known = "failed-exploration, owner-decision, mistaken, poisoned, reconciliation, other"
    return Refusal("refused:reason", f"reason {reason!r} is not one of {known}; nothing was recorded")


def duplicate_control(ident: str) -> Refusal:
    """The withdrawal id is already in controls.jsonl."""
    return Refusal("refused:duplicate", f"{ident} is already in controls.jsonl; nothing was recorded")


def unknown_control(ident: str) -> Refusal:
    """supersedes (or reinstate) names no control event."""
    return Refusal(
        "refused:not-found", f"no control event {ident}; see bxctl memory controls; nothing was recorded"
    )


def other_scope(ident: str) -> Refusal:
    """A new event supersedes one of another exact scope."""
    return Refusal(
        "refused:scope",
        f"{ident} controls a different scope; a new event names exactly its scope; nothing was recorded",
    )


def nothing_to_reinstate() -> Refusal:
    """A reinstatement for a scope no withdrawal names."""
    return Refusal("refused:chain", "no withdrawal has this exact scope to reinstate; nothing was recorded")


def not_controlling(ident: str, action: str) -> Refusal:
    """A new event for a scope that does not name its controlling event."""
    verb = "withdrew" if action == "withdraw" else "reinstated"
    return Refusal(
        "refused:chain",
        f"{ident} last {verb} this exact scope; a new event must supersede {ident}; nothing was recorded",
    )


def already_eligible(ident: str) -> Refusal:
    """A reinstatement of a scope that is not withdrawn."""
    return Refusal("refused:chain", f"{ident} already reinstated this scope; nothing was recorded")


def conflicting(heads: list[str]) -> Refusal:
    """A new event for a conflicting scope other than the owner's reconciliation."""
    return Refusal(
        "refused:chain",
        f"the controls of this scope conflict ({', '.join(heads)} each claim to be the latest); it stays "
        "excluded until the owner reconciles it with --reason reconciliation --supersedes one of them; "
        "nothing was recorded",
    )


def chain_forked(heads: list[str]) -> str:
    """Why a scope is conflicting: two heads."""
    return f"{', '.join(heads)} each claim to be the latest event of this scope; it stays excluded"


def chain_broken(ident: str) -> str:
    """Why a scope is conflicting: an event outside the rules."""
    return f"{ident} does not follow the chain rules of its scope; it stays excluded"


def not_a_withdrawal(ident: str) -> Refusal:
    """reinstate names a reinstatement."""
    return Refusal("refused:chain", f"{ident} is a reinstatement, not a withdrawal; nothing was recorded")


def no_capture(missing: tuple[str, ...] | list[str]) -> str:
    """The receipt's Memory line when nothing named entered Memory (non-admission, checklist 18)."""
    named = f" ({', '.join(missing)} never entered memory)" if missing else ""
    return f"no capture; nothing was recorded{named}"


def already_withdrawn(ident: str) -> str:
    """The receipt's Memory line when the exact scope is already withdrawn."""
    return (
        f"already withdrawn as {ident}, in force; nothing new was recorded; the content is retained "
        f"and recoverable by reinstatement (bxctl memory reinstate {ident})"
    )


def withdrew(scope: str, ident: str, reason: str, missing: tuple[str, ...] | list[str]) -> str:
    """The receipt's Memory line after a withdrawal."""
    never = f"; {', '.join(missing)} never entered memory and were not recorded" if missing else ""
    return (
        f"withdrew {scope} as {ident} ({reason}): kept out of recall, the memory block, the index and "
        f"listings; the content is retained, not deleted, and recoverable by reinstatement "
        f"(bxctl memory reinstate {ident}){never}"
    )


def derived_entries(entries: tuple[tuple[str, str], ...]) -> str:
    """The receipt's derived-artifacts line: identity entries with withdrawn text."""
    files: dict[str, int] = {}
    for file, _ in entries:
        files[file] = files.get(file, 0) + 1
    held = "; ".join(f"{file} holds {n} {'entry' if n == 1 else 'entries'}" for file, n in files.items())
    return (
        f"{held} with withdrawn text or written by a withdrawn session; they stay in the file but are "
        "left out of the memory block while the withdrawal is in force; the owner removes them from "
        "the file to end their influence there (influence removal is partial until then)"
    )


def reinstated(old: str, new: str, scope: str) -> str:
    """A reinstatement was recorded."""
    return (
        f"reinstated {old} as {new}: {scope} is eligible again under its ordinary Status, Confidence "
        "and review rules; the index is being rebuilt"
    )


def controls_unreadable(why: str) -> Refusal:
    """controls.jsonl cannot be read: nothing is shown rather than something withdrawn (fail closed)."""
    return Refusal(
        "refused:unavailable",
        f"memoryd cannot read its withdrawal controls ({why}), so it shows nothing rather than "
        "something withdrawn; the owner can check memory/controls.jsonl",
    )


# The protocol's capture and item store (seed 003 sections 4, 9, 12, 14.2; issue 6) -----------------

STATE_WITHOUT_SUBJECT = Refusal(
    "refused:subject",
    "refused (subject): a state item needs a subject naming what it is the current value of "
    "(e.g. host:public-ip); name the subject, or record it as knowledge; nothing was written",
)


def item_not_found(ident: str) -> Refusal:
    """An item id names no item of the store (or an erased one)."""
    return Refusal("refused:not-found", f"no item {ident}; see bxctl memory items")


def item_id_invalid(value: str) -> Refusal:
    """A value that is not an item id (``mem-YYYY-MM-DD-NNN``)."""
    return Refusal("refused:arguments", f"{value[:40]!r} is not an item id (mem-YYYY-MM-DD-NNN)")


SUPERSEDE_ITSELF = Refusal("refused:arguments", "an item cannot supersede itself; nothing was changed")


def supersede_kind(old: str, new: str) -> Refusal:
    """Supersede across kinds, or of knowledge (seed 003 section 14.2, constraint 3)."""
    return Refusal(
        "refused:kind",
        f"only a state item supersedes a state item; {old} or {new} is knowledge, which is never "
        "superseded; nothing was changed",
    )


def supersede_subject(old: str, new: str) -> Refusal:
    """Subjects that are not equal as strings (seed 003 section 14.2, constraint 4)."""
    return Refusal(
        "refused:subject",
        f"{old} and {new} do not have exactly the same subject; supersede matches subjects as "
        "equal strings only; nothing was changed",
    )


def supersede_status(ident: str, status: str) -> Refusal:
    """One of the two items is not active."""
    return Refusal(
        "refused:status",
        f"{ident} is {status}, not active; only an active item supersedes or is superseded; "
        "nothing was changed",
    )


def supersede_order(old: str, new: str) -> Refusal:
    """The newer value was captured before the one it would replace."""
    return Refusal(
        "refused:order",
        f"{new} was captured before {old}; an older value cannot supersede a newer one; nothing was changed",
    )


def supersede_tainted(old: str, new: str) -> Refusal:
    """An untrusted item (or caller) over a trusted one (seed 003 section 14.2; DESIGN 8)."""
    return Refusal(
        "refused:tainted",
        f"{new} is untrusted and {old} is trusted; an untrusted value never supersedes a trusted "
        "one; nothing was changed",
    )


def status_invalid(status: str) -> Refusal:
    """A status other than the three a status change sets."""
    return Refusal(
        "refused:arguments",
        f"{status[:40]!r} is not a status to set; use active, stale or pending-cleanup "
        "(superseded is set only by supersede)",
    )


def status_of_history(ident: str) -> Refusal:
    """A superseded item's status is not changed."""
    return Refusal(
        "refused:status",
        f"{ident} is superseded: a superseded item is history and keeps its status; nothing was changed",
    )


def status_same(ident: str, status: str) -> Refusal:
    """The item already has the status."""
    return Refusal("refused:status", f"{ident} is already {status}; nothing was changed")


def status_denied(status: str) -> Refusal:
    """A status only the owner sets (seed 003 section 9: automation never sets stale)."""
    return Refusal(
        "refused:denied",
        f"only the owner sets {status}; automation marks pending-cleanup at most; nothing was changed",
    )


def superseded(old: str, new: str, subject: str) -> str:
    """A supersede was recorded."""
    return f"{old} is superseded by {new} (subject {subject}); {old} stays as history"


def status_set(ident: str, prior: str, status: str) -> str:
    """A status change was recorded."""
    return f"{ident} is now {status} (was {prior})"


# Archive, projections, export/import, replay (seed 003 sections 10-13, 12.2) -----------------


def unknown_topic(topic: str, known: list[str]) -> Refusal:
    """The `memory` tool's `topic` action named no topic page."""
    listed = ", ".join(known) if known else "none yet"
    return Refusal(
        "refused:not-found",
        f"no topic {topic!r}; the topics are: {listed} (the memory action index shows what each is for)",
    )


def export_exists(path: str) -> Refusal:
    """`bxctl memory export FILE` names a file that exists."""
    return Refusal("refused:exists", f"{path} already exists; export writes only a new file, never over one")


def replay_not_empty(path: str) -> Refusal:
    """`bxctl memory replay --into DIR` names a folder that is not empty (or not a folder)."""
    return Refusal(
        "refused:exists", f"{path} is not an empty folder; replay writes only into a new or empty folder"
    )


def unwritable(path: str, why: str) -> Refusal:
    """An export or a replay cannot write its target."""
    return Refusal("refused:unavailable", f"{path} cannot be written ({why}); nothing was written")


# Erasure (seed 003 section 12.3; docs/runbook.md `erasure`) ----------------------------------------

ERASE_NO_SCOPE = Refusal(
    "refused:scope",
    "refused (scope): name at least one item (--item mem-…) or session (--session ID) to erase; "
    "nothing was changed",
)
ERASE_AUTHORITY = Refusal(
    "refused:authority",
    "refused (authority): the authority reference must be 1 to 80 characters of A-Z, a-z, 0-9 and "
    "'._:/-' (a ticket or request id, not a sentence); nothing was changed",
)


def erase_unknown_item(item: str) -> Refusal:
    """An `--item` that the item store does not hold."""
    return Refusal(
        "refused:not-found",
        f"refused (not-found): there is no item {item} (see bxctl memory items); nothing was changed",
    )


def erase_already_erased(what: str, ref: str, erasure_id: str, open_holders: list[str]) -> Refusal:
    """An `--item` (or a `--session` whose files are gone) that an earlier erasure already erased: its
    text is not kept, so a new run could not search for its copies and must not claim `completed`."""
    rest = (
        f"holders of {erasure_id} that were not completed: {'; '.join(open_holders)}"
        if open_holders
        else f"every holder of {erasure_id} was completed"
    )
    return Refusal(
        "refused:erased",
        f"refused (erased): {what} {ref} was erased by {erasure_id} and its text is no longer known, "
        f"so its copies cannot be searched for ({rest}); nothing was changed",
    )


def erase_nothing_held(session: str) -> Refusal:
    """A `--session` that no role holds anything of (no folder, items, notes, journal or audit lines)."""
    return Refusal(
        "refused:not-found", f"refused (not-found): nothing of {session} is held; nothing was erased"
    )


ERASE_ID_TAKEN = Refusal(
    "refused:erasure-id",
    "refused (erasure-id): the erasure id is not one memoryd handed out for this erasure; run "
    "bxctl memory erase again",
)


# Promotion (seed 003 sections 17 and 23.5; `proposals`) ----------------------------------------------

NO_SUPPORT = Refusal(
    "refused:refs",
    "refused (refs): a proposal cites at least one supporting reference (an item id mem-…, an "
    "archive anchor archive/YYYY-MM-DD.md, a feedback id memfb-… or a retrieval id memret-…); "
    "nothing was written",
)


def bad_ref(ref: str, why: str) -> Refusal:
    """A supporting reference that has no known form, or names nothing the store holds."""
    return Refusal("refused:refs", f"refused (refs): {ref[:80]!r} {why}; nothing was written")


def ref_not_found(ref: str) -> Refusal:
    """A feedback or retrieval id that feedback.jsonl or the recall log does not hold."""
    return Refusal(
        "refused:not-found",
        f"refused (not-found): {ref[:80]!r} names no recorded feedback or retrieval; nothing was written",
    )


def bad_target(target: str) -> Refusal:
    """A proposal's target that is neither ``conventions`` nor ``<element>:<name>``."""
    return Refusal(
        "refused:arguments",
        f"refused (arguments): target {target[:60]!r} must be conventions or a memory-policy element "
        "such as retrieval-trigger:environment-state (one line); nothing was written",
    )


def proposal_field(name: str, rule: str, sentence: str) -> Refusal:
    """A proposal's text field that fails the write check (the field named, the rule's sentence)."""
    return Refusal(f"refused:{rule}", f"refused ({rule}) in {name}: {sentence}")


def proposal_duplicate(ident: str) -> Refusal:
    """The same change to the same target is already waiting for review."""
    return Refusal(
        "refused:duplicate",
        f"{ident} already proposes this exact change and waits for review; nothing was written",
    )


def proposed(ident: str, refs: int, independent: int) -> str:
    """A filed proposal (the model reads this): pending review, eligible at most, never authorised."""
    eligible = "eligible for review" if independent >= 2 else "not yet eligible (it needs 2 independent refs)"
    return (
        f"proposed {ident} (status pending-review; {refs} refs, {independent} independent: {eligible}). "
        "Only the owner's accept writes it; tell the owner it waits in bxctl memory proposals"
    )


def proposal_not_found(ident: str) -> Refusal:
    """An id that names no proposal."""
    return Refusal("refused:not-found", f"no proposal {ident[:60]}; see bxctl memory proposals --all")


def proposal_untrusted(ident: str, session: str) -> Refusal:
    """Accepting a proposal filed by a tainted session, without the owner's explicit consent."""
    return Refusal(
        "refused:untrusted",
        f"refused (untrusted): {ident} came from session {session[:60]}, which had read untrusted "
        "content; read it with bxctl memory proposals, then accept it with --untrusted-ok; "
        "nothing was changed",
    )


def proposal_decided(ident: str, status: str) -> Refusal:
    """A proposal already accepted or rejected."""
    return Refusal("refused:decided", f"{ident} was already {status}; nothing was changed")


def conventions_limit(name: str, size: int, limit: int) -> Refusal:
    """Accepting would put conventions.md (or soul.md with it) over its limit."""
    return Refusal(
        "refused:limit",
        f"refused (limit): {name} would be {size:,} of {limit:,} characters; shorten conventions.md or "
        "soul.md by hand, then accept again; nothing was written",
    )


def accepted_proposal(ident: str, edit: str, size: int, limit: int) -> str:
    """The owner accepted a proposal: its rule is in conventions.md."""
    return (
        f"accepted {ident} as {edit}: its rule is in conventions.md ({size:,} of {limit:,} characters); "
        "new sessions load it"
    )


def rejected_proposal(ident: str, edit: str) -> str:
    """The owner rejected a proposal."""
    return f"rejected {ident} as {edit}; conventions.md is unchanged"


# Skeptical recall, review and metamemory (seed 003 sections 15.2, 16 and 23; issue 7) -----------------


def retrieval_not_found(ident: str, owner: bool = False) -> Refusal:
    """Feedback names a retrieval the recall log does not hold (or, from a session, one of another
    session)."""
    whose = "" if owner else " of this session"
    return Refusal(
        "refused:not-found",
        f"no retrieval {ident[:40]!r}{whose}; feedback names the retrieval id a recall answer "
        "showed (memret-YYYY-MM-DD-NNN); nothing was recorded",
    )


def feedback_item(item: str, retrieval: str) -> Refusal:
    """Feedback names an item its retrieval did not show."""
    return Refusal(
        "refused:arguments",
        f"{item[:40]!r} is not an item {retrieval} showed; feedback names only items of its retrieval; "
        "nothing was recorded",
    )


def feedback_no_items(retrieval: str) -> Refusal:
    """Feedback on a retrieval that showed no item."""
    return Refusal(
        "refused:arguments",
        f"{retrieval} showed no memory item, so there is nothing to attribute; nothing was recorded",
    )


def feedback_value(name: str, value: str, allowed: tuple[str, ...]) -> Refusal:
    """A value outside a closed set (role, verdict, attribution)."""
    return Refusal(
        "refused:arguments",
        f"`{name}` is one of {', '.join(allowed)}, not {value[:40]!r}; nothing was recorded",
    )


def feedback_length(name: str, limit: int, size: int) -> Refusal:
    """A feedback text outside 1..limit characters (no transcript is stored: checklist 16)."""
    return Refusal(
        "refused:length",
        f"refused (length): `{name}` must be 1 to {limit:,} characters (it is {size:,}); feedback keeps "
        "a short statement, never a transcript; nothing was recorded",
    )


def feedback_recorded(ident: str, items: list[str], verdict: str) -> str:
    """Feedback was recorded."""
    return (
        f"recorded {ident}: {verdict} for {', '.join(items)}; it raises or lowers review priority only, "
        "the items are unchanged"
    )


def reconcile_nothing(subject: str, count: int) -> Refusal:
    """`reconcile` on a subject without a conflict."""
    return Refusal(
        "refused:status",
        f"subject {subject[:80]!r} has {count} active state item{'' if count == 1 else 's'}; there is "
        "nothing to reconcile; nothing was changed",
    )


def reconcile_keep(ident: str, subject: str) -> Refusal:
    """`reconcile --keep` names an item that is not an active state item of the subject."""
    return Refusal(
        "refused:subject",
        f"{ident} is not an active state item of subject {subject[:80]!r}; keep one of the items "
        "bxctl memory items --subject shows as active; nothing was changed",
    )


def reconciled(subject: str, keep: str, others: list[str]) -> str:
    """A reconcile was recorded."""
    return (
        f"reconciled {subject}: {keep} is the current value; {', '.join(others)} "
        f"{'is' if len(others) == 1 else 'are'} superseded by it and stay as history"
    )


RECONCILE_DENIED = Refusal(
    "refused:denied", "only the owner reconciles a conflict (bxctl memory reconcile); nothing was changed"
)
# Autodream's maintenance actions (seed 003 section 14; `dream`) ---------------------------------------


def maintenance_only(action: str) -> Refusal:
    """A maintenance action from a session that is not a run of a maintenance job."""
    return Refusal(
        "refused:maintenance",
        f"refused (maintenance): {action} is a maintenance action, offered only to a run of a job whose "
        "job file says maintenance = true; nothing was changed",
    )


def maintenance_identity(action: str) -> Refusal:
    """An identity write (or a withdrawal) from a maintenance run (seed 003 section 14.1)."""
    return Refusal(
        "refused:maintenance",
        f"refused (maintenance): a maintenance run never writes memory.md, user.md or conventions, and "
        f"{action} is not one of its actions; write a note instead; nothing was changed",
    )


def item_withdrawn(ident: str) -> Refusal:
    """A maintenance action naming a withdrawn item (seed 003 section 12.2)."""
    return Refusal(
        "refused:withdrawn",
        f"refused (withdrawn): {ident} is withdrawn; it is left out of every pass and is not changed; "
        "nothing was changed",
    )


def item_tainted(ident: str) -> Refusal:
    """A tainted pass naming a trusted item (seed 003 section 14; DESIGN 11)."""
    return Refusal(
        "refused:tainted",
        f"refused (tainted): this session has read untrusted content and {ident} is trusted; a tainted "
        "pass never changes a trusted item; write a note instead; nothing was changed",
    )


def knowledge_only(ident: str, kind: str, what: str) -> Refusal:
    """`cool` or `merge` naming an item that is not knowledge."""
    return Refusal(
        "refused:kind",
        f"refused (kind): {what} takes knowledge items only and {ident} is {kind}; nothing was changed",
    )


def cooled_already(ident: str, cooled: bool) -> Refusal:
    """`cool` of a cooled item, or `warm` of one that is not cooled."""
    state = "already cooled" if cooled else "not cooled"
    return Refusal("refused:status", f"refused (status): {ident} is {state}; nothing was changed")


def merged_already(ident: str, into: str) -> Refusal:
    """An item already folded into a merged one."""
    return Refusal(
        "refused:status",
        f"refused (status): {ident} was already merged into {into}; it is history; nothing was changed",
    )


def merge_history(ident: str, status: str) -> Refusal:
    """A merge member that is superseded or stale."""
    return Refusal(
        "refused:status",
        f"refused (status): {ident} is {status}; only active or pending-cleanup knowledge is merged; "
        "nothing was changed",
    )


MERGE_MEMBERS = Refusal(
    "refused:arguments",
    "refused (arguments): merge takes `ids`, two to twenty different item ids, and `text`, the "
    "consolidated lesson; nothing was changed",
)


def mark_status(status: str) -> Refusal:
    """`mark` with a status other than pending-cleanup (stale is the owner's: `status_denied`)."""
    return Refusal(
        "refused:arguments",
        f"refused (arguments): mark sets pending-cleanup only, not {status[:40]!r}; nothing was changed",
    )


def topic_invalid(topic: str) -> Refusal:
    """`assign` with a topic that has no letters or digits."""
    return Refusal(
        "refused:arguments",
        f"refused (arguments): {topic[:40]!r} is not a topic name (letters, digits and '-'); nothing was "
        "changed",
    )


def cooled(ident: str) -> str:
    """A cool was recorded."""
    return f"{ident} is cooled: it moves to its topic's Historical lessons; nothing is deleted"


def warmed(ident: str) -> str:
    """A warm was recorded."""
    return f"{ident} is warm again: back under its topic's Facts and lessons"


def merged(members: list[str], ident: str) -> str:
    """A merge was recorded."""
    return (
        f"merged {', '.join(members)} into {ident}; its Source names every member's and its date is the "
        "newest member's; the members stay as history"
    )


def assigned(ident: str, topic: str, triggers: list[str]) -> str:
    """An assign was recorded."""
    more = f" with triggers {', '.join(triggers)}" if triggers else ""
    return f"{ident} is assigned to topics/{topic}.md{more}"


def dream_staged(action: str, session: str) -> str:
    """A maintenance action staged for the owner (``[dream] stage = true``)."""
    return (
        f"staged, not applied: {action} waits for the owner in memory/dream/{session}.jsonl "
        f"(bxctl memory dream show {session})"
    )


def dream_nothing(why: str) -> str:
    """`dream-input` with nothing eligible (journalled as autodream-skip)."""
    return f"nothing to distil: {why}; this pass is over (journalled as autodream-skip)"


DREAM_DATE = Refusal(
    "refused:arguments", "refused (arguments): `date` must be a day, YYYY-MM-DD; nothing was read"
)


def dream_unknown(session: str) -> Refusal:
    """`bxctl memory dream apply/discard/show` naming a pass with nothing staged."""
    return Refusal(
        "refused:not-found",
        f"refused (not-found): no staged pass {session[:80]} waits (see bxctl memory dream show); "
        "nothing was "
        "changed",
    )


def dream_closed(session: str, how: str) -> Refusal:
    """A staged pass already applied or discarded."""
    return Refusal(
        "refused:not-found",
        f"refused (not-found): the staged pass {session} was already {how}; nothing was changed",
    )
