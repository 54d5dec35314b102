"""Skeptical recall, review, metamemory: retrievals, feedback (seed 003 sections 15.2, 16, 23)."""

from __future__ import annotations

from boxmaker.memoryd.sentences import Code, Refusal


def retrieval_not_found(ident: str, owner: bool = False) -> Refusal:
    """Feedback names a retrieval the recall log does not hold (or, from a session, one of another
    session)."""
    whose = "" if owner else " of this session"
    return Refusal(
        Code.NOT_FOUND,
        f"no retrieval {ident[:40]!r}{whose}; feedback names the retrieval id a recall answer "
        "showed (memret-YYYY-MM-DD-NNN); nothing was recorded",
    )


def feedback_item(item: str, retrieval: str) -> Refusal:
    """Feedback names an item its retrieval did not show."""
    return Refusal(
        Code.ARGUMENTS,
        f"{item[:40]!r} is not an item {retrieval} showed; feedback names only items of its retrieval; "
        "nothing was recorded",
    )


def feedback_no_items(retrieval: str) -> Refusal:
    """Feedback on a retrieval that showed no item."""
    return Refusal(
        Code.ARGUMENTS,
        f"{retrieval} showed no memory item, so there is nothing to attribute; nothing was recorded",
    )


def feedback_value(name: str, value: str, allowed: tuple[str, ...]) -> Refusal:
    """A value outside a closed set (role, verdict, attribution)."""
    return Refusal(
        Code.ARGUMENTS,
        f"`{name}` is one of {', '.join(allowed)}, not {value[:40]!r}; nothing was recorded",
    )


def feedback_length(name: str, limit: int, size: int) -> Refusal:
    """A feedback text outside 1..limit characters (no transcript is stored: checklist 16)."""
    return Refusal(
        Code.LENGTH,
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
        Code.STATUS,
        f"subject {subject[:80]!r} has {count} active state item{'' if count == 1 else 's'}; there is "
        "nothing to reconcile; nothing was changed",
    )


def reconcile_keep(ident: str, subject: str) -> Refusal:
    """`reconcile --keep` names an item that is not an active state item of the subject."""
    return Refusal(
        Code.SUBJECT,
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
    Code.DENIED, "only the owner reconciles a conflict (bxctl memory reconcile); nothing was changed"
)


def more_notes(count: int, offset: int) -> str:
    """The last line of a tiers page that does not end the listing (`review.tiers.listing`)."""
    return (
        f"(notes not shown: {count:,}, found less often or older; offset {offset:,} shows the next page; "
        "bxctl memory tiers --limit 0 lists every one)"
    )
