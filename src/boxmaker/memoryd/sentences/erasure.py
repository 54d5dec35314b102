"""Erasure (seed 003 section 12.3; docs/runbook.md `erasure`)."""

from __future__ import annotations

from boxmaker.memoryd.sentences import Code, Refusal

ERASE_NO_SCOPE = Refusal(
    Code.SCOPE,
    "refused (scope): name at least one item (--item mem-…) or session (--session ID) to erase; "
    "nothing was changed",
)
ERASE_AUTHORITY = Refusal(
    Code.AUTHORITY,
    "refused (authority): the authority reference must be 1 to 80 characters of A-Z, a-z, 0-9 and "
    "'._:/-' (a ticket or request id, not a sentence); nothing was changed",
)


def erase_unknown_item(item: str) -> Refusal:
    """An `--item` that the item store does not hold."""
    return Refusal(
        Code.NOT_FOUND,
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
        Code.ERASED,
        f"refused (erased): {what} {ref} was erased by {erasure_id} and its text is no longer known, "
        f"so its copies cannot be searched for ({rest}); nothing was changed",
    )


def erase_nothing_held(session: str) -> Refusal:
    """A `--session` that no role holds anything of (no folder, items, notes, journal or audit lines)."""
    return Refusal(Code.NOT_FOUND, f"refused (not-found): nothing of {session} is held; nothing was erased")


ERASE_ID_TAKEN = Refusal(
    Code.ERASURE_ID,
    "refused (erasure-id): the erasure id is not one memoryd handed out for this erasure; run "
    "bxctl memory erase again",
)
