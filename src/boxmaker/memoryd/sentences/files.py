"""Archive, projections, export/import and replay (seed 003 sections 10-13, 12.2)."""

from __future__ import annotations

from boxmaker.memoryd.sentences import Code, Refusal


def unknown_topic(topic: str, known: list[str]) -> Refusal:
    """The `memory` tool's `topic` action named no topic page."""
    listed = ", ".join(known) if known else "none yet"
    return Refusal(
        Code.NOT_FOUND,
        f"no topic {topic!r}; the topics are: {listed} (the memory action index shows what each is for)",
    )


def export_exists(path: str) -> Refusal:
    """`bxctl memory export FILE` names a file that exists."""
    return Refusal(Code.EXISTS, f"{path} already exists; export writes only a new file, never over one")


def replay_not_empty(path: str) -> Refusal:
    """`bxctl memory replay --into DIR` names a folder that is not empty (or not a folder)."""
    return Refusal(
        Code.EXISTS, f"{path} is not an empty folder; replay writes only into a new or empty folder"
    )


def unwritable(path: str, why: str) -> Refusal:
    """An export or a replay cannot write its target."""
    return Refusal(Code.UNAVAILABLE, f"{path} cannot be written ({why}); nothing was written")


def archive_unwritable(why: str) -> Refusal:
    """The owner's ``bxctl memory archive`` could not write the archive (the journal's intent completes
    a commit that was cut off)."""
    return Refusal(Code.UNAVAILABLE, f"the archive cannot be written ({why}); run it again")


def bundle_refused(why: str) -> Refusal:
    """A bundle cannot be imported: it is too large, not readable, or not a valid bundle."""
    return Refusal(
        Code.BUNDLE,
        f"the bundle cannot be imported: {why}; nothing was imported (runbook: memory-import-refused)",
    )


def no_bundle(path: str) -> Refusal:
    """``bxctl memory import FILE`` names a file that does not exist."""
    return Refusal(Code.NOT_FOUND, f"no bundle at {path}; nothing was imported")


def import_conflict(ident: str, what: str) -> Refusal:
    """An item or control of the bundle is already here with a different `what` (text, content)."""
    return Refusal(
        Code.CONFLICT, f"{ident} is already in this memory with a different {what}; nothing was imported"
    )


def trust_not_honoured(whose: str) -> str:
    """``--trusted`` asked for a bundle this home did not sign (`bundle.signing.verify`): said in the
    import's answer, whose items are then all untrusted."""
    why = {
        "unsigned": "this one is not signed",
        "another-home": "this one was signed by another home",
        "changed": "this one was changed after this home signed it",
    }.get(whose, "this one is not signed")
    return f"untrusted: --trusted is honoured only for a bundle this home signed, and {why}"
