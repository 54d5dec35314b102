"""``bxctl chat``: talk to the agent (DESIGN 10.5).

``bxctl chat -m TEXT`` runs one turn and prints the reply; ``bxctl chat`` reads the owner's lines until
end of input (or ``/quit``). ``--session ID`` starts that session or goes on with it; without it, a new
chat session id is made here (``chat-`` and 20 base32 characters) and later lines of the same run go on
with it. The reply goes to stdout; notices (the session's id, the tools that ran, untrusted content
read, a call waiting for the owner's approval, a reply cut at its length limit) go to stderr, escaped.
Exit 1 with the runbook pointer when a turn fails (``session_full``, ``memory-unavailable``, a role
down); with piped input every line is still sent, and the exit status is 1 if any turn failed.
"""

from __future__ import annotations

import sys
import threading
from pathlib import Path

import click

from boxmaker.bxctl import client, roles
from boxmaker.bxctl.options import broker_socket_path, loop_socket_option
from boxmaker.bxctl.state import State, pass_state
from boxmaker.proto.escape import escape, escape_line
from boxmaker.proto.ids import is_session_id, new_chat_session_id
from boxmaker.proto.messages import Chat, ChatReply, LoopAdmin, LoopAdminReply

#: A turn may wait for the model and for the owner's approvals; this is the most bxctl waits.
TURN_TIMEOUT = 3600.0
#: The longest message loopd takes, in characters (the `chat` body's limit).
MAX_TEXT = 100_000
#: The most bytes of one input line read at once: MAX_TEXT characters of up to 4 UTF-8 bytes, a newline.
LINE_BYTES = MAX_TEXT * 4 + 2
#: Seconds between looks at brokerd's approvals while a turn runs.
APPROVAL_POLL_S = 1.0


def check_text(text: str, where: str) -> str | None:
    """Why `text` cannot be sent (not UTF-8, empty, too long), or None."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        return f"{where} is not UTF-8 (character {exc.start + 1})"
    if not text.strip():
        return f"{where} is empty"
    if len(text) > MAX_TEXT:
        return f"{where} is {len(text):,} characters; at most {MAX_TEXT:,}"
    return None


def _notices(reply: ChatReply, announced: bool) -> None:
    if not announced:
        click.echo(f"[session {reply.session}]", err=True)
    if reply.tools:
        runs = []
        for run in reply.tools:
            flags = [] if run.code == "ok" else [escape_line(run.code)]
            if run.label is not None and run.label.untrusted:
                flags.append("untrusted")
            runs.append(escape_line(run.name) + (f" ({', '.join(flags)})" if flags else ""))
        click.echo(f"[tools: {', '.join(runs)}]", err=True)
    if reply.compacted:
        click.echo(
            f"[the session was compacted: it goes on in epoch {reply.epoch} from a summary of the earlier "
            f"part; bxctl sessions show {reply.session} shows it]",
            err=True,
        )
    if reply.warning:
        click.echo(f"[warning: {escape_line(reply.warning)}]", err=True)
    if reply.cut:
        click.echo(
            "[the reply was cut short: it reached [limits] max_tokens in loopd.toml, or the end of the "
            "model's context]",
            err=True,
        )
    if reply.untrusted:
        click.echo(
            "[this session has read untrusted content: what it asks to remember becomes untrusted notes]",
            err=True,
        )


class ApprovalWatch:
    """While a turn runs, tell the owner about calls of this session waiting for approval, and about a
    compaction of the session the turn waits for."""

    def __init__(self, socket: Path, session: str, loop_socket: Path | None = None) -> None:
        self.socket = socket
        self.session = session
        self.loop_socket = loop_socket
        self.told_compacting = False
        self.seen: set[str] = set()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> ApprovalWatch:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=5)

    def _compacting(self) -> None:
        """Say once when loopd is compacting this session (the turn waits for it)."""
        if self.told_compacting or self.loop_socket is None:
            return
        try:
            reply = client.request("loopd", self.loop_socket, LoopAdmin(command="compacting"), timeout=3.0)
        except click.ClickException:
            return
        if isinstance(reply, LoopAdminReply) and isinstance(reply.data, list) and self.session in reply.data:
            self.told_compacting = True
            click.echo(
                "[the session is being compacted: its earlier part is summarised first; your message waits]",
                err=True,
            )

    def _run(self) -> None:
        silent = 0
        while not self._stop.wait(APPROVAL_POLL_S):
            self._compacting()
            try:
                reply = client.broker_admin(self.socket, "approvals", timeout=APPROVAL_POLL_S * 3)
            except click.ClickException as exc:
                silent += 1
                if silent == 10:  # said once: a stuck brokerd makes tool calls wait
                    click.echo(
                        f"[brokerd does not answer ({exc.format_message()}); a tool call of this turn may "
                        "be waiting for it: bxctl status]",
                        err=True,
                    )
                continue
            silent = 0
            data = reply.data if isinstance(reply.data, dict) else {}
            for item in data.get("approvals", []):
                if not isinstance(item, dict) or item.get("session") != self.session:
                    continue
                ident = str(item.get("id", ""))
                if ident and ident not in self.seen:
                    self.seen.add(ident)
                    tool = escape_line(str(item.get("tool", "?")))
                    click.echo(
                        f"[waiting for your approval of {tool}: bxctl approve {escape_line(ident)} "
                        f"(or bxctl deny {escape_line(ident)}); bxctl approvals shows the call]",
                        err=True,
                    )


def _turn(state: State, path: Path, session: str, text: str) -> ChatReply:
    with ApprovalWatch(broker_socket_path(state, None), session, path):
        reply = client.request("loopd", path, Chat(text=text, session=session), timeout=TURN_TIMEOUT)
    if not isinstance(reply, ChatReply):
        raise client.RoleRefused(f"loopd answered {type(reply).__name__} to chat")
    return reply


@click.command(name="chat")
@click.option("-m", "--message", help="Send one message, print the reply and exit.")
@click.option("--session", "session", help="Start or go on with this session id (e.g. chat-2026-work).")
@loop_socket_option
@pass_state
def chat(state: State, message: str | None, session: str | None, loop_socket: Path | None) -> None:
    """Talk to the agent: one message with -m, else line by line until end of input or /quit.

    \b
    Example:
        bxctl chat -m "Remember that I deploy on Thursdays."
        bxctl chat --session chat-notes
    """
    if session is not None and (not is_session_id(session) or session == "owner"):
        raise click.BadParameter(
            "a session id is 1 to 64 characters of a-z, 0-9 and '-', not starting with '-' (and not 'owner')",
            param_hint="--session",
        )
    if message is not None:
        problem = check_text(message, "the message")
        if problem:
            raise click.BadParameter(problem, param_hint="-m")
    path = loop_socket or roles.LOOPD.socket(state.layout)
    named = session is not None
    session = session or new_chat_session_id()
    if message is not None:
        reply = _turn(state, path, session, message)
        _notices(reply, announced=named)
        click.echo(escape(reply.reply))
        return
    _lines(state, path, session, announced=named)


def _skip_rest_of_line() -> None:
    """Read and drop the rest of an over-long input line, a piece at a time (never all of it at once)."""
    while True:
        rest = sys.stdin.buffer.readline(LINE_BYTES)
        if not rest or rest.endswith(b"\n"):
            return


def _lines(state: State, path: Path, session: str, announced: bool) -> None:
    interactive = sys.stdin.isatty()
    failed = 0
    number = 0
    while True:
        if interactive:
            click.echo("you> ", nl=False, err=True)
        raw = sys.stdin.buffer.readline(LINE_BYTES)
        if not raw:
            break
        number += 1
        if len(raw) == LINE_BYTES and not raw.endswith(b"\n"):
            _skip_rest_of_line()
            click.echo(f"error: line {number} is over {MAX_TEXT:,} characters; not sent", err=True)
            failed += 1
            continue
        try:
            text = raw.decode("utf-8").removesuffix("\n").removesuffix("\r")
        except UnicodeDecodeError as exc:
            click.echo(f"error: line {number} is not UTF-8 (byte {exc.start + 1}); not sent", err=True)
            failed += 1
            continue
        if text.strip() in {"/quit", "/exit"}:
            break
        if not text.strip():
            continue
        problem = check_text(text, f"line {number}")
        if problem:
            click.echo(f"error: {problem}; not sent", err=True)
            failed += 1
            continue
        try:
            reply = _turn(state, path, session, text)
        except client.RoleUnreachable:
            raise
        except click.ClickException as exc:
            click.echo(f"error: {exc.format_message()}", err=True)
            failed += 1
            continue
        _notices(reply, announced)
        announced = True
        click.echo(escape(reply.reply))
    if failed and not interactive:
        raise SystemExit(1)
