"""Imports of other products' memory (issue 17; ``bxctl import``): what memoryd answers when a parsed
import cannot be taken."""

from __future__ import annotations

from boxmaker.memoryd.sentences import Code, Refusal


def import_bad_record(conversation: str, number: int, why: str) -> Refusal:
    """A record bxctl sent is not one of the session-log records an archive holds."""
    return Refusal(
        Code.ARGUMENTS,
        f"record {number} of conversation {conversation!r} is not a session-log record an import archive"
        f" holds ({why}); nothing was imported",
    )


def import_repeated(conversation: str) -> Refusal:
    """One request named the same conversation twice."""
    return Refusal(
        Code.ARGUMENTS, f"conversation {conversation!r} comes twice in one import; nothing was imported"
    )


def import_unwritable(path: str, why: str) -> Refusal:
    """An import archive cannot be written (the ones before it are kept and journalled)."""
    return Refusal(
        Code.UNAVAILABLE, f"the import archive {path} cannot be written ({why}); run the import again"
    )
