"""Capture and the item store: kinds, subjects, supersede, status (seed 003 sections 9, 14.2)."""

from __future__ import annotations

from boxmaker.memoryd.sentences import Code, Refusal

STATE_WITHOUT_SUBJECT = Refusal(
    Code.SUBJECT,
    "refused (subject): a state item needs a subject naming what it is the current value of "
    "(e.g. host:public-ip); name the subject, or record it as knowledge; nothing was written",
)


def item_not_found(ident: str) -> Refusal:
    """An item id names no item of the store (or an erased one)."""
    return Refusal(Code.NOT_FOUND, f"no item {ident}; see bxctl memory items")


def item_id_invalid(value: str) -> Refusal:
    """A value that is not an item id (``mem-YYYY-MM-DD-NNN``)."""
    return Refusal(Code.ARGUMENTS, f"{value[:40]!r} is not an item id (mem-YYYY-MM-DD-NNN)")


SUPERSEDE_ITSELF = Refusal(Code.ARGUMENTS, "an item cannot supersede itself; nothing was changed")


def supersede_kind(old: str, new: str) -> Refusal:
    """Supersede across kinds, or of knowledge (seed 003 section 14.2, constraint 3)."""
    return Refusal(
        Code.KIND,
        f"only a state item supersedes a state item; {old} or {new} is knowledge, which is never "
        "superseded; nothing was changed",
    )


def supersede_subject(old: str, new: str) -> Refusal:
    """Subjects that are not equal as strings (seed 003 section 14.2, constraint 4)."""
    return Refusal(
        Code.SUBJECT,
        f"{old} and {new} do not have exactly the same subject; supersede matches subjects as "
        "equal strings only; nothing was changed",
    )


def supersede_status(ident: str, status: str) -> Refusal:
    """One of the two items is not active."""
    return Refusal(
        Code.STATUS,
        f"{ident} is {status}, not active; only an active item supersedes or is superseded; "
        "nothing was changed",
    )


def supersede_order(old: str, new: str) -> Refusal:
    """The newer value was captured before the one it would replace."""
    return Refusal(
        Code.ORDER,
        f"{new} was captured before {old}; an older value cannot supersede a newer one; nothing was changed",
    )


def supersede_tainted(old: str, new: str) -> Refusal:
    """An untrusted item (or caller) over a trusted one (seed 003 section 14.2; DESIGN 8)."""
    return Refusal(
        Code.TAINTED,
        f"{new} is untrusted and {old} is trusted; an untrusted value never supersedes a trusted "
        "one; nothing was changed",
    )


def status_invalid(status: str) -> Refusal:
    """A status other than the three a status change sets."""
    return Refusal(
        Code.ARGUMENTS,
        f"{status[:40]!r} is not a status to set; use active, stale or pending-cleanup "
        "(superseded is set only by supersede)",
    )


def status_of_history(ident: str) -> Refusal:
    """A superseded item's status is not changed."""
    return Refusal(
        Code.STATUS,
        f"{ident} is superseded: a superseded item is history and keeps its status; nothing was changed",
    )


def status_same(ident: str, status: str) -> Refusal:
    """The item already has the status."""
    return Refusal(Code.STATUS, f"{ident} is already {status}; nothing was changed")


def status_denied(status: str) -> Refusal:
    """A status only the owner sets (seed 003 section 9: automation never sets stale)."""
    return Refusal(
        Code.DENIED,
        f"only the owner sets {status}; automation marks pending-cleanup at most; nothing was changed",
    )


def superseded(old: str, new: str, subject: str) -> str:
    """A supersede was recorded."""
    return f"{old} is superseded by {new} (subject {subject}); {old} stays as history"


def status_set(ident: str, prior: str, status: str) -> str:
    """A status change was recorded."""
    return f"{ident} is now {status} (was {prior})"


def items_older(count: int) -> str:
    """The first line of a listing cut to the newest items (``bxctl memory items --limit``)."""
    return f"(older items not shown: {count:,}; --limit 0 lists every one)"
