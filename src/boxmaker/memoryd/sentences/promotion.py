"""Promotion: `propose` and the owner's decisions on proposals (seed 003 sections 17, 23.5)."""

from __future__ import annotations

from boxmaker.memoryd.sentences import Code, Refusal

NO_SUPPORT = Refusal(
    Code.REFS,
    "refused (refs): a proposal cites at least one supporting reference (an item id mem-…, an "
    "archive anchor archive/YYYY-MM-DD.md, a feedback id memfb-… or a retrieval id memret-…); "
    "nothing was written",
)


def bad_ref(ref: str, why: str) -> Refusal:
    """A supporting reference that has no known form, or names nothing the store holds."""
    return Refusal(Code.REFS, f"refused (refs): {ref[:80]!r} {why}; nothing was written")


def ref_not_found(ref: str) -> Refusal:
    """A feedback or retrieval id that feedback.jsonl or the recall log does not hold."""
    return Refusal(
        Code.NOT_FOUND,
        f"refused (not-found): {ref[:80]!r} names no recorded feedback or retrieval; nothing was written",
    )


def bad_target(target: str) -> Refusal:
    """A proposal's target that is neither ``conventions`` nor ``<element>:<name>``."""
    return Refusal(
        Code.ARGUMENTS,
        f"refused (arguments): target {target[:60]!r} must be conventions or a memory-policy element "
        "such as retrieval-trigger:environment-state (one line); nothing was written",
    )


def proposal_field(name: str, rule: str, sentence: str) -> Refusal:
    """A proposal's text field that fails the write check (the field named, the rule's sentence)."""
    return Refusal(f"refused:{rule}", f"refused ({rule}) in {name}: {sentence}")


def proposal_duplicate(ident: str) -> Refusal:
    """The same change to the same target is already waiting for review."""
    return Refusal(
        Code.DUPLICATE,
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
    return Refusal(Code.NOT_FOUND, f"no proposal {ident[:60]}; see bxctl memory proposals --all")


def proposal_above_private(ident: str, session: str, data_class: str) -> Refusal:
    """Accepting a proposal filed by a session above private, without the owner's explicit consent
    (the identity-write rule: its rule would reach every session's prompt)."""
    return Refusal(
        Code.CONFIRM,
        f"refused (confirm): {ident} came from session {session[:60]}, which held {data_class} data; "
        "read it with bxctl memory proposals, then accept it with --untrusted-ok; nothing was changed",
    )


def proposal_untrusted(ident: str, session: str) -> Refusal:
    """Accepting a proposal filed by a tainted session, without the owner's explicit consent."""
    return Refusal(
        Code.UNTRUSTED,
        f"refused (untrusted): {ident} came from session {session[:60]}, which had read untrusted "
        "content; read it with bxctl memory proposals, then accept it with --untrusted-ok; "
        "nothing was changed",
    )


def proposal_decided(ident: str, status: str) -> Refusal:
    """A proposal already accepted or rejected."""
    return Refusal(Code.DECIDED, f"{ident} was already {status}; nothing was changed")


def conventions_limit(name: str, size: int, limit: int) -> Refusal:
    """Accepting would put conventions.md (or soul.md with it) over its limit."""
    return Refusal(
        Code.LIMIT,
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
