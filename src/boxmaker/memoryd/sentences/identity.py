"""The identity and note writes of `memory`, and `recall`'s own sentences (M5a section 5)."""

from __future__ import annotations

from boxmaker.memoryd.sentences import Code, Refusal


def limit(file: str, size: int, limit: int) -> Refusal:
    """DESIGN 10.6 `limit`: the file would be over its limit after the edit (M5a section 5)."""
    return Refusal(
        Code.LIMIT,
        f"{file} would be {size:,} of {limit:,} characters; use consolidate to move entries to notes",
    )


def note_length(size: int) -> Refusal:
    """DESIGN 10.6 `length`: a note is 1 to 1,000 characters."""
    return Refusal(
        Code.LENGTH, f"refused (length): a note must be 1 to 1,000 characters; this one is {size:,}"
    )


def query_length(size: int) -> Refusal:
    """recall's `query` is 1 to 500 characters (M5a section 5)."""
    return Refusal(
        Code.LENGTH,
        f"refused (length): a recall query must be 1 to 500 characters; this one is {size:,}",
    )


EMPTY = Refusal(Code.EMPTY, "refused (empty): the entry is empty after trimming; nothing was written")


def duplicate(file: str) -> Refusal:
    """An entry identical to one already in the file."""
    return Refusal(Code.DUPLICATE, f"{file} already holds this exact entry; nothing was written")


def not_found(file: str) -> Refusal:
    """`old` names no entry of the file as it is now."""
    return Refusal(
        Code.NOT_FOUND,
        f"no entry of {file} is exactly this old text; read the file as it is now and name the "
        "entry by its full text",
    )


def empty_old(file: str) -> Refusal:
    """`old` is empty: it never matches anything (letta PR #1616)."""
    return Refusal(Code.NOT_FOUND, f"old is empty; name the entry of {file} to change by its full text")


def ambiguous(file: str, count: int) -> Refusal:
    """`old` matches more than one entry (only possible in a file edited by hand)."""
    return Refusal(
        Code.AMBIGUOUS,
        f"old matches {count} entries of {file}; remove the duplicates with consolidate first",
    )


def tainted(file: str) -> Refusal:
    """An identity edit other than `add` from a session that has read untrusted content."""
    return Refusal(
        Code.TAINTED,
        f"this session has read untrusted content; it can take notes but not change {file}",
    )


def above_private(file: str, data_class: str) -> Refusal:
    """An identity edit other than `add` from a trusted session above private (the identity-write
    rule, `write.origin`): in the shape of `tainted`."""
    return Refusal(
        Code.CLASS,
        f"this session has read {data_class} data; it can take notes but not change {file}",
    )


def held_back(file: str, origin: str) -> Refusal:
    """An identity edit other than `add` from an origin the owner has not trusted with identity (an
    MCP client, an import; `write.origin`)."""
    return Refusal(
        Code.ORIGIN, f"{origin} cannot change {file}; it can take notes, and an add waits for the owner"
    )


def consolidate_missing(file: str, count: int) -> Refusal:
    """consolidate left out entries of the file."""
    noun = "entry" if count == 1 else "entries"
    return Refusal(
        Code.CONSOLIDATE,
        f"consolidate must name every entry of {file} exactly once; {count} {noun} of the file "
        "as it is now are not named",
    )


def consolidate_twice(file: str) -> Refusal:
    """consolidate named an entry more often than the file holds it."""
    return Refusal(
        Code.CONSOLIDATE,
        f"consolidate names an entry of {file} more than once, or names one the file does not hold",
    )


CONSOLIDATE_SHAPE = Refusal(
    Code.CONSOLIDATE,
    "each consolidate item with old takes exactly one of keep, text, move or drop "
    "(keep, move and drop must be true); an item without old takes text only",
)


def field_refused(field: str, rule: str, sentence: str) -> Refusal:
    """A capture field (subject, scope, corroborating_refs, inspired_by) fails the write check's
    `rule`; `sentence` is the rule's own (``refused (<rule>): the text …``)."""
    _, _, why = sentence.partition("): ")
    return Refusal(f"refused:{rule}", f"refused ({rule}): in the field `{field}`, {why}")


def surrogate_name(where: str) -> Refusal:
    """The name of an argument holds a lone surrogate code point (DESIGN 10.6 rule 1 on the call's
    names); `where` is the path of the object holding it ("" for the arguments themselves)."""
    inside = f" in `{where}`" if where else ""
    return Refusal(
        "refused:surrogate",
        f"refused (surrogate): the name of an argument{inside} contains a lone surrogate code point, "
        "which is not a character; nothing was written",
    )


def arguments(why: str) -> Refusal:
    """The call's arguments do not have the tool's shape; `why` names the field."""
    return Refusal(Code.ARGUMENTS, f"invalid arguments: {why}")


INDEX_NOT_READY = Refusal(
    Code.UNAVAILABLE,
    "recall is unavailable while memoryd builds its index after a start; try again in a minute",
)


def index_unreadable(why: str) -> Refusal:
    """The index file cannot be read (runbook memory-index-damaged)."""
    return Refusal(
        Code.UNAVAILABLE,
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


def saved_as_note_class(ident: str, data_class: str) -> str:
    """A trusted session's identity add above private, captured as note `ident` (labelled with its
    class) and staged for the owner instead."""
    return f"saved as note {ident} ({data_class}): this session has read {data_class} data"


def held_as_note(ident: str, origin: str) -> str:
    """An identity add from an origin the owner has not trusted with identity, captured as note `ident`
    and staged for the owner instead."""
    return f"saved as note {ident}: {origin} cannot change identity; the add waits for the owner"


def withdrawn_already(ident: str) -> Refusal:
    """The owner withdraws an exact scope whose controlling event is already a withdrawal."""
    return Refusal(
        Code.DUPLICATE,
        f"refused (duplicate): already withdrawn as {ident}, in force; nothing new was recorded; to "
        f"record another reason name it: --supersedes {ident}",
    )


def staged(pending_id: str, file: str) -> str:
    """Review is on: the write waits for the owner."""
    return f"waiting for the owner's review as {pending_id}; {file} is unchanged until the owner accepts it"


def no_matches(query: str) -> str:
    """recall found nothing (M5a section 5)."""
    return f'(no matches for "{query}")'


def items_unreadable(why: str) -> Refusal:
    """recall found item hits but items.jsonl or the controls cannot be read."""
    return Refusal(Code.UNAVAILABLE, f"recall cannot read the item store ({why}); nothing was shown")


# Undo and review of staged writes (M5a sections 5 and 10; DESIGN 6) -------------------------------


NOTHING_TO_UNDO = Refusal(Code.NOT_FOUND, "no edit of memory.md or user.md to undo")


def no_edit(edit: str) -> Refusal:
    """`bxctl memory undo EDIT` names an edit the journal does not hold."""
    return Refusal(Code.NOT_FOUND, f"no edit {edit} in the journal")


def repair_not_undoable(edit: str) -> Refusal:
    """The edit is a ``bxctl memory repair``, which put back what earlier edits left (undo those)."""
    return Refusal(
        Code.NOT_UNDOABLE,
        f"{edit} is a repair, which put back what the journal's earlier edits left; undo those instead",
    )


def not_undoable(edit: str, where: str) -> Refusal:
    """The edit changed a file undo does not restore (notes.md is append-only)."""
    return Refusal(
        Code.NOT_UNDOABLE,
        f"{edit} changed {where}, which is not undone this way (notes.md is append-only; edit it by hand)",
    )


def journal_line_damaged(edit: str) -> Refusal:
    """The journal line of the edit to undo lacks its before or after."""
    return Refusal(Code.DAMAGED, f"the journal line of {edit} is damaged; nothing was undone")


def not_latest(edit: str, where: str, latest: str) -> Refusal:
    """Undo takes only the latest edit of a file (DESIGN 6)."""
    return Refusal(
        Code.NOT_LATEST, f"{edit} is not the latest edit of {where} ({latest} is); undo that one first"
    )


def changed_since(file: str, edit: str) -> Refusal:
    """The file no longer holds exactly what the edit to undo left."""
    return Refusal(
        Code.CHANGED,
        f"{file} no longer holds exactly what {edit} left (it was changed since, by hand); "
        "nothing was undone",
    )


def undone(edit: str, new: str, file: str) -> str:
    """An undo was applied as edit `new`."""
    return f"undid {edit} as {new}; {file} is back to what it held before"


def not_pending(pending_id: str, state: str) -> Refusal:
    """accept or reject names a staged write that is unknown, or already accepted or rejected."""
    if state == "unknown":
        return Refusal(Code.NOT_FOUND, f"no staged write {pending_id}; see bxctl memory pending")
    return Refusal(Code.NOT_FOUND, f"{pending_id} was already {state}")


def staged_damaged(pending_id: str, why: str) -> Refusal:
    """A line of pending.jsonl cannot be read back as a staged write."""
    return Refusal(
        Code.DAMAGED, f"{pending_id} is damaged in pending.jsonl ({why}); reject it and write again"
    )


def staged_note(pending_id: str) -> Refusal:
    """A line of pending.jsonl holds a note, which is never staged."""
    return Refusal(Code.DAMAGED, f"{pending_id} is damaged in pending.jsonl (a note is never staged)")


def accepted(pending_id: str, edit: str, applied: str) -> str:
    """A staged write was accepted and applied as `edit` (`applied`: the `updated` sentence)."""
    return f"{pending_id} accepted as {edit}: {applied}"


def accepted_from(pending_id: str, edit: str, origin: str, applied: str) -> str:
    """A staged write held back by the identity-write rule was accepted by the owner as `edit`;
    `origin` names where it came from and its label."""
    return f"{pending_id} accepted as {edit} (from {origin}): {applied}"


def confirm_needed(pending_id: str, origin: str) -> Refusal:
    """Accepting a staged write whose origin is untrusted or above private needs ``--yes``."""
    return Refusal(
        Code.CONFIRM,
        f"{pending_id} comes from {origin}; accepting it puts its text into every session's prompt; "
        "nothing was changed; to accept it, run again with --yes",
    )


def not_applied(pending_id: str, sentence: str) -> str:
    """Accepting a staged write was refused by a rule; `sentence` is the rule's."""
    return f"{pending_id} was not applied: {sentence}"


def rejected(pending_id: str, file: str) -> str:
    """A staged write was rejected."""
    return f"{pending_id} rejected; {file} is unchanged"
