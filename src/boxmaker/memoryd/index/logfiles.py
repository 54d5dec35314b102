"""Where the index reads its logs (M5a section 6; issue 17): every epoch file
``sessions/<id>/N.jsonl`` of an agent's session, and each import archive ``imports/<source>/<id>.jsonl``
(epoch 0 of session ``<id>``; `proto.archives`). A log is named ``<id>/<N>.jsonl`` in the index."""

from __future__ import annotations

import logging
import os
from pathlib import Path

from boxmaker.proto.archives import archive_ids, archive_path, is_import_id
from boxmaker.proto.ids import OWNER_SESSION, is_session_id

log = logging.getLogger("boxmaker.memoryd.index")


def session_ids(sessions: Path, imports: Path | None) -> list[str]:
    """Every session folder with a valid id, then every import archive, sorted. A folder under
    sessions/ named like an import archive (reserved) is not indexed."""
    try:
        with os.scandir(sessions) as entries:
            names = sorted(entry.name for entry in entries if entry.is_dir())
    except FileNotFoundError:
        names = []
    kept = [n for n in names if is_session_id(n) and n != OWNER_SESSION and not is_import_id(n)]
    for name in sorted(set(names) - set(kept)):
        log.warning("ignoring %s: not a session id of an agent", sessions / name)
    imported = archive_ids(imports) if imports is not None else []
    return sorted([*kept, *imported])


def log_path(sessions: Path, imports: Path | None, session: str, epoch: int) -> Path:
    """The file of one log: ``sessions/<id>/<epoch>.jsonl``, or an import's archive (epoch 0)."""
    if is_import_id(session) and imports is not None:
        return archive_path(imports, session)
    return sessions / f"{session}/{epoch}.jsonl"


def log_file(sessions: str, imports: Path | None, session: str, epoch: int) -> str:
    """`log_path` as a string, made without a `Path` (a catch-up looks at every log: making paths took
    a third of the time of one that found nothing new)."""
    if imports is not None and is_import_id(session):
        return str(archive_path(imports, session))
    return f"{sessions}/{session}/{epoch}.jsonl"


def log_place(sessions: str, imports: Path | None, name: str) -> tuple[str, str]:
    """The file of the log a row names (``<id>/<N>.jsonl``) as its folder and its file name, strings
    (recall opens a log per hit: no `Path` made): ``sessions/<id>``, or an import archive's folder."""
    session = name.partition("/")[0]
    if imports is not None and is_import_id(session):
        path = archive_path(imports, session)
        return str(path.parent), path.name
    folder, _, file = name.rpartition("/")
    return (f"{sessions}/{folder}" if folder else sessions), file


def epochs(sessions: Path, imports: Path | None, session: str) -> list[int]:
    """The epoch numbers of a session's logs, in order (an import archive is epoch 0)."""
    if is_import_id(session):
        return [0] if imports is not None and log_path(sessions, imports, session, 0).is_file() else []
    try:
        found = [name[:-6] for name in os.listdir(f"{sessions}/{session}") if name.endswith(".jsonl")]
    except OSError:
        return []
    return sorted(
        int(stem)
        for stem in found
        if stem.isascii() and stem.isdigit() and (stem == "0" or not stem.startswith("0"))
    )
