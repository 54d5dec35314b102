"""``bxctl approvals``, ``approve``, ``deny`` and ``grants``: the owner's view of brokerd (DESIGN 10.5).

Each command talks to brokerd's admin socket (``--broker-socket``, default ``[sockets] admin`` in
``{home}/config/brokerd.toml``, else ``{home}/run/owner-broker/admin.sock``). brokerd escapes the
calls' arguments in the text it sends (``proto.escape``); listings take ``--json``.
"""

from __future__ import annotations

from pathlib import Path

import click

from boxmaker.bxctl import client
from boxmaker.bxctl.options import broker_socket_option, broker_socket_path, json_option
from boxmaker.bxctl.state import State, pass_state


@click.command(name="approvals")
@broker_socket_option
@json_option
@pass_state
def approvals(state: State, broker_socket: Path | None, as_json: bool) -> None:
    """List the tool calls waiting for your approval.

    \b
    Example:
        bxctl approvals
        1 call waiting for you
        a-k3v9q2xw  since 2026-11-29T16:05:00Z  session chat-…  http_fetch {"url": "…"}  (grant web)
    """
    path = broker_socket_path(state, broker_socket)
    client.emit(client.broker_admin(path, "approvals"), as_json)


@click.command(name="approve")
@click.argument("approval_id")
@broker_socket_option
@pass_state
def approve(state: State, approval_id: str, broker_socket: Path | None) -> None:
    """Let the waiting call APPROVAL_ID run.

    \b
    Example:
        bxctl approve a-k3v9q2xw
    """
    client.emit(client.broker_admin(broker_socket_path(state, broker_socket), "approve", approval_id), False)


@click.command(name="deny")
@click.argument("approval_id")
@broker_socket_option
@pass_state
def deny(state: State, approval_id: str, broker_socket: Path | None) -> None:
    """Refuse the waiting call APPROVAL_ID (the model reads that you denied it).

    \b
    Example:
        bxctl deny a-k3v9q2xw
    """
    client.emit(client.broker_admin(broker_socket_path(state, broker_socket), "deny", approval_id), False)


@click.command(name="grants")
@broker_socket_option
@json_option
@pass_state
def grants(state: State, broker_socket: Path | None, as_json: bool) -> None:
    """List your grants, the built-in ones, and any problem in grants/ (then exit 1).

    A problem is a grant file brokerd cannot use (every call is then refused) or a grant for a tool
    no runtime knows (a misspelling: the grant never matches a call).

    \b
    Example:
        bxctl grants --json
    """
    reply = client.broker_admin(broker_socket_path(state, broker_socket), "grants")
    client.emit(reply, as_json)
    if isinstance(reply.data, dict) and (reply.data.get("valid") is False or reply.data.get("unknown_tools")):
        raise SystemExit(1)  # every call is refused until grants/ is fixed, or a grant never matches
