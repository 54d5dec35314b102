"""Withdrawal: `forget`, the owner's withdraw and reinstate, receipts (seed 003 section 12)."""

from __future__ import annotations

from boxmaker.memoryd.sentences import Code, Refusal

FORGET_TAINTED = Refusal(
    Code.TAINTED,
    "this session has read untrusted content, so it cannot withdraw memory; the owner can, with "
    "bxctl memory withdraw",
)
SCOPE_EMPTY = Refusal(
    Code.SCOPE, "a withdrawal names at least one item, archive ref or session; nothing was recorded"
)
REINSTATE_NEEDS_SUPERSEDES = Refusal(
    Code.CHAIN, "a reinstatement names the withdrawal it supersedes; nothing was recorded"
)


def bad_selector(value: str, form: str) -> Refusal:
    """A scope selector without its form."""
    return Refusal(Code.SCOPE, f"{value!r} is not a selector ({form}); nothing was recorded")


def bad_record(why: str) -> Refusal:
    """A control record without seed 12.2's shape."""
    return Refusal(Code.ARGUMENTS, f"invalid withdrawal record: {why}; nothing was recorded")


def bad_reason(reason: str) -> Refusal:
    """A reason outside the closed vocabulary."""
    known = "failed-exploration, owner-decision, mistaken, poisoned, reconciliation, other"
    return Refusal(Code.REASON, f"reason {reason!r} is not one of {known}; nothing was recorded")


def duplicate_control(ident: str) -> Refusal:
    """The withdrawal id is already in controls.jsonl."""
    return Refusal(Code.DUPLICATE, f"{ident} is already in controls.jsonl; nothing was recorded")


def unknown_control(ident: str) -> Refusal:
    """supersedes (or reinstate) names no control event."""
    return Refusal(
        Code.NOT_FOUND, f"no control event {ident}; see bxctl memory controls; nothing was recorded"
    )


def other_scope(ident: str) -> Refusal:
    """A new event supersedes one of another exact scope."""
    return Refusal(
        Code.SCOPE,
        f"{ident} controls a different scope; a new event names exactly its scope; nothing was recorded",
    )


def nothing_to_reinstate() -> Refusal:
    """A reinstatement for a scope no withdrawal names."""
    return Refusal(Code.CHAIN, "no withdrawal has this exact scope to reinstate; nothing was recorded")


def not_controlling(ident: str, action: str) -> Refusal:
    """A new event for a scope that does not name its controlling event."""
    verb = "withdrew" if action == "withdraw" else "reinstated"
    return Refusal(
        Code.CHAIN,
        f"{ident} last {verb} this exact scope; a new event must supersede {ident}; nothing was recorded",
    )


def already_eligible(ident: str) -> Refusal:
    """A reinstatement of a scope that is not withdrawn."""
    return Refusal(Code.CHAIN, f"{ident} already reinstated this scope; nothing was recorded")


def conflicting(heads: list[str]) -> Refusal:
    """A new event for a conflicting scope other than the owner's reconciliation."""
    return Refusal(
        Code.CHAIN,
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
    return Refusal(Code.CHAIN, f"{ident} is a reinstatement, not a withdrawal; nothing was recorded")


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
        Code.UNAVAILABLE,
        f"memoryd cannot read its withdrawal controls ({why}), so it shows nothing rather than "
        "something withdrawn; the owner can check memory/controls.jsonl",
    )
