"""Imported conversations: their ids and where memoryd keeps them (issue 17; DESIGN 10.4 added).

Another product's conversation (a Hermes session, a ChatGPT or claude.ai conversation, a Claude Code
transcript) comes in through ``bxctl import`` as an archive that memoryd alone writes, one file per
conversation: ``{home}/imports/<source>/<id>.jsonl``, in the session-log record schema
(`boxmaker.proto.records`; docs/session-log.md). ``sessions/`` stays loopd's.

The id is ``imp-<source>-`` and the first 26 lowercase base32 characters of the SHA-256 of the
source's own conversation id (130 bits), so it fits `SessionId` and a re-import of the same
conversation finds the same file. Names of that form are reserved: memoryd does not index a folder so
named under ``sessions/``.
"""

from __future__ import annotations

import base64
import hashlib
import os
import re
from pathlib import Path

#: The sources `bxctl import` reads, in the order its help lists them.
SOURCES: tuple[str, ...] = ("hermes", "chatgpt", "claude", "claude-code", "gemini")

#: Every archive's id starts with this.
PREFIX = "imp-"

#: How many base32 characters of the hash an id keeps.
HASH_CHARS = 26

_ID = re.compile(rf"^imp-({'|'.join(re.escape(s) for s in SOURCES)})-([a-z2-7]{{{HASH_CHARS}}})\Z")


def import_id(source: str, conversation: str) -> str:
    """The archive id of the source's conversation id `conversation`: ``imp-chatgpt-<26 base32>``.

    Raises:
        ValueError: `source` is not one of `SOURCES`.
    """
    if source not in SOURCES:
        raise ValueError(f"unknown import source {source!r}; known: {', '.join(SOURCES)}")
    digest = hashlib.sha256(conversation.encode("utf-8", "surrogatepass")).digest()
    return f"{PREFIX}{source}-{base64.b32encode(digest).decode('ascii').lower()[:HASH_CHARS]}"


def is_import_id(value: str) -> bool:
    """True for an archive id (`import_id`'s form)."""
    return _ID.match(value) is not None


def source_of(archive: str) -> str:
    """The source of an archive id (`is_import_id` must hold)."""
    match = _ID.match(archive)
    if match is None:
        raise ValueError(f"{archive!r} is not an import archive id")
    return match.group(1)


def archive_path(imports: Path, archive: str) -> Path:
    """``<imports>/<source>/<id>.jsonl`` for an archive id.

    Raises:
        ValueError: `archive` is not an archive id (never a path from anything else).
    """
    return imports / source_of(archive) / f"{archive}.jsonl"


def archive_ids(imports: Path) -> list[str]:
    """Every archive under `imports` (files whose name is ``<id>.jsonl`` in their source's folder),
    sorted; anything else there is ignored."""
    found: list[str] = []
    for source in SOURCES:
        try:
            with os.scandir(imports / source) as entries:
                for entry in entries:
                    stem = entry.name[:-6] if entry.name.endswith(".jsonl") else ""
                    if (
                        is_import_id(stem)
                        and source_of(stem) == source
                        and entry.is_file(follow_symlinks=False)
                    ):
                        found.append(stem)
        except (FileNotFoundError, NotADirectoryError):
            continue
    return sorted(found)
