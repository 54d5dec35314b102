"""``bxctl memory withdraw``, ``reinstate`` and ``controls``: withdrawal, reversible (seed 003 sections
12.1-12.2).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from boxmaker.bxctl import client
from boxmaker.bxctl.options import json_option, memory_socket_option, memory_socket_path
from boxmaker.bxctl.state import State, pass_state

REASONS = ["failed-exploration", "owner-decision", "mistaken", "poisoned", "reconciliation", "other"]


@click.command(name="withdraw")
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


@click.command(name="reinstate")
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


@click.command(name="controls")
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
