"""Revert any edit: ``bxctl memory revert EDIT`` (issue 19; `write.revert`)."""

from __future__ import annotations

from boxmaker.memoryd.sentences import Code, Refusal


def not_revertable(edit: str, where: str) -> Refusal:
    """The edit changed a file revert does not restore (notes.md is append-only)."""
    return Refusal(
        Code.NOT_UNDOABLE,
        f"{edit} changed {where}, which is not reverted this way (only edits of memory.md, user.md and "
        "conventions.md are; notes.md is append-only)",
    )


def repair_not_revertable(edit: str) -> Refusal:
    """The edit is a ``bxctl memory repair``, which put back what earlier edits left."""
    return Refusal(
        Code.NOT_UNDOABLE,
        f"{edit} is a repair, which put back what the journal's earlier edits left; revert those instead",
    )


def line_damaged(edit: str) -> Refusal:
    """The journal line of the edit to revert lacks its before or after."""
    return Refusal(Code.DAMAGED, f"the journal line of {edit} is damaged; nothing was reverted")


def conflict(edit: str, later: str, file: str) -> Refusal:
    """A later edit changed an entry the edit to revert wrote or took out (the per-entry check)."""
    return Refusal(
        Code.CONFLICT,
        f"{later} changed an entry of {file} that {edit} wrote or took out; revert {later} first, "
        f"or edit {file} by hand; nothing was reverted",
    )


def already_reverted(edit: str, later: str) -> Refusal:
    """The later edit that changed the entries is a revert (or an undo) of this very edit."""
    return Refusal(
        Code.CONFLICT,
        f"{edit} was already taken back by {later}; revert {later} to bring it back; nothing was reverted",
    )


def changed_by_hand(edit: str, file: str) -> Refusal:
    """An entry the edit wrote is gone and no journalled edit took it out."""
    return Refusal(
        Code.CHANGED,
        f"an entry of {file} that {edit} wrote is no longer there and no journalled edit took it out "
        f"(it was changed by hand); edit {file} by hand; nothing was reverted",
    )


def restored_duplicate(edit: str, file: str) -> Refusal:
    """An entry the edit took out is in the file again (typed by hand): putting it back would make a
    duplicate."""
    return Refusal(
        Code.DUPLICATE,
        f"{file} already holds an entry that {edit} took out; putting it back would make a duplicate; "
        "nothing was reverted",
    )


def nothing_to_revert(edit: str, file: str) -> Refusal:
    """Reverting the edit would leave the file as it is."""
    return Refusal(Code.NOT_UNDOABLE, f"reverting {edit} would leave {file} as it is; nothing was reverted")


def erased(edit: str, erasure: str) -> Refusal:
    """The edit wrote or took out text an authorised erasure erased: it cannot come back."""
    return Refusal(
        Code.ERASED,
        f"{edit} touched text that erasure {erasure} erased; erased text never comes back; nothing was "
        "reverted",
    )


def withdrawn(edit: str, file: str) -> Refusal:
    """An entry the revert would put back is withdrawn (its text is a withdrawn item's, or a withdrawn
    session wrote it)."""
    return Refusal(
        Code.WITHDRAWN,
        f"reverting {edit} would put back an entry of {file} that is withdrawn; reinstate it first "
        "(bxctl memory controls), or edit by hand; nothing was reverted",
    )


def revert_confirm_needed(edit: str, origin: str) -> Refusal:
    """The revert puts back text whose origin is untrusted or above private: it needs ``--yes``."""
    return Refusal(
        Code.CONFIRM,
        f"reverting {edit} puts text from {origin} back into every session's prompt; nothing was "
        "changed; to revert it, run again with --yes",
    )


def not_reverted(edit: str, code: str, sentence: str) -> Refusal:
    """A rule (the limit, the write check) refused what the revert would put back: the rule's `code` and
    `sentence`, after the edit's id."""
    return Refusal(code, f"{edit} was not reverted: {sentence}")


def revert_over_limit(name: str, size: int, limit: int) -> Refusal:
    """What would come back puts conventions.md (or soul.md with it) over its limit."""
    return Refusal(
        Code.LIMIT,
        f"refused (limit): {name} would be {size:,} of {limit:,} characters; shorten conventions.md or "
        "soul.md by hand first",
    )


def reverted(edit: str, new: str, applied: str) -> str:
    """A revert was applied as edit `new` (`applied`: the `identity.updated` sentence)."""
    return f"reverted {edit} as {new}: {applied}"
