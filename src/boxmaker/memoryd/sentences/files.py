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
