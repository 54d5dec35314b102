"""``bxctl import SOURCE PATH``: another product's memory brought into boxmaker (issue 17).

bxctl reads and checks the export whole (`hermes`, `chatgpt`, `claude`, `claude_code`, `gemini` parse it
into `parsed.Parsed`); a malformed export is refused in one sentence naming the file and the place,
before anything is sent, so nothing is imported. Then it sends what it read to memoryd's admin socket as
``memory_import`` requests (`messages.MemoryImport`, several when the export is larger than one frame
holds, with a progress bar on a terminal); memoryd does all the writing (`memoryd.admin.imports`).
Instruction files are only printed, as suggestions. ``bxctl memory import`` is boxmaker's own bundle.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import click

from boxmaker.bxctl import client
from boxmaker.bxctl.imports import chatgpt, claude, claude_code, gemini, hermes
from boxmaker.bxctl.imports.parsed import NESTED, Conversation, Entry, Malformed, Parsed
from boxmaker.bxctl.options import json_option, memory_socket_option, memory_socket_path
from boxmaker.bxctl.progress import progress_bar
from boxmaker.bxctl.state import State, pass_state
from boxmaker.proto.archives import SOURCES
from boxmaker.proto.escape import escape, escape_line
from boxmaker.proto.frame import MAX_FRAME
from boxmaker.proto.messages import ImportedConversation, ImportedEntry, MemoryAdminReply, MemoryImport
from boxmaker.proto.records import decode_record

#: Each source's reader.
READERS: dict[str, Callable[[Path], Parsed]] = {
    "hermes": hermes.parse,
    "chatgpt": chatgpt.parse,
    "claude": claude.parse,
    "claude-code": claude_code.parse,
    "gemini": gemini.parse,
}

#: The most memory entries one request carries (each is a note and a pending change memoryd writes).
ENTRIES_PER_REQUEST = 200

#: The longest conversation id a request takes (`messages.ImportedConversation.conversation`).
ID_LIMIT = 512

#: The most bytes of conversations one request carries (a frame holds 4 MiB).
BATCH_BYTES = MAX_FRAME * 3 // 4


class ImportRefused(click.ClickException):
    """Exit 1: the export cannot be read (the sentence names the file and the place; runbook
    import-refused)."""

    exit_code = 1
    code = "malformed"

    def __init__(self, message: str) -> None:
        super().__init__(f"{message}\nrunbook: import-refused (docs/runbook.md)")


@click.command(name="import")
@click.argument("source", type=click.Choice(SOURCES))
@click.argument("path", type=click.Path(path_type=Path, exists=True))
@click.option("--dry-run", is_flag=True, help="Print what would come in; change nothing.")
@click.option(
    "--accept",
    is_flag=True,
    help="Apply the memory entries that pass every check at once, as your own edits: this stores text "
    "of unknown provenance (another product wrote it, maybe after reading a web page) as identity, by "
    "your choice. Without it each entry waits in `bxctl memory pending`.",
)
@memory_socket_option
@json_option
@pass_state
def import_(
    state: State,
    *,
    source: str,
    path: Path,
    dry_run: bool,
    accept: bool,
    memory_socket: Path | None,
    as_json: bool,
) -> None:
    """Bring another product's memory in from PATH.

    \b
    SOURCE and PATH:
      hermes       a Hermes home (memories/ and state.db) or its memories/ folder
      chatgpt      a ChatGPT export's conversations.json (or its folder)
      claude       a claude.ai export's conversations.json (or its folder)
      claude-code  a ~/.claude/projects/ folder (transcripts and auto memory)
      gemini       a GEMINI.md (its "## Gemini Added Memories" section)

    Conversations become archives memoryd indexes like session logs, with their original times: what
    you said is yours, a tool's or web page's output is untrusted and what follows it tainted. Each
    memory entry becomes an untrusted note and a pending change of memory.md or user.md (entries
    already there are skipped); instruction files are only printed, as suggestions for soul.md and
    conventions.md. Importing again skips what did not change and archives again what grew. A malformed
    export is refused whole. memoryd journals every import.

    \b
    Example:
        bxctl import hermes ~/.hermes --dry-run
        bxctl import chatgpt ~/Downloads/chatgpt-export/conversations.json

    \b
    See also: bxctl memory import BUNDLE (boxmaker's own bundles, from bxctl memory export).
    """
    try:
        parsed = READERS[source](path)
        _check(parsed, path)
    except Malformed as exc:
        raise ImportRefused(str(exc)) from None
    except RecursionError:  # a value nested so deep that writing it as JSON again fails
        raise ImportRefused(str(Malformed(path, "", NESTED))) from None
    socket = memory_socket_path(state, memory_socket)
    origin = str(path.absolute())
    too_large = _too_large(parsed)
    batches = list(_batches(source, origin, parsed, dry_run=dry_run, accept=accept))
    replies: list[MemoryAdminReply] = []
    with progress_bar(f"importing from {source}", len(parsed.conversations)) as advance:
        for batch in batches:
            replies.append(_send(socket, batch))
            advance(len(batch.conversations))
            if str(replies[-1].data.get("code", "ok")).startswith("refused:"):
                break  # what came before is kept and journalled; the refusal says why
    data = _merge(source, dry_run, replies, parsed)
    data["too_large"] = too_large
    failed = [r for r in replies if str(r.data.get("code", "ok")).startswith("refused:")]
    if failed:
        client.emit(failed[0], as_json)
    if as_json:
        click.echo(json.dumps(data, ensure_ascii=True, indent=2))
    else:
        click.echo(_describe(source, origin, dry_run, data, parsed))


def _check(parsed: Parsed, path: Path) -> None:
    """Every record as memoryd will check it (`proto.records`), and every conversation id once and as
    long as a request takes it (`ID_LIMIT`), so nothing is sent of an export that memoryd would refuse
    halfway.

    Raises:
        Malformed: naming the conversation and the record.
    """
    seen: set[str] = set()
    for conversation in parsed.conversations:
        file = conversation.file or parsed.file or path
        if not 0 < len(conversation.conversation) <= ID_LIMIT:
            length = len(conversation.conversation)
            place = f"conversation {conversation.conversation}"
            raise Malformed(file, place, f"has an id of {length:,} characters (1 to {ID_LIMIT})")
        if conversation.conversation in seen:
            raise Malformed(file, f"conversation {conversation.conversation}", "comes twice")
        seen.add(conversation.conversation)
        for number, record in enumerate(conversation.records, start=1):
            try:
                decode_record(json.dumps(record, ensure_ascii=True).encode("ascii"))
            except ValueError as exc:
                place = f"conversation {conversation.conversation} record {number}"
                raise Malformed(file, place, str(exc)) from None


def _weight(conversation: Conversation) -> int:
    """About how many bytes a conversation takes in a request."""
    return len(json.dumps(conversation.records, ensure_ascii=True)) + len(conversation.title) * 6 + 1024


def _entry_weight(entry: Entry) -> int:
    """About how many bytes a memory entry takes in a request."""
    return len(json.dumps(entry.text, ensure_ascii=True)) + len(entry.place) * 6 + 256


def _too_large(parsed: Parsed) -> list[dict[str, Any]]:
    """Take out of `parsed` the conversations and entries too large for one request (a frame holds
    4 MiB); they are not imported, and the answer names them: ``{"conversation", "title", "bytes"}``
    or ``{"entry", "file", "bytes"}`` (an entry's place and the identity file it was meant for)."""
    kept, left = [], []
    for conversation in parsed.conversations:
        size = _weight(conversation)
        if size > BATCH_BYTES:
            left.append(
                {"conversation": conversation.conversation, "title": conversation.title, "bytes": size}
            )
        else:
            kept.append(conversation)
    parsed.conversations = kept
    entries = []
    for entry in parsed.entries:
        size = _entry_weight(entry)
        if size > BATCH_BYTES:
            left.append({"entry": entry.place, "file": f"{entry.file}.md", "bytes": size})
        else:
            entries.append(entry)
    parsed.entries = entries
    return left


def _wire(conversation: Conversation) -> ImportedConversation:
    return ImportedConversation(conversation.conversation, conversation.records, conversation.title)


def _batches(
    source: str, origin: str, parsed: Parsed, *, dry_run: bool, accept: bool
) -> Iterator[MemoryImport]:
    """The requests: conversations, then entries, up to `BATCH_BYTES` and `ENTRIES_PER_REQUEST` each."""
    batch: list[ImportedConversation] = []
    entries: list[ImportedEntry] = []
    size = 0
    for conversation in parsed.conversations:
        weight = _weight(conversation)
        if batch and size + weight > BATCH_BYTES:
            yield MemoryImport(source, origin, batch, [], dry_run, accept)  # type: ignore[arg-type]
            batch, size = [], 0
        batch.append(_wire(conversation))
        size += weight
    for entry in parsed.entries:
        weight = _entry_weight(entry)
        if (batch or entries) and (size + weight > BATCH_BYTES or len(entries) >= ENTRIES_PER_REQUEST):
            yield MemoryImport(source, origin, batch, entries, dry_run, accept)  # type: ignore[arg-type]
            batch, entries, size = [], [], 0
        entries.append(ImportedEntry(entry.file, entry.text, entry.place))  # type: ignore[arg-type]
        size += weight
    yield MemoryImport(source, origin, batch, entries, dry_run, accept)  # type: ignore[arg-type]


def _send(socket: Path, body: MemoryImport) -> MemoryAdminReply:
    reply = client.request("memoryd", socket, body, timeout=600.0)
    if not isinstance(reply, MemoryAdminReply) or not isinstance(reply.data, dict):
        raise client.RoleRefused(f"memoryd answered {type(reply).__name__} to memory_import")
    return reply


def _merge(source: str, dry_run: bool, replies: list[MemoryAdminReply], parsed: Parsed) -> dict[str, Any]:
    """The replies as one: ``{"code", "source", "dry_run", "archives", "entries", "edits",
    "suggestions"}`` (the caller adds ``too_large``: conversations and entries not sent)."""
    titles = {c.conversation: c.title for c in parsed.conversations}
    archives = [
        {**a, "title": titles.get(str(a.get("conversation")), "")}
        for r in replies
        for a in r.data.get("archives", [])
    ]
    return {
        "code": next((str(r.data["code"]) for r in replies if r.data.get("code") != "ok"), "ok"),
        "source": source,
        "dry_run": dry_run,
        "archives": archives,
        "entries": [e for r in replies for e in r.data.get("entries", [])],
        "edits": [r.data["edit"] for r in replies if r.data.get("edit")],
        "suggestions": [{"place": s.place, "target": s.target, "text": s.text} for s in parsed.suggestions],
    }


_STATES = {
    "new": "archived",
    "grown": "archived again (it grew)",
    "replaced": "archived again (it changed)",
    "unchanged": "unchanged, skipped",
    "erased": "erased before, not brought back",
}

_ENTRIES = {
    "present": "already in {file}",
    "imported": "brought by an earlier import",
    "refused": "refused by the check",
    "noted": "noted (untrusted), pending for {file}",
    "accepted": "accepted into {file}",
    "would-note": "would be noted (untrusted) and pending for {file}",
}


#: How the counts line names each entry state.
_COUNTED = {
    "present": "already there",
    "imported": "brought before",
    "refused": "refused by the check",
    "noted": "noted and pending",
    "accepted": "accepted",
    "would-note": "would be noted and pending",
}


def _describe(source: str, origin: str, dry_run: bool, data: dict[str, Any], parsed: Parsed) -> str:
    """What the owner reads: each conversation and entry, the counts, then the suggestions."""
    lines = [escape_line(f"{'dry run: nothing changed; ' if dry_run else ''}import from {source} ({origin})")]
    for archive in data["archives"]:
        state = _STATES.get(str(archive["state"]), str(archive["state"]))
        if dry_run and archive["state"] in ("new", "grown", "replaced"):
            state = f"would be {state}"
        title = f" {archive['title']!r}" if archive.get("title") else ""
        lines.append(escape_line(f"  {archive['id']}{title}: {archive['records']:,} records, {state}"))
    for entry in data["entries"]:
        said = _ENTRIES.get(str(entry["state"]), str(entry["state"])).format(file=entry["file"])
        failed = str(entry.get("code", "")).startswith("refused:")
        if entry.get("sentence") and (entry["state"] == "refused" or failed):
            said += f": {entry['sentence']}"
        lines.append(escape_line(f"  {entry['place'] or entry['file']}: {said}"))
    conversations = _counts(data["archives"], _STATES)
    entries = _counts(data["entries"], _COUNTED)
    lines.append(f"conversations: {conversations or 'none'}; entries: {entries or 'none'}")
    for left in data["too_large"]:
        what = (
            f"{left['entry']} (for {left['file']})"
            if "entry" in left
            else f"conversation {left['conversation']} {left['title']!r}"
        )
        lines.append(
            escape_line(
                f"  {what}: not imported, too large for one request ({left['bytes']:,} bytes of at most"
                f" {BATCH_BYTES:,})"
            )
        )
    pending = [e["pending"] for e in data["entries"] if e.get("state") == "noted" and e.get("pending")]
    if pending:
        lines.append(f"review them: bxctl memory pending; accept one: bxctl memory accept {pending[0]} --yes")
    for suggestion in parsed.suggestions:
        lines.append(
            f"\nsuggestion for {suggestion.target} (not stored; copy what you want by hand) from "
            f"{escape_line(suggestion.place)}:\n{escape(suggestion.text)}"
        )
    return "\n".join(lines)


def _counts(rows: list[dict[str, Any]], said: dict[str, str]) -> str:
    """``2 archived, 1 unchanged, skipped``: how many rows are in each state."""
    found: dict[str, int] = {}
    for row in rows:
        found[str(row["state"])] = found.get(str(row["state"]), 0) + 1
    return ", ".join(f"{n:,} {said.get(state, state)}" for state, n in found.items())
