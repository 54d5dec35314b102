"""``bxctl chat``: talk to the agent (DESIGN 10.5).

``bxctl chat -m TEXT`` runs one turn and prints the reply; ``bxctl chat`` reads the owner's lines until
end of input (or ``/quit``). ``--session ID`` starts that session or goes on with it; without it, the
first turn starts a new chat session and later lines of the same run go on with it. The reply goes to
stdout; notices (the session's id, the tools that ran, untrusted content read) go to stderr. Exit 1
with the runbook pointer when a turn fails (``session_full``, ``memory-unavailable``, a role down).
"""

from __future__ import annotations

import sys
from pathlib import Path

import click

from boxmaker.bxctl import client, roles
from boxmaker.bxctl.state import State, pass_state
from boxmaker.proto.escape import escape
from boxmaker.proto.ids import is_session_id
from boxmaker.proto.messages import Chat, ChatReply

#: A turn may wait for the model and for the owner's approvals; this is the most bxctl waits.
TURN_TIMEOUT = 3600.0


def _notices(reply: ChatReply, announced: bool) -> None:
    if not announced:
        click.echo(f"[session {reply.session}]", err=True)
    if reply.tools:
        runs = []
        for run in reply.tools:
            flags = [] if run.code == "ok" else [run.code]
            if run.label is not None and run.label.untrusted:
                flags.append("untrusted")
            runs.append(run.name + (f" ({', '.join(flags)})" if flags else ""))
        click.echo(f"[tools: {', '.join(runs)}]", err=True)
    if reply.untrusted:
        click.echo(
            "[this session has read untrusted content: what it asks to remember becomes untrusted notes]",
            err=True,
        )


def _turn(path: Path, session: str | None, text: str) -> ChatReply:
    reply = client.request("loopd", path, Chat(text=text, session=session), timeout=TURN_TIMEOUT)
    if not isinstance(reply, ChatReply):
        raise client.RoleRefused(f"loopd answered {type(reply).__name__} to chat")
    return reply


@click.command(name="chat")
@click.option("-m", "--message", help="Send one message, print the reply and exit.")
@click.option("--session", "session", help="Start or go on with this session id (e.g. chat-2026-work).")
@click.option(
    "--loop-socket",
    type=click.Path(path_type=Path, dir_okay=False),
    help="loopd's owner socket (default: [sockets] owner in {home}/config/loopd.toml, "
    "else {home}/run/owner-loop/chat.sock).",
)
@pass_state
def chat(state: State, message: str | None, session: str | None, loop_socket: Path | None) -> None:
    """Talk to the agent: one message with -m, else line by line until end of input or /quit.

    \b
    Example:
        bxctl chat -m "Remember that I deploy on Thursdays."
        bxctl chat --session chat-notes
    """
    if session is not None and not is_session_id(session):
        raise click.BadParameter(
            "a session id is 1 to 64 characters of a-z, 0-9 and '-', not starting with '-'",
            param_hint="--session",
        )
    if message is not None and not message.strip():
        raise click.BadParameter("the message is empty", param_hint="-m")
    path = loop_socket or roles.LOOPD.socket(state.layout)
    if message is not None:
        reply = _turn(path, session, message)
        _notices(reply, announced=False)
        click.echo(escape(reply.reply))
        return
    interactive = sys.stdin.isatty()
    announced = False
    while True:
        if interactive:
            click.echo("you> ", nl=False, err=True)
        line = sys.stdin.readline()
        if not line:
            break
        text = line.rstrip("\n")
        if text.strip() in {"/quit", "/exit"}:
            break
        if not text.strip():
            continue
        try:
            reply = _turn(path, session, text)
        except client.RoleRefused as exc:
            click.echo(f"error: {exc.format_message()}", err=True)
            if not interactive:
                raise
            continue
        _notices(reply, announced)
        announced = True
        session = reply.session
        click.echo(escape(reply.reply))
