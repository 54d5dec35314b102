"""Imported conversations as archives memoryd writes (issue 17; docs/session-log.md "Import archives").

bxctl parses an export and sends each conversation's records (`messages.ImportedConversation`);
memoryd checks every record against the session-log schema (`proto.records`: ``user``, ``assistant`` and
``tool_result`` only), encodes them as a log and compares the bytes with the archive already under
``imports/<source>/<id>.jsonl`` (`proto.archives`), keyed by the source's conversation id:

| state | when | what memoryd does |
|---|---|---|
| ``new`` | no archive yet | writes it |
| ``unchanged`` | the same bytes | nothing |
| ``grown`` | the old archive is a prefix of the new one | rewrites it whole; the index reads on |
| ``replaced`` | any other change (another branch is active) | out of the index, rewritten, indexed again |
| ``erased`` | an erasure's tombstone names its id | nothing: an erased conversation is not brought back |

Each archive is written whole (temp file, fsync, rename, fsync the folder; `fsio.atomic_write`), so a
crash leaves the old archive or the new one, never a mix; 0600 in 0700 folders.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from boxmaker.memoryd.files.journal import read_jsonl
from boxmaker.memoryd.files.names import ERASURES_FILE
from boxmaker.memoryd.sentences import Refusal
from boxmaker.memoryd.sentences import imports as sentences
from boxmaker.proto import fsio
from boxmaker.proto.archives import archive_path, import_id
from boxmaker.proto.messages import ImportedConversation
from boxmaker.proto.records import Assistant, ToolResult, User, decode_record, encode_record

State = Literal["new", "unchanged", "grown", "replaced", "erased"]

#: The record types an archive holds.
_KINDS = (User, Assistant, ToolResult)


@dataclass(frozen=True, slots=True)
class Planned:
    """One conversation's archive as planned: its id, the source's id, title, record count, the
    archive's bytes, their SHA-256 and what importing it does (`State`)."""

    archive: str
    conversation: str
    title: str
    records: int
    data: bytes
    sha256: str
    state: State

    def summary(self) -> dict[str, object]:
        """What the answer's data and the journal line carry (never the text)."""
        return {
            "id": self.archive,
            "conversation": self.conversation,
            "records": self.records,
            "sha256": self.sha256,
            "state": self.state,
        }


def erased_ids(memory_dir: Path) -> set[str]:
    """Every scope ref of erasures.jsonl's tombstones (the archive ids an erasure erased among them)."""
    found: set[str] = set()
    for tombstone in read_jsonl(memory_dir / ERASURES_FILE, ("erasure_id",)):
        refs = tombstone.get("scope_refs")
        if isinstance(refs, list):
            found.update(r for r in refs if isinstance(r, str))
    return found


def encode(conversation: ImportedConversation) -> bytes | Refusal:
    """The archive's bytes: each record checked and encoded as a session-log line; the refusal names
    the first record that is not one an archive holds."""
    lines: list[bytes] = []
    for number, raw in enumerate(conversation.records, start=1):
        try:
            record = decode_record(json.dumps(raw, ensure_ascii=True).encode("ascii"))
        except (ValueError, TypeError) as exc:
            return sentences.import_bad_record(conversation.conversation, number, str(exc))
        if not isinstance(record, _KINDS):
            return sentences.import_bad_record(
                conversation.conversation,
                number,
                f"type {raw.get('type')!r}: only user, assistant, tool_result",
            )
        lines.append(encode_record(record) + b"\n")
    return b"".join(lines)


def plan(
    imports: Path, source: str, conversations: Sequence[ImportedConversation], erased: Iterable[str]
) -> list[Planned] | Refusal:
    """What importing `conversations` would do (module docstring), changing nothing; a refusal when any
    record is malformed or a conversation comes twice (then nothing is imported)."""
    gone = set(erased)
    seen: set[str] = set()
    planned: list[Planned] = []
    for conversation in conversations:
        if conversation.conversation in seen:
            return sentences.import_repeated(conversation.conversation)
        seen.add(conversation.conversation)
        data = encode(conversation)
        if isinstance(data, Refusal):
            return data
        archive = import_id(source, conversation.conversation)
        state: State
        if archive in gone:
            state = "erased"
        else:
            old = _read(archive_path(imports, archive))
            if old is None:
                state = "new"
            elif old == data:
                state = "unchanged"
            elif data.startswith(old):
                state = "grown"
            else:
                state = "replaced"
        planned.append(
            Planned(
                archive,
                conversation.conversation,
                conversation.title,
                len(conversation.records),
                data,
                hashlib.sha256(data).hexdigest(),
                state,
            )
        )
    return planned


def write(imports: Path, planned: Planned) -> None:
    """Write one archive whole (module docstring).

    Raises:
        OSError: it cannot be written (the old archive, if any, is as it was).
    """
    path = archive_path(imports, planned.archive)
    fsio.ensure_dir(imports)
    fsio.ensure_dir(path.parent)
    fsio.atomic_write(path, planned.data)


def _read(path: Path) -> bytes | None:
    try:
        return fsio.read_bytes(path)
    except FileNotFoundError:
        return None
