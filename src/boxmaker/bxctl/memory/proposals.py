"""``bxctl memory proposals``: the owner's review of promotion proposals (seed 003 sections 17 and 23.5,
checklist 12 and 15; docs/runbook.md `proposals`).

- ``bxctl memory proposals [--all] [--json]`` lists the proposals waiting for review (every one with
  ``--all``), each with its supporting refs, how many are independent, and whether that makes it
  eligible (2 or more): eligible for review, never authorised.
- ``bxctl memory proposals accept ID`` records the owner's decision and appends the rule to
  memory/conventions.md in one journal commit (refused, with nothing written, over the limit or when
  conventions.md already holds the rule).
- ``bxctl memory proposals reject ID`` closes it; conventions.md is unchanged.
"""

from __future__ import annotations

from pathlib import Path

import click

from boxmaker.bxctl import client
from boxmaker.bxctl.options import json_option, memory_socket_option, memory_socket_path
from boxmaker.bxctl.state import State, pass_state


@click.group(name="proposals", invoke_without_command=True)
@click.option("--all", "show_all", is_flag=True, help="Also list accepted and rejected proposals.")
@memory_socket_option
@json_option
@click.pass_context
def memory_proposals(ctx: click.Context, show_all: bool, memory_socket: Path | None, as_json: bool) -> None:
    """List proposals waiting for your review; accept or reject one.

    A proposal with 2 or more independent supporting refs is eligible for review; only your accept
    writes its rule into conventions.md.

    \b
    Example:
        bxctl memory proposals
        bxctl memory proposals accept mempolicy-2026-09-24-001
    """
    if ctx.invoked_subcommand is not None:
        return
    state = ctx.find_object(State)
    assert state is not None
    reply = client.admin(memory_socket_path(state, memory_socket), "proposals", "", {"all": show_all})
    client.emit(reply, as_json)


@memory_proposals.command(name="accept")
@click.argument("proposal_id")
@click.option(
    "--untrusted-ok",
    is_flag=True,
    help="Accept a proposal filed by a session that had read untrusted content or data above private.",
)
@memory_socket_option
@json_option
@pass_state
def proposals_accept(
    state: State, proposal_id: str, untrusted_ok: bool, memory_socket: Path | None, as_json: bool
) -> None:
    """Accept PROPOSAL_ID: your decision is journalled and its rule appended to conventions.md.

    A proposal from a session that had read untrusted content, or data above private, is refused
    unless --untrusted-ok.

    \b
    Example:
        bxctl memory proposals accept mempolicy-2026-09-24-001
    """
    args = {"untrusted_ok": True} if untrusted_ok else {}
    socket = memory_socket_path(state, memory_socket)
    client.emit_call(lambda: client.admin(socket, "proposal-accept", proposal_id, args), as_json)


@memory_proposals.command(name="reject")
@click.argument("proposal_id")
@memory_socket_option
@json_option
@pass_state
def proposals_reject(state: State, proposal_id: str, memory_socket: Path | None, as_json: bool) -> None:
    """Reject PROPOSAL_ID (journalled); conventions.md is unchanged.

    \b
    Example:
        bxctl memory proposals reject mempolicy-2026-09-24-001
    """
    socket = memory_socket_path(state, memory_socket)
    client.emit_call(lambda: client.admin(socket, "proposal-reject", proposal_id), as_json)
