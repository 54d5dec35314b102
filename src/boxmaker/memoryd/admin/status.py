"""The owner's views of what memoryd holds and serves: ``status``, ``log`` (the journal), ``files``
(each file against its limit, and what the block leaves out), ``show`` (the block) and ``search``
(M5a sections 5 and 10)."""

from __future__ import annotations

import os
import sqlite3
from typing import Any

from boxmaker.memoryd.admin.arguments import count
from boxmaker.memoryd.admin.command import Command
from boxmaker.memoryd.admin.edits import withdrawn_rule
from boxmaker.memoryd.admin.replies import plural
from boxmaker.memoryd.files.entries import CONVENTIONS, IDENTITY_FILES, SOUL_LIMIT, STEERING_LIMIT
from boxmaker.memoryd.files.provenance import identity_lines, unclassed_entries
from boxmaker.memoryd.files.store import STEERING, FileOverLimit, FileUnreadable
from boxmaker.memoryd.memory import Memory, block
from boxmaker.memoryd.sentences import Refusal, unavailable
from boxmaker.memoryd.withdrawal.controls import withdrawn_identity
from boxmaker.memoryd.write.revert import revertable
from boxmaker.proto.errors import InvalidBody
from boxmaker.proto.escape import escape, escape_line
from boxmaker.proto.messages import MemoryAdmin, MemoryAdminReply


def _status(memory: Memory, request: MemoryAdmin) -> MemoryAdminReply:
    del request
    data: dict[str, Any] = {
        "home": str(memory.config.home),
        "pid": os.getpid(),
        "review": memory.config.review,
        "max_class": memory.config.max_class.value,
        "sqlite": sqlite3.sqlite_version,
        "index_ready": memory.index.wait_ready(0),
    }
    review_state = "on" if memory.config.review else "off"
    try:
        counts = memory.index.counts()
    except sqlite3.Error as exc:
        data["index"] = None
        text = f"memoryd {os.getpid()} serving {memory.config.home}: the index cannot be read ({exc})"
        return MemoryAdminReply(f"{text}; review {review_state}{_health(memory, data)}", data)
    data["index"] = {"logs": counts.logs, "records": counts.records, "notes": counts.notes}
    data["index_rebuild"] = rebuild = memory.index.building()
    building = "" if data["index_ready"] else " (still catching up)"
    if rebuild is not None:
        why = f", {rebuild['reason']}" if rebuild["reason"] else ""
        building = f" (building it: {rebuild['rows']:,} rows so far{why})"  # first, again or by reindex
    text = (
        f"memoryd {os.getpid()} serving {memory.config.home}: {counts.records:,} records from "
        f"{counts.logs:,} logs and {counts.notes:,} notes indexed{building}; review {review_state}"
    )
    return MemoryAdminReply(text + _health(memory, data), data)


def _health(memory: Memory, data: dict[str, Any]) -> str:
    """The lines status adds for what the start-up check did with the journal's hash chain, damage
    found at start (`startcheck`) and an index behind the notes (a write the index could not take),
    also set in `data` (``chain``, ``damage``, ``index_behind``)."""
    findings = memory.checkpoints.findings
    data["damage"] = [{"file": f.file, "text": f.sentence} for f in findings]
    data["index_behind"] = memory.index.behind or None
    checked = memory.checkpoints.chain
    data["chain"] = None if checked is None else {**checked.data(), "text": checked.sentence}
    lines = "" if checked is None else f"\n{checked.sentence}"
    if findings:
        more = f" (and {len(findings) - 1} more: bxctl memory repair lists them)" if len(findings) > 1 else ""
        lines += f"\nDAMAGED: {findings[0].sentence}{more}"
    if memory.index.behind:
        lines += (
            f"\nINDEX BEHIND: notes were written that the index could not take ({memory.index.behind}); "
            "the next recall indexes them (runbook: disk-full)"
        )
    return lines


def _log(memory: Memory, request: MemoryAdmin) -> MemoryAdminReply:
    wanted = count(request.arg or "20", "log")
    lines: list[dict[str, Any]] = []
    for entry in memory.journal.entries_newest_first():
        if len(lines) >= wanted:
            break
        lines.append(entry)
    lines.reverse()
    if not lines:
        return MemoryAdminReply("(the journal is empty)", [])
    try:
        now = revertable(memory.writer, lines, withdrawn_rule(memory))
    except OSError:
        now = set()  # the controls cannot be read: revert would say so; no edit is shown revertable
    shown = [_listed({**line, "revertable": str(line.get("id")) in now}) for line in lines]
    return MemoryAdminReply("\n".join(_journal_text(e) for e in shown), shown)


#: In a `log` listing, a list of more items than this (an export's or an archive run's ids: 100,000 in a
#: large home) shows its first ones, and the line's ``cut`` names each such list's length, so any number
#: of lines fits a frame.
LOG_LIST = 20


def _listed(line: dict[str, Any]) -> dict[str, Any]:
    cut: dict[str, int] = {}

    def shorten(value: Any, where: str) -> Any:
        if isinstance(value, list):
            if len(value) > LOG_LIST:
                cut[where] = len(value)
                value = value[:LOG_LIST]
            return [shorten(v, f"{where}[{n}]") for n, v in enumerate(value)]
        if isinstance(value, dict):
            return {k: shorten(v, f"{where}.{k}") for k, v in value.items()}
        return value

    # before and after are identity entries, bounded by their files' limits, and shown in full
    listed: dict[str, Any] = {k: v if k in ("before", "after") else shorten(v, k) for k, v in line.items()}
    if cut:
        listed["cut"] = cut
    return listed


def _journal_text(entry: dict[str, Any]) -> str:
    session = escape_line(str(entry.get("session", "?")))
    who = "the owner" if session == "owner" else f"session {session}"
    fields = [escape_line(str(entry.get(k, "?"))) for k in ("id", "time", "action", "where")]
    what = fields[2] if fields[3] in ("", fields[2]) else f"{fields[2]} {fields[3]}"  # not "export export"
    head = f"{fields[0]}  {fields[1]}  {what}  by {who}"
    if entry.get("untrusted"):
        head += " (untrusted)"
    for key in ("pending", "undoes", "reverts"):
        if entry.get(key):
            head += f"  {key} {entry[key]}"
    if entry.get("revertable"):
        head += "  (revertable)"
    before, after = _texts(entry.get("before")), _texts(entry.get("after"))
    lines = [head]
    lines += [f"  - {escape_line(text)}" for text in before if text not in after]
    lines += [f"  + {escape_line(text)}" for text in after if text not in before]
    notes = entry.get("notes")
    for note in notes if isinstance(notes, list) else []:
        if isinstance(note, dict):
            lines.append(f"  > notes.md: {escape_line(str(note.get('header', '')))}")
    return "\n".join(lines)


def _texts(value: object) -> list[str]:
    return [str(v) for v in value] if isinstance(value, list) else []


def _files(memory: Memory, request: MemoryAdmin) -> MemoryAdminReply:
    del request
    rows: list[dict[str, Any]] = []
    soul: str | None = None
    try:
        soul = memory.store.read_soul()
        rows.append({"file": "soul.md", "size": len(soul), "limit": SOUL_LIMIT, "entries": None})
    except (FileUnreadable, FileOverLimit) as exc:
        rows.append({"file": "soul.md", "problem": str(exc)})
    try:
        conventions = memory.store.read_conventions()
        rows.append(
            {
                "file": CONVENTIONS.name,
                "size": conventions.size,
                "limit": CONVENTIONS.limit,
                "entries": len(conventions.entries),
            }
        )
        if soul is not None:
            both = len(soul) + conventions.size
            rows.append({"file": STEERING, "size": both, "limit": STEERING_LIMIT, "entries": None})
    except FileUnreadable as exc:
        rows.append({"file": CONVENTIONS.name, "problem": str(exc)})
    for spec in IDENTITY_FILES.values():
        try:
            file = memory.store.read_identity(spec)
            rows.append(
                {"file": spec.name, "size": file.size, "limit": spec.limit, "entries": len(file.entries)}
            )
        except FileUnreadable as exc:
            rows.append({"file": spec.name, "problem": str(exc)})
    rows.append({"file": "notes.md", "size": None, "limit": None, "entries": memory.index.counts().notes})
    left_out: list[dict[str, str]] = []
    try:
        served = block(memory)
        left_out = [{"file": i.file, "rule": i.rule, "entry": i.entry} for i in served.left_out]
    except Exception as exc:
        rows.append({"file": "(block)", "problem": str(exc)})
    lines = [_file_line(row) for row in rows]
    if left_out:
        lines.append("left out of the memory block (they fail the write check, or are withdrawn):")
        lines += [f"  {i['file']} ({i['rule']}): {escape_line(i['entry'])}" for i in left_out]
    unclassed = _unclassed(memory, rows)
    if unclassed:
        lines.append(
            "written before the identity-write rule by a session holding data above private "
            "(keep them, or remove them by hand):"
        )
        for u in unclassed:
            where = f"{u['file']} ({u['class']}, edit {u['edit']}, session {u['session']})"
            lines.append(f"  {where}: {escape_line(u['entry'])}")
    data = {"files": rows, "left_out": left_out, "unclassed": unclassed}
    return MemoryAdminReply("\n".join(lines), data)


def _unclassed(memory: Memory, rows: list[dict[str, Any]]) -> list[dict[str, str]]:
    """Identity entries a session above private wrote before the rule (`files.provenance`)."""
    readable = {r["file"] for r in rows if "problem" not in r}
    current = {
        spec.name: memory.store.read_identity(spec).entries
        for spec in IDENTITY_FILES.values()
        if spec.name in readable
    }
    if not any(current.values()):  # no entry: nothing to name
        return []
    lines = identity_lines(memory.journal.edits_dir, current)
    found = unclassed_entries(lines, current, memory.config.layout.sessions)
    return [
        {"file": u.file, "entry": u.entry, "edit": u.edit, "session": u.session, "class": u.data_class.value}
        for u in found
    ]


def _file_line(row: dict[str, Any]) -> str:
    if "problem" in row:
        return f"{row['file']:<10} PROBLEM: {row['problem']}"
    if row["limit"] is None:
        return f"{row['file']:<10} {plural(row['entries'], 'note')} (no limit)"
    flag = "  OVER LIMIT" if row["size"] > row["limit"] else ""
    entries = "" if row["entries"] is None else f", {plural(row['entries'], 'entry', 'entries')}"
    return f"{row['file']:<10} {row['size']:,} of {row['limit']:,} characters{entries}{flag}"


def _show(memory: Memory, request: MemoryAdmin) -> MemoryAdminReply:
    del request
    served = block(memory)
    left_out = [{"file": i.file, "rule": i.rule, "entry": i.entry} for i in served.left_out]
    return MemoryAdminReply(escape(served.text), {"text": served.text, "left_out": left_out})


def _search(memory: Memory, request: MemoryAdmin) -> MemoryAdminReply:
    k = request.args.get("k", 10)
    if not isinstance(k, int) or isinstance(k, bool) or not 1 <= k <= 50:
        raise InvalidBody("memory_admin", "search takes k from 1 to 50")
    try:
        hidden = withdrawn_identity(memory.controls, memory.store, memory.journal)
    except (OSError, FileUnreadable) as exc:
        refusal = unavailable(str(exc), "nothing was searched")
        return MemoryAdminReply(refusal.sentence, {"code": refusal.code, "hits": []})
    result = memory.recaller.owner_search(request.arg, k, memory.store, hidden)
    if isinstance(result, Refusal):
        return MemoryAdminReply(result.sentence, {"code": result.code, "hits": []})
    return MemoryAdminReply(escape(result.text), {"code": "ok", "hits": result.data})


COMMANDS = (
    Command("status", _status, takes_arg=False),
    Command("log", _log),
    Command("files", _files, takes_arg=False),
    Command("show", _show, takes_arg=False),
    Command("search", _search, args=frozenset({"k"})),
)
