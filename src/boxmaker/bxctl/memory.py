"""``bxctl memory …`` and ``bxctl reindex``: the owner's view of memoryd (M5a section 10; DESIGN 10.5).

Each command talks to memoryd's admin socket (``--memory-socket``, default
``{home}/run/owner-memory/admin.sock``). Entries are printed escaped; listings take ``--json``.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import Any

import click

from boxmaker.bxctl import client
from boxmaker.bxctl.options import ITEM_KINDS, json_option, memory_socket_option, memory_socket_path
from boxmaker.bxctl.state import State, pass_state
from boxmaker.proto.messages import Reindex, Reindexed


@click.command(name="reindex")
@memory_socket_option
@pass_state
def reindex(state: State, memory_socket: Path | None) -> None:
    """Rebuild memoryd's index from sessions/ and notes.md.

    \b
    Example:
        bxctl reindex
        reindexed: 42 logs, 1,208 records, 7 notes
    """
    path = memory_socket_path(state, memory_socket)
    reply = client.request("memoryd", path, Reindex(), timeout=3600.0)
    if not isinstance(reply, Reindexed):
        raise client.RoleRefused(f"memoryd answered {type(reply).__name__} to reindex")
    click.echo(
        f"reindexed: {_plural(reply.logs, 'log')}, {_plural(reply.records, 'record')}, "
        f"{_plural(reply.notes, 'note')}"
    )


def _plural(count: int, word: str) -> str:
    return f"{count:,} {word}{'' if count == 1 else 's'}"


@click.group(name="memory")
def memory() -> None:
    """Look at and steer the agent's memory.

    \b
    Example:
        bxctl memory files
        bxctl memory search "launch window"
    """


@memory.command(name="log")
@click.argument("count", required=False, type=click.IntRange(1, 100_000), default=20)
@memory_socket_option
@json_option
@pass_state
def memory_log(state: State, count: int, memory_socket: Path | None, as_json: bool) -> None:
    """List the newest COUNT memory edits (default 20), oldest first.

    \b
    Example:
        bxctl memory log 5
    """
    client.emit(client.admin(memory_socket_path(state, memory_socket), "log", str(count)), as_json)


@memory.command(name="undo")
@click.argument("edit_id", required=False, default="")
@memory_socket_option
@json_option
@pass_state
def memory_undo(state: State, edit_id: str, memory_socket: Path | None, as_json: bool) -> None:
    """Undo EDIT_ID (default: the latest edit of memory.md or user.md).

    It must be the latest edit of its file, and the file must still hold what it left.

    \b
    Example:
        bxctl memory undo 2026-09-24-0003
    """
    client.emit(client.admin(memory_socket_path(state, memory_socket), "undo", edit_id), as_json)


@memory.command(name="pending")
@memory_socket_option
@json_option
@pass_state
def memory_pending(state: State, memory_socket: Path | None, as_json: bool) -> None:
    """List writes waiting for review (when [memory] review = true).

    \b
    Example:
        bxctl memory pending --json
    """
    client.emit(client.admin(memory_socket_path(state, memory_socket), "pending"), as_json)


@memory.command(name="accept")
@click.argument("pending_id")
@memory_socket_option
@json_option
@pass_state
def memory_accept(state: State, pending_id: str, memory_socket: Path | None, as_json: bool) -> None:
    """Apply the staged write PENDING_ID, with every check, to the file as it is now.

    \b
    Example:
        bxctl memory accept p-2026-09-24-0001
    """
    client.emit(client.admin(memory_socket_path(state, memory_socket), "accept", pending_id), as_json)


@memory.command(name="reject")
@click.argument("pending_id")
@memory_socket_option
@json_option
@pass_state
def memory_reject(state: State, pending_id: str, memory_socket: Path | None, as_json: bool) -> None:
    """Discard the staged write PENDING_ID (journalled).

    \b
    Example:
        bxctl memory reject p-2026-09-24-0001
    """
    client.emit(client.admin(memory_socket_path(state, memory_socket), "reject", pending_id), as_json)


@memory.command(name="files")
@memory_socket_option
@json_option
@pass_state
def memory_files(state: State, memory_socket: Path | None, as_json: bool) -> None:
    """Show each memory file's size against its limit, and entries the block leaves out.

    \b
    Example:
        bxctl memory files
    """
    client.emit(client.admin(memory_socket_path(state, memory_socket), "files"), as_json)


@memory.command(name="show")
@memory_socket_option
@json_option
@pass_state
def memory_show(state: State, memory_socket: Path | None, as_json: bool) -> None:
    """Print the memory block a new session would get now.

    \b
    Example:
        bxctl memory show
    """
    client.emit(client.admin(memory_socket_path(state, memory_socket), "show"), as_json)


@memory.command(name="search")
@click.argument("query")
@click.option("-k", "k", type=click.IntRange(1, 50), default=10, show_default=True, help="Hits to show.")
@memory_socket_option
@json_option
@pass_state
def memory_search(state: State, query: str, k: int, memory_socket: Path | None, as_json: bool) -> None:
    """Search what is remembered, identity entries included, with each hit's source tag.

    \b
    Example:
        bxctl memory search "what time zone" -k 5
    """
    reply = client.admin(memory_socket_path(state, memory_socket), "search", query, {"k": k})
    client.emit(reply, as_json)


_UNDECODABLE = re.compile("[\udc80-\udcff]")


def _text(text: str) -> str:
    """The owner's TEXT: the argument, or standard input for "-", as UTF-8. Standard input is read
    as files edited by hand are (a leading BOM dropped, CRLF as LF); an argument is taken as it is.

    Raises:
        click.BadParameter: the bytes are not UTF-8 (Python carries them as lone surrogates).
    """
    if text == "-":
        data = sys.stdin.buffer.read()
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise click.BadParameter(
                f"standard input is not UTF-8 (byte {exc.start:,})", param_hint="TEXT"
            ) from None
        return text.removeprefix("\ufeff").replace("\r\n", "\n")
    if _UNDECODABLE.search(text):
        raise click.BadParameter("the argument is not UTF-8", param_hint="TEXT")
    return text


@memory.command(name="add")
@click.option(
    "--file",
    "file",
    type=click.Choice(["memory", "user"]),
    required=True,
    help="memory.md (about the work) or user.md (about you).",
)
@click.argument("text")
@memory_socket_option
@json_option
@pass_state
def memory_add(state: State, file: str, text: str, memory_socket: Path | None, as_json: bool) -> None:
    """Add TEXT as an entry of memory.md or user.md yourself ("-" reads standard input).

    The same rules apply as to the agent's writes; the journal names you as the writer.

    \b
    Example:
        bxctl memory add --file user "Prefers answers in UTC."
    """
    args = {"file": file, "text": _text(text)}
    client.emit(client.admin(memory_socket_path(state, memory_socket), "add", "", args), as_json)


_STATUSES = ("active", "superseded", "pending-cleanup", "stale")
_CONFIDENCES = click.Choice(["confirmed", "observed-once", "inferred", "unknown"])


@memory.command(name="note")
@click.argument("text")
@click.option("--kind", type=ITEM_KINDS, help="state (a current value) or knowledge (the default).")
@click.option("--subject", help="What a state note is the current value of, e.g. host:public-ip.")
@click.option("--confidence", type=_CONFIDENCES, help="epistemic-status-v1.")
@click.option("--scope", help="Where the note applies, e.g. environment.")
@memory_socket_option
@json_option
@pass_state
def memory_note(
    state: State,
    *,
    text: str,
    kind: str | None,
    subject: str | None,
    confidence: str | None,
    scope: str | None,
    memory_socket: Path | None,
    as_json: bool,
) -> None:
    """Append TEXT to notes.md as your own note ("-" reads standard input); it becomes an item.

    A state note needs --subject; two state items of one subject are linked by supersede.

    \b
    Example:
        bxctl memory note "The staging server moved to rack 4."
        bxctl memory note --kind state --subject host:staging "Staging is 10.0.0.7."
    """
    args = {"kind": kind, "subject": subject, "confidence": confidence, "scope": scope}
    fields = {k: v for k, v in args.items() if v is not None}
    client.emit(client.admin(memory_socket_path(state, memory_socket), "note", _text(text), fields), as_json)


@memory.command(name="items")
@click.option("--all", "show_all", is_flag=True, help="Include erased items (no text).")
@click.option("--kind", type=ITEM_KINDS, help="Only this kind.")
@click.option("--status", type=click.Choice(list(_STATUSES)), help="Only this status.")
@click.option("--subject", help="Only this subject (exactly).")
@memory_socket_option
@json_option
@pass_state
def memory_items(
    state: State,
    *,
    show_all: bool,
    kind: str | None,
    status: str | None,
    subject: str | None,
    memory_socket: Path | None,
    as_json: bool,
) -> None:
    """List the memory items: id, date, kind, status, subject, label, Source and text.

    A superseded item shows the item that replaced it (superseded -> mem-...). A withdrawn item
    shows (withdrawn) in place of its text; `bxctl memory item ID` shows it, marked.

    \b
    Example:
        bxctl memory items --kind state
        bxctl memory items --subject host:staging --json
    """
    args: dict[str, Any] = {"all": show_all}
    chosen = {"kind": kind, "status": status, "subject": subject}
    args.update({k: v for k, v in chosen.items() if v is not None})
    client.emit(client.admin(memory_socket_path(state, memory_socket), "items", "", args), as_json)


@memory.command(name="item")
@click.argument("item_id")
@memory_socket_option
@json_option
@pass_state
def memory_item(state: State, item_id: str, memory_socket: Path | None, as_json: bool) -> None:
    """Show one item with every field: id, kind, subject, Scope, Status, Source, Confidence, label.

    A withdrawn item's text is shown here, marked withdrawn, because you asked for it by id; listings
    and recall keep it out.

    \b
    Example:
        bxctl memory item mem-2026-11-29-001
    """
    client.emit(client.admin(memory_socket_path(state, memory_socket), "item", item_id), as_json)


@memory.command(name="supersede")
@click.argument("old")
@click.argument("new")
@memory_socket_option
@json_option
@pass_state
def memory_supersede(state: State, old: str, new: str, memory_socket: Path | None, as_json: bool) -> None:
    """Mark state item OLD as superseded by NEW (same subject, both active, NEW captured later).

    OLD stays as history and points to NEW.

    \b
    Example:
        bxctl memory supersede mem-2026-11-29-001 mem-2026-12-02-003
    """
    args = {"old": old, "new": new}
    client.emit(client.admin(memory_socket_path(state, memory_socket), "supersede", "", args), as_json)


@memory.command(name="status")
@click.argument("item_id")
@click.argument("status", type=click.Choice(["active", "stale", "pending-cleanup"]))
@memory_socket_option
@json_option
@pass_state
def memory_status(state: State, item_id: str, status: str, memory_socket: Path | None, as_json: bool) -> None:
    """Set ITEM_ID's status: stale (no longer applies), pending-cleanup, or back to active.

    \b
    Example:
        bxctl memory status mem-2026-11-29-001 stale
    """
    reply = client.admin(memory_socket_path(state, memory_socket), "item-status", item_id, {"status": status})
    client.emit(reply, as_json)


@memory.command(name="tiers")
@click.option(
    "--untrusted",
    is_flag=True,
    help="Include the text of untrusted notes (by default they are listed by key and header only).",
)
@memory_socket_option
@json_option
@pass_state
def memory_tiers(state: State, untrusted: bool, memory_socket: Path | None, as_json: bool) -> None:
    """List each identity entry and note with how often agent recalls found it.

    Hits count recalls made by agent sessions only (not your searches, not benchmark runs); notes
    are listed most found first, then newest. The first line is the strictest label of what the
    listing shows.

    \b
    Example:
        bxctl memory tiers
        bxctl memory tiers --untrusted --json
    """
    reply = client.admin(memory_socket_path(state, memory_socket), "tiers", "", {"untrusted": untrusted})
    client.emit(reply, as_json)


# Withdrawal (seed 003 sections 12.1-12.2) -------------------------------------------------------------

REASONS = ["failed-exploration", "owner-decision", "mistaken", "poisoned", "reconciliation", "other"]


@memory.command(name="withdraw")
@click.option("--item", "items", multiple=True, help="An item id mem-YYYY-MM-DD-NNN (repeatable).")
@click.option(
    "--archive",
    "archives",
    multiple=True,
    help="An archive ref archive/YYYY-MM-DD.md or archive/YYYY-MM-DD.md#mem-… (repeatable).",
)
@click.option(
    "--session",
    "sessions",
    multiple=True,
    help="A session id, or one record sessions/<id>/<epoch>.jsonl#<line> (repeatable).",
)
@click.option(
    "--reason", type=click.Choice(REASONS), default="owner-decision", show_default=True, help="Why."
)
@click.option(
    "--supersedes",
    default=None,
    help="The prior controlling event of the same exact scope (required when there is one).",
)
@memory_socket_option
@json_option
@pass_state
def memory_withdraw(
    state: State,
    *,
    items: tuple[str, ...],
    archives: tuple[str, ...],
    sessions: tuple[str, ...],
    reason: str,
    supersedes: str | None,
    memory_socket: Path | None,
    as_json: bool,
) -> None:
    """Withdraw items, archive refs or sessions from every use, reversibly, and print the receipt.

    The content is kept (for audit and reinstatement) but left out of recall, the memory block, the
    index and listings until reinstated. What never entered memory is not recorded: the receipt
    then says "no capture".

    \b
    Example:
        bxctl memory withdraw --item mem-2026-11-29-003 --reason failed-exploration
        bxctl memory withdraw --session chat-abc --session sessions/job-x-t1/0.jsonl#7
    """
    args: dict[str, Any] = {
        "items": list(items),
        "archives": list(archives),
        "sessions": list(sessions),
        "reason": reason,
        "supersedes": supersedes,
    }
    client.emit(client.admin(memory_socket_path(state, memory_socket), "withdraw", "", args), as_json)


@memory.command(name="reinstate")
@click.argument("withdrawal_id")
@click.option(
    "--reason", type=click.Choice(REASONS), default="owner-decision", show_default=True, help="Why."
)
@memory_socket_option
@json_option
@pass_state
def memory_reinstate(
    state: State, withdrawal_id: str, reason: str, memory_socket: Path | None, as_json: bool
) -> None:
    """Reinstate WITHDRAWAL_ID: its exact scope becomes eligible again (a new control event).

    \b
    Example:
        bxctl memory reinstate memwd-2026-11-29-001
    """
    reply = client.admin(
        memory_socket_path(state, memory_socket), "reinstate", withdrawal_id, {"reason": reason}
    )
    client.emit(reply, as_json)


@memory.command(name="controls")
@memory_socket_option
@json_option
@pass_state
def memory_controls(state: State, memory_socket: Path | None, as_json: bool) -> None:
    """List every withdrawal control by scope with its state: in-force, reinstated, superseded, or
    conflicting (needs reconciliation; the scope stays excluded).

    \b
    Example:
        bxctl memory controls --json
    """
    client.emit(client.admin(memory_socket_path(state, memory_socket), "controls"), as_json)


# Seed 003: the archive, export/import, replay (issue 6) -------------------------------------


@memory.command(name="archive")
@memory_socket_option
@json_option
@pass_state
def memory_archive(state: State, memory_socket: Path | None, as_json: bool) -> None:
    """Archive every captured item not yet archived, now (memoryd's timer does it daily).

    Appends to memory/archive/YYYY-MM-DD.md (the capture's date); files are never rewritten.

    \b
    Example:
        bxctl memory archive
        archived 3 items to archive/2026-09-24.md (2026-09-24-0007)
    """
    client.emit(client.admin(memory_socket_path(state, memory_socket), "archive"), as_json)


@memory.command(name="export")
@click.argument("file", type=click.Path(path_type=Path, dir_okay=False))
@click.option(
    "--omit-withdrawn",
    is_flag=True,
    help="Leave withdrawn items out (by default they go with the controls that withdraw them).",
)
@memory_socket_option
@json_option
@pass_state
def memory_export(
    state: State, file: Path, omit_withdrawn: bool, memory_socket: Path | None, as_json: bool
) -> None:
    """Write the item store, with its withdrawal controls, to FILE (a new file; JSON, 0600).

    memoryd writes the file and journals the export; erased items are never exported.

    \b
    Example:
        bxctl memory export ~/memory-2026-09-24.json
    """
    args = {"omit_withdrawn": omit_withdrawn}
    reply = client.admin(memory_socket_path(state, memory_socket), "export", str(file.absolute()), args)
    client.emit(reply, as_json)


@memory.command(name="import")
@click.argument("file", type=click.Path(path_type=Path, dir_okay=False))
@click.option(
    "--trusted",
    is_flag=True,
    help="The bundle is yours and unmodified: keep its labels (by default every item is untrusted).",
)
@memory_socket_option
@json_option
@pass_state
def memory_import(state: State, file: Path, trusted: bool, memory_socket: Path | None, as_json: bool) -> None:
    """Import a bundle written by bxctl memory export: checked whole first, or refused.

    Every imported item is untrusted unless --trusted, and is marked imported. Items already here
    with the same text are skipped; withdrawn items come with their controls; a control that would
    reinstate or replace a withdrawal of this memory is refused. The answer lists the withdrawals
    added and any scope left conflicting.

    \b
    Example:
        bxctl memory import ~/memory-2026-09-24.json
    """
    args = {"trusted": trusted}
    reply = client.admin(memory_socket_path(state, memory_socket), "import", str(file.absolute()), args)
    client.emit(reply, as_json)


@memory.command(name="replay")
@click.option(
    "--into",
    "into",
    type=click.Path(path_type=Path, file_okay=False),
    required=True,
    help="A new or empty folder.",
)
@memory_socket_option
@json_option
@pass_state
def memory_replay(state: State, into: Path, memory_socket: Path | None, as_json: bool) -> None:
    """Rebuild the memory files from the edit journal alone into DIR, to compare with memory/.

    \b
    Example:
        bxctl memory replay --into /tmp/replayed && diff -r /tmp/replayed ~/.local/share/boxmaker/memory
    """
    client.emit(
        client.admin(memory_socket_path(state, memory_socket), "replay", str(into.absolute())), as_json
    )


# Skeptical recall, review and metamemory (issue 7; seed 003 sections 15.2.1, 16, 23) ---------------


@memory.command(name="reconcile")
@click.argument("subject")
@click.option("--keep", required=True, help="The item id that is the current value.")
@memory_socket_option
@json_option
@pass_state
def memory_reconcile(
    state: State, subject: str, keep: str, memory_socket: Path | None, as_json: bool
) -> None:
    """Resolve a conflict: every other active state item of SUBJECT is superseded by --keep.

    The others stay as history (journalled as one reconcile). Recall shows a conflict until then.

    \b
    Example:
        bxctl memory reconcile nas:ip --keep mem-2026-11-29-002
    """
    reply = client.admin(memory_socket_path(state, memory_socket), "reconcile", subject, {"keep": keep})
    client.emit(reply, as_json)


@memory.command(name="review")
@memory_socket_option
@json_option
@pass_state
def memory_review(state: State, memory_socket: Path | None, as_json: bool) -> None:
    """Print a cleanup plan; nothing is changed.

    Sections: repeatedly misleading items first, index length, pending cleanup, duplicates,
    conflicts, steering/memory boundary, withdrawal chains, archive not yet distilled, schema drift,
    topics without triggers; each says which command to run.

    \b
    Example:
        bxctl memory review
    """
    client.emit(client.admin(memory_socket_path(state, memory_socket), "review"), as_json)


_VERDICTS = click.Choice(["helpful", "misleading", "neutral", "unknown"])
_ROLES = click.Choice(
    ["background", "action-premise", "constraint", "analogy", "conflict-source", "verification-target"]
)


@memory.command(name="feedback")
@click.option("--item", "items", multiple=True, help="An item id (repeatable). Alone: list its feedback.")
@click.option("--retrieval", help="The retrieval id (memret-...) to record feedback on.")
@click.option("--verdict", type=_VERDICTS, help="How the items served (with --retrieval).")
@click.option("--role", type=_ROLES, help="How they were used (default: the retrieval's, background).")
@click.option("--confidence", type=click.Choice(["low", "medium", "high"]), help="Attribution (default low).")
@click.option("--evidence", multiple=True, help="An evidence reference (repeatable, at most 10).")
@click.option("--outcome", help="What happened, at most 300 characters.")
@click.option("--decision", help="The action or decision taken, at most 300 characters.")
@memory_socket_option
@json_option
@pass_state
def memory_feedback(
    state: State,
    *,
    items: tuple[str, ...],
    retrieval: str | None,
    verdict: str | None,
    role: str | None,
    confidence: str | None,
    evidence: tuple[str, ...],
    outcome: str | None,
    decision: str | None,
    memory_socket: Path | None,
    as_json: bool,
) -> None:
    """Record how a recall's items served (--retrieval, --verdict), or list an item's feedback (--item).

    Feedback changes review priority only, never an item.

    \b
    Example:
        bxctl memory feedback --item mem-2026-11-20-001
        bxctl memory feedback --retrieval memret-2026-11-29-003 --verdict misleading --outcome "Wrong host."
    """
    path = memory_socket_path(state, memory_socket)
    if retrieval is None:
        if len(items) != 1 or verdict is not None:
            raise click.UsageError("list with exactly one --item, or record with --retrieval and --verdict")
        client.emit(client.admin(path, "feedback-of", items[0]), as_json)
        return
    if verdict is None:
        raise click.UsageError("--retrieval needs --verdict")
    args: dict[str, Any] = {"retrieval": retrieval, "verdict": verdict, "items": list(items)}
    chosen = {"role": role, "confidence": confidence, "outcome": outcome, "decision": decision}
    args.update({k: v for k, v in chosen.items() if v is not None})
    if evidence:
        args["evidence"] = list(evidence)
    client.emit(client.admin(path, "feedback", "", args), as_json)


# Autodream (seed 003 section 14): `bxctl memory warm`, `bxctl memory dream show/apply/discard`.


@memory.command(name="warm")
@click.argument("item_id")
@memory_socket_option
@json_option
@pass_state
def memory_warm(state: State, item_id: str, memory_socket: Path | None, as_json: bool) -> None:
    """Undo autodream's cooling of knowledge item ITEM_ID: it goes back under Facts and lessons.

    \b
    Example:
        bxctl memory warm mem-2026-11-29-001
    """
    client.emit(client.admin(memory_socket_path(state, memory_socket), "warm", item_id), as_json)


@memory.group(name="dream")
def memory_dream() -> None:
    """Staged autodream passes ([dream] stage = true in memoryd.toml): show, apply, discard.

    \b
    Example:
        bxctl memory dream show
    """


@memory_dream.command(name="show")
@click.argument("session", required=False, default="")
@memory_socket_option
@json_option
@pass_state
def memory_dream_show(state: State, session: str, memory_socket: Path | None, as_json: bool) -> None:
    """List the staged passes, or the actions SESSION (job-dream-t...) staged.

    \b
    Example:
        bxctl memory dream show
        bxctl memory dream show job-dream-t1790000000
    """
    client.emit(client.admin(memory_socket_path(state, memory_socket), "dream-show", session), as_json)


@memory_dream.command(name="apply")
@click.argument("session")
@memory_socket_option
@json_option
@pass_state
def memory_dream_apply(state: State, session: str, memory_socket: Path | None, as_json: bool) -> None:
    """Apply each action SESSION staged, with every check, against memory as it is now.

    Says per action what happened; a refused action changes nothing and the others still apply.

    \b
    Example:
        bxctl memory dream apply job-dream-t1790000000
    """
    client.emit(client.admin(memory_socket_path(state, memory_socket), "dream-apply", session), as_json)


@memory_dream.command(name="discard")
@click.argument("session")
@memory_socket_option
@json_option
@pass_state
def memory_dream_discard(state: State, session: str, memory_socket: Path | None, as_json: bool) -> None:
    """Close the staged pass SESSION without applying any of it.

    \b
    Example:
        bxctl memory dream discard job-dream-t1790000000
    """
    client.emit(client.admin(memory_socket_path(state, memory_socket), "dream-discard", session), as_json)


# Erasure (seed 003 section 12.3): `bxctl memory erase`, `bxctl memory erasures` (module `erase`).
from boxmaker.bxctl.erase import memory_erase, memory_erasures  # noqa: E402

memory.add_command(memory_erase)
memory.add_command(memory_erasures)

# Promotion (seed 003 sections 17 and 23.5): `bxctl memory proposals` (module `proposals`).
from boxmaker.bxctl.proposals import memory_proposals  # noqa: E402

memory.add_command(memory_proposals)
