"""Autodream's maintenance actions and staging (seed 003 section 14)."""

from __future__ import annotations

from boxmaker.memoryd.sentences import Code, Refusal


def maintenance_only(action: str) -> Refusal:
    """A maintenance action from a session that is not a run of a maintenance job."""
    return Refusal(
        Code.MAINTENANCE,
        f"refused (maintenance): {action} is a maintenance action, offered only to a run of a job whose "
        "job file says maintenance = true; nothing was changed",
    )


def maintenance_identity(action: str) -> Refusal:
    """An identity write (or a withdrawal) from a maintenance run (seed 003 section 14.1)."""
    return Refusal(
        Code.MAINTENANCE,
        f"refused (maintenance): a maintenance run never writes memory.md, user.md or conventions, and "
        f"{action} is not one of its actions; write a note instead; nothing was changed",
    )


def item_withdrawn(ident: str) -> Refusal:
    """A maintenance action naming a withdrawn item (seed 003 section 12.2)."""
    return Refusal(
        Code.WITHDRAWN,
        f"refused (withdrawn): {ident} is withdrawn; it is left out of every pass and is not changed; "
        "nothing was changed",
    )


def item_tainted(ident: str) -> Refusal:
    """A tainted pass naming a trusted item (seed 003 section 14; DESIGN 11)."""
    return Refusal(
        Code.TAINTED,
        f"refused (tainted): this session has read untrusted content and {ident} is trusted; a tainted "
        "pass never changes a trusted item; write a note instead; nothing was changed",
    )


def knowledge_only(ident: str, kind: str, what: str) -> Refusal:
    """`cool` or `merge` naming an item that is not knowledge."""
    return Refusal(
        Code.KIND,
        f"refused (kind): {what} takes knowledge items only and {ident} is {kind}; nothing was changed",
    )


def cooled_already(ident: str, cooled: bool) -> Refusal:
    """`cool` of a cooled item, or `warm` of one that is not cooled."""
    state = "already cooled" if cooled else "not cooled"
    return Refusal(Code.STATUS, f"refused (status): {ident} is {state}; nothing was changed")


def merged_already(ident: str, into: str) -> Refusal:
    """An item already folded into a merged one."""
    return Refusal(
        Code.STATUS,
        f"refused (status): {ident} was already merged into {into}; it is history; nothing was changed",
    )


def merge_history(ident: str, status: str) -> Refusal:
    """A merge member that is superseded or stale."""
    return Refusal(
        Code.STATUS,
        f"refused (status): {ident} is {status}; only active or pending-cleanup knowledge is merged; "
        "nothing was changed",
    )


MERGE_MEMBERS = Refusal(
    Code.ARGUMENTS,
    "refused (arguments): merge takes `ids`, two to twenty different item ids, and `text`, the "
    "consolidated lesson; nothing was changed",
)


def mark_status(status: str) -> Refusal:
    """`mark` with a status other than pending-cleanup (stale is the owner's: `status_denied`)."""
    return Refusal(
        Code.ARGUMENTS,
        f"refused (arguments): mark sets pending-cleanup only, not {status[:40]!r}; nothing was changed",
    )


def topic_invalid(topic: str) -> Refusal:
    """`assign` with a topic that has no letters or digits."""
    return Refusal(
        Code.ARGUMENTS,
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
    Code.ARGUMENTS, "refused (arguments): `date` must be a day, YYYY-MM-DD; nothing was read"
)


def dream_unknown(session: str) -> Refusal:
    """`bxctl memory dream apply/discard/show` naming a pass with nothing staged."""
    return Refusal(
        Code.NOT_FOUND,
        f"refused (not-found): no staged pass {session[:80]} waits (see bxctl memory dream show); "
        "nothing was "
        "changed",
    )


def dream_closed(session: str, how: str) -> Refusal:
    """A staged pass already applied or discarded."""
    return Refusal(
        Code.NOT_FOUND,
        f"refused (not-found): the staged pass {session} was already {how}; nothing was changed",
    )


STAGED_LINE_DAMAGED = Refusal(Code.DAMAGED, "the staged line is damaged; it was not applied")
INPUT_NEVER_STAGED = Refusal(Code.DAMAGED, "dream-input is never staged; it was not applied")
