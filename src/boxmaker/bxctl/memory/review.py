"""``bxctl memory review``, ``tiers`` and ``feedback``: skeptical recall, review and metamemory (issue 7;
seed 003 sections 15.2.1, 16 and 23; M5d section 4.4).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from boxmaker.bxctl import client
from boxmaker.bxctl.options import json_option, memory_socket_option, memory_socket_path
from boxmaker.bxctl.progress import with_progress
from boxmaker.bxctl.state import State, pass_state
from boxmaker.proto.labels import DataClass, Label
from boxmaker.proto.messages import MemoryAdminReply


@click.command(name="review")
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


@click.command(name="tiers")
@click.option(
    "--untrusted",
    is_flag=True,
    help="Include the text of untrusted notes (by default they are listed by key and header only).",
)
@click.option(
    "--limit",
    type=click.IntRange(min=0),
    default=200,
    show_default=True,
    help="Only the first N notes of the order (0: every one, fetched page by page).",
)
@click.option("--offset", type=click.IntRange(min=0), default=0, help="Skip the first N notes of the order.")
@memory_socket_option
@json_option
@pass_state
def memory_tiers(
    state: State, *, untrusted: bool, limit: int, offset: int, memory_socket: Path | None, as_json: bool
) -> None:
    """List each identity entry and note with how often agent recalls found it.

    Hits count recalls made by agent sessions only (not your searches, not benchmark runs); notes
    are listed most found first, then newest, the first 200 unless --limit says otherwise. The first
    line is the strictest label of what the listing shows (of each page, with --limit 0).

    \b
    Example:
        bxctl memory tiers
        bxctl memory tiers --limit 0 --json
        bxctl memory tiers --untrusted --offset 200
    """
    path = memory_socket_path(state, memory_socket)
    args: dict[str, Any] = {"untrusted": untrusted, "offset": offset, "limit": limit}
    reply = client.admin(path, "tiers", "", args)
    if limit or not isinstance(reply.data, dict) or reply.data.get("next_offset") is None:
        client.emit(reply, as_json)
        return
    if as_json:  # one JSON document at the end: a spinner says what is happening meanwhile
        pages = with_progress("listing notes by hits", lambda: _rest(path, args, reply, None))
        client.emit(MemoryAdminReply("", _joined([p.data for p in pages])), True)
    else:  # every page printed as it comes
        client.emit(reply, False)
        _rest(path, args, reply, lambda page: client.emit(page, False))


def _rest(
    path: Path,
    args: dict[str, Any],
    reply: MemoryAdminReply,
    shown: Callable[[MemoryAdminReply], None] | None,
) -> list[MemoryAdminReply]:
    """Every page of the listing from `reply` on (one frame holds a page: the next is asked for
    until the last), each handed to `shown` as it comes."""
    pages = [reply]
    while isinstance(reply.data, dict) and isinstance(reply.data.get("next_offset"), int):
        args["offset"] = reply.data["next_offset"]
        reply = client.admin(path, "tiers", "", args)
        if shown is not None:
            shown(reply)
        pages.append(reply)
    return pages


def _joined(pages: list[Any]) -> Any:
    """The pages' data as one listing: the first page's entries, every page's notes, the strictest
    label (a refused page is the answer)."""
    if not all(isinstance(p, dict) and "notes" in p for p in pages):
        return next(p for p in pages if not (isinstance(p, dict) and "notes" in p))
    label = Label(DataClass.PRIVATE, False)
    for page in pages:
        shown = page["label"]
        label = label.stricter(Label(DataClass(shown["class"]), bool(shown["untrusted"])))
    joined = dict(pages[0])
    joined["label"] = {"class": label.data_class.value, "untrusted": label.untrusted}
    joined["notes"] = [row for page in pages for row in page["notes"]]
    joined["next_offset"] = None
    return joined


_VERDICTS = click.Choice(["helpful", "misleading", "neutral", "unknown"])
_ROLES = click.Choice(
    ["background", "action-premise", "constraint", "analogy", "conflict-source", "verification-target"]
)


@click.command(name="feedback")
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
