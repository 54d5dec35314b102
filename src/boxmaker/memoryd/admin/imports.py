"""The owner's import of another product's memory: ``memory_import`` on the admin socket (issue 17;
docs/protocol.md). bxctl has parsed and checked the export; memoryd does all the writing:

1. every conversation's records are checked and planned (`imports.archives.plan`): a malformed record
   refuses the whole request, nothing written;
2. under the write lock, archives that changed are written whole (a replaced one is taken out of the
   index first) and one journal line (action ``import-archives``, where ``imports/<source>/``) records
   each conversation's id, source id, record count, hash and state (never its text or title);
3. the archives written are indexed (`Index.catch_up_many`; a replaced one's old terms go with a
   rebuild in the background);
4. the entries go through the identity-write rule (`imports.entries.bring`).

A dry run plans both and writes nothing.
"""

from __future__ import annotations

import logging
from typing import Any

from boxmaker.memoryd.admin.replies import plural, refused
from boxmaker.memoryd.files.journal import Change
from boxmaker.memoryd.imports import archives, entries
from boxmaker.memoryd.memory import Memory
from boxmaker.memoryd.sentences import Refusal
from boxmaker.memoryd.sentences import imports as sentences
from boxmaker.memoryd.sentences.damage import DISK_FULL
from boxmaker.memoryd.write.answer import Answer, guarded
from boxmaker.proto import fsio
from boxmaker.proto.escape import escape
from boxmaker.proto.ids import OWNER_SESSION
from boxmaker.proto.messages import MemoryAdminReply, MemoryImport

LOG = logging.getLogger("boxmaker.memoryd")

#: The states of an archive that are written.
_WRITTEN = ("new", "grown", "replaced")


def handle(memory: Memory, body: MemoryImport) -> MemoryAdminReply:
    """Import what bxctl parsed (module docstring). The reply's data: ``{"code", "source", "dry_run",
    "archives": [{"id", "conversation", "records", "sha256", "state"}], "entries": [{"place", "file",
    "state", "code"?, "sentence"?, "pending"?, "edit"?}], "edit"}`` (``edit``: the journal line's id, or
    null for a dry run)."""
    try:
        return _handle(memory, body)
    except OSError as exc:
        if not fsio.disk_full(exc):
            raise
        LOG.error("disk-full: the owner's import from %s was refused: %s", body.source, exc)
        return MemoryAdminReply(DISK_FULL.sentence, {"code": DISK_FULL.code})


def _handle(memory: Memory, body: MemoryImport) -> MemoryAdminReply:
    layout = memory.config.layout
    planned = archives.plan(
        layout.imports, body.source, body.conversations, archives.erased_ids(layout.memory)
    )
    if isinstance(planned, Refusal):
        return refused(planned)
    edit = None
    if not body.dry_run:
        done = _write(memory, body, planned)
        if isinstance(done, Refusal):
            return refused(done)
        edit = done
    outcomes: list[entries.Outcome] = []
    failed: list[Answer] = []

    def bring() -> Answer:
        outcomes.extend(
            entries.bring(memory.writer, body.source, body.entries, accept=body.accept, dry_run=body.dry_run)
        )
        return Answer("", "ok")

    if body.entries:
        result = guarded(bring)
        if not result.ok:
            failed.append(result)
    data: dict[str, Any] = {
        "code": failed[0].code if failed else "ok",
        "source": body.source,
        "dry_run": body.dry_run,
        "archives": [p.summary() for p in planned],
        "entries": [o.data() for o in outcomes],
        "edit": edit,
    }
    text = _describe(body, planned, outcomes)
    if failed:
        text += f"\n{failed[0].output}"
    return MemoryAdminReply(escape(text), data)


def _write(memory: Memory, body: MemoryImport, planned: list[archives.Planned]) -> str | Refusal:
    """Write the archives that changed and journal the import; index them. Returns the journal line's
    id, or the refusal of an archive that could not be written (those before it are kept, journalled
    and indexed)."""
    imports = memory.config.layout.imports
    changed = [p for p in planned if p.state in _WRITTEN]
    replaced = [p.archive for p in changed if p.state == "replaced"]
    written: list[archives.Planned] = []
    failure: Refusal | None = None
    with memory.writer.lock:
        memory.index.forget(replaced)
        for item in changed:
            try:
                archives.write(imports, item)
            except OSError as exc:
                failure = sentences.import_unwritable(item.archive, exc.strerror or str(exc))
                break
            written.append(item)
        kept = {p.archive for p in written}
        entry = {
            "session": OWNER_SESSION,
            "call": "",
            "untrusted": False,
            "action": "import-archives",
            "file": body.origin,
            "where": f"imports/{body.source}/",
            "before": [],
            "after": [],
            "source": body.source,
            "archives": [p.summary() for p in planned if p.state not in _WRITTEN or p.archive in kept],
        }
        line = memory.journal.commit(Change(entry))
    memory.index.catch_up_many([p.archive for p in written])
    if replaced:
        memory.index.rebuild_in_background()
    return failure if failure is not None else str(line["id"])


_SAID = {
    "new": "archived",
    "grown": "archived again (it grew)",
    "replaced": "archived again (it changed)",
    "unchanged": "unchanged, skipped",
    "erased": "erased before, not brought back",
}

_ENTRY_SAID = {
    "present": "already in {file}",
    "imported": "brought by an earlier import",
    "refused": "refused by the check",
    "noted": "noted (untrusted) and pending for {file}",
    "accepted": "accepted into {file}",
    "would-note": "would be noted (untrusted) and pending for {file}",
}


def _describe(body: MemoryImport, planned: list[archives.Planned], outcomes: list[entries.Outcome]) -> str:
    """What the owner reads: one line per conversation and per entry, then the counts."""
    would = "would be " if body.dry_run else ""
    lines = [f"{'dry run: ' if body.dry_run else ''}import from {body.source} ({body.origin})"]
    for item in planned:
        state = _SAID[item.state]
        if body.dry_run and item.state in _WRITTEN:
            state = f"{would}{state}"
        title = f" {item.title!r}" if item.title else ""
        lines.append(f"  {item.archive}{title}: {plural(item.records, 'record')}, {state}")
    for outcome in outcomes:
        said = _ENTRY_SAID[outcome.state].format(file=outcome.file)
        if outcome.state == "refused" or (outcome.state == "noted" and body.accept):
            said += f": {outcome.sentence}"
        if outcome.pending and outcome.state == "noted":
            said += f" ({outcome.pending}: bxctl memory accept {outcome.pending} --yes)"
        lines.append(f"  {outcome.place or outcome.file}: {said}")
    counts = {s: sum(1 for p in planned if p.state == s) for s in _SAID}
    summary = ", ".join(f"{n} {s}" for s, n in counts.items() if n)
    if planned:
        lines.append(f"conversations: {summary}")
    if outcomes:
        states = {s: sum(1 for o in outcomes if o.state == s) for s in _ENTRY_SAID}
        lines.append("entries: " + ", ".join(f"{n} {s}" for s, n in states.items() if n))
    return "\n".join(lines)
