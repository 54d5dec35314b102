"""``bxctl memory items``, ``item``, ``supersede``, ``status`` and ``reconcile``: the item store (seed 003;
issues 6 and 7).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from boxmaker.bxctl import client
from boxmaker.bxctl.options import ITEM_KINDS, json_option, memory_socket_option, memory_socket_path
from boxmaker.bxctl.progress import with_progress
from boxmaker.bxctl.state import State, pass_state
from boxmaker.proto.messages import MemoryAdminReply

_STATUSES = ("active", "superseded", "pending-cleanup", "stale")
#: `bxctl memory items` lists the newest this many unless told otherwise (a home may hold 100,000).
DEFAULT_LIMIT = 200
#: `--limit 0` asks for the items this many at a time (a frame holds at most 4 MiB; an item's row and
#: data take under 4 KB).
PAGE = 500


@click.command(name="items")
@click.option("--all", "show_all", is_flag=True, help="Include erased items (no text).")
@click.option("--kind", type=ITEM_KINDS, help="Only this kind.")
@click.option("--status", type=click.Choice(list(_STATUSES)), help="Only this status.")
@click.option("--subject", help="Only this subject (exactly).")
@click.option(
    "--limit",
    type=click.IntRange(min=0),
    default=DEFAULT_LIMIT,
    show_default=True,
    help="Only the newest N items (0: every one).",
)
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
    limit: int,
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
        bxctl memory items --limit 0          (every item: long in a big home)
    """
    args: dict[str, Any] = {"all": show_all, "limit": limit}
    chosen = {"kind": kind, "status": status, "subject": subject}
    args.update({k: v for k, v in chosen.items() if v is not None})
    path = memory_socket_path(state, memory_socket)
    if 0 < limit <= PAGE:
        client.emit(client.admin(path, "items", "", args), as_json)
        return
    # more than a frame may hold: ask a page at a time, newest first, with a spinner on a terminal
    refused, pages = with_progress("listing memory items", lambda: _pages(path, args, limit))
    if refused is not None:
        client.emit(refused, as_json)
        return
    pages.reverse()  # capture order, as one reply would list them
    data = [row for page in pages for row in page.data]
    older = [line for line in pages[0].text.splitlines() if line.startswith("(older items")] if pages else []
    rows = [
        line
        for page in pages
        if page.data
        for line in page.text.splitlines()
        if not line.startswith("(older items")
    ]
    client.emit(MemoryAdminReply("\n".join(older + rows) if data else "(no items)", data), as_json)


def _pages(
    path: Path, args: dict[str, Any], limit: int
) -> tuple[MemoryAdminReply | None, list[MemoryAdminReply]]:
    """The newest `limit` items (0: all) in pages of at most `PAGE`, newest page first; or the
    refusal that answered instead."""
    pages: list[MemoryAdminReply] = []
    taken = 0
    while True:
        size = PAGE if not limit else min(PAGE, limit - taken)
        reply = client.admin(path, "items", "", {**args, "limit": size, "offset": taken})
        if not isinstance(reply.data, list):  # refused: that is the answer
            return reply, []
        pages.append(reply)
        taken += len(reply.data)
        if len(reply.data) < size or (limit and taken >= limit):
            return None, pages


@click.command(name="item")
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


@click.command(name="supersede")
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


@click.command(name="status")
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


@click.command(name="reconcile")
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
