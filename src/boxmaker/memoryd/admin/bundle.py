"""The owner's archive, export, import and replay (seed 003 sections 12.2, 13 and 20): ``archive`` runs
memoryd's daily archive now, ``export``/``import`` a bundle (`bundle.transfer`), ``replay`` rebuilds the
files into a new folder from the journal alone."""

from __future__ import annotations

from typing import Any

import msgspec

from boxmaker.memoryd.admin.arguments import path_arg
from boxmaker.memoryd.admin.command import Command
from boxmaker.memoryd.admin.replies import plural, refused
from boxmaker.memoryd.bundle.transfer import export, import_bundle
from boxmaker.memoryd.items.archive import archive_now
from boxmaker.memoryd.items.replay import replay_into
from boxmaker.memoryd.memory import Memory, excluded
from boxmaker.memoryd.sentences import Refusal
from boxmaker.memoryd.sentences import files as files_sentences
from boxmaker.proto.errors import InvalidBody
from boxmaker.proto.escape import escape
from boxmaker.proto.ids import OWNER_SESSION
from boxmaker.proto.messages import MemoryAdmin, MemoryAdminReply


def _archive(memory: Memory, request: MemoryAdmin) -> MemoryAdminReply:
    del request
    try:
        done = archive_now(memory.writer.lock, memory.items, memory.journal, memory.now, OWNER_SESSION)
    except OSError as exc:
        return refused(files_sentences.archive_unwritable(str(exc)))
    return MemoryAdminReply(done.sentence(), {"code": "ok", "edit": done.edit, "files": done.files})


def _export(memory: Memory, request: MemoryAdmin) -> MemoryAdminReply:
    omit = request.args.get("omit_withdrawn", False)
    if not isinstance(omit, bool):
        raise InvalidBody("memory_admin", 'export takes args {"omit_withdrawn": true or false}')
    path = path_arg(request)
    made = export(memory.writer, excluded(memory), path, omit)
    if isinstance(made, Refusal):
        return refused(made)
    text = (
        f"exported {plural(len(made.ids), 'item')} with {plural(len(made.controls), 'control')} to {path}"
        f" ({len(made.withdrawn):,} withdrawn, kept with their controls"
        + (f"; {len(made.omitted):,} withdrawn left out" if made.omitted else "")
        + ")"
    )
    data = {
        "code": "ok",
        "file": str(path),
        "items": made.ids,
        "withdrawn": made.withdrawn,
        "omitted": made.omitted,
        "controls": made.controls,
    }
    return MemoryAdminReply(escape(text), data)


def _import(memory: Memory, request: MemoryAdmin) -> MemoryAdminReply:
    """Import a bundle; its items untrusted unless args {"trusted": true}. The answer lists the
    withdrawals it added and every scope a new control left conflicting."""
    trusted = request.args.get("trusted", False)
    if not isinstance(trusted, bool):
        raise InvalidBody("memory_admin", 'import takes args {"trusted": true or false}')
    path = path_arg(request)
    done = import_bundle(memory.writer, memory.withdrawals.on_change, path, trusted)
    if isinstance(done, Refusal):
        return MemoryAdminReply(escape(done.sentence), {"code": done.code})
    plan, edit, whose = done
    honoured = trusted and whose == "this-home"
    trust = "labels kept: --trusted" if honoured else "untrusted"
    if trusted and not honoured:
        trust = files_sentences.trust_not_honoured(whose)
    text = (
        f"imported {plural(len(plan.captures), 'item')} ({trust}) and "
        f"{plural(len(plan.controls), 'control')} from {path.name} as {edit}"
    )
    if plan.skipped or plan.skipped_controls:
        text += (
            f"; already here and skipped: {plural(len(plan.skipped), 'item')}, "
            f"{plural(len(plan.skipped_controls), 'control')}"
        )
    added = [c["withdrawal_id"] for c in plan.controls if c["action"] == "withdraw"]
    if added:
        text += f"\nwithdrawals added: {', '.join(added)}"
    new = {c["withdrawal_id"] for c in plan.controls}
    conflicting: list[dict[str, Any]] = []
    try:
        chains = memory.controls.chains() if new else []
    except OSError:
        chains = []
    for chain in chains:
        if chain.state == "conflicting" and new & {r.withdrawal_id for r in chain.records}:
            scope = msgspec.to_builtins(chain.scope)
            conflicting.append(
                {"scope": scope, "heads": [h.withdrawal_id for h in chain.heads], "why": chain.why}
            )
            text += f"\nscope now conflicting (excluded; reconcile with bxctl memory controls): {chain.why}"
    data = {
        "code": "ok",
        "edit": edit,
        "items": [e["id"] for e in plan.captures],
        "controls": [c["withdrawal_id"] for c in plan.controls],
        "skipped": plan.skipped,
        "skipped_controls": plan.skipped_controls,
        "trusted": honoured,
        "signed": whose,
        "withdrawals_added": added,
        "conflicting": conflicting,
    }
    return MemoryAdminReply(escape(text), data)


def _replay(memory: Memory, request: MemoryAdmin) -> MemoryAdminReply:
    path = path_arg(request)
    done = replay_into(memory.journal, path, memory.exclusion_for)
    if isinstance(done, Refusal):
        return MemoryAdminReply(escape(done.sentence), {"code": done.code})
    text = f"replayed the journal into {path}: {plural(len(done), 'file')}"
    return MemoryAdminReply(
        escape("\n".join([text, *(f"  {f}" for f in done)])), {"code": "ok", "files": done}
    )


COMMANDS = (
    Command("archive", _archive, takes_arg=False),
    Command("export", _export, args=frozenset({"omit_withdrawn"})),
    Command("import", _import, args=frozenset({"trusted"})),
    Command("replay", _replay),
)
