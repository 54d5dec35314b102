"""One turn of ``bxctl chat`` (DESIGN 10.5; issue 18): the request, its streamed text, Ctrl-C, and the
notices on stderr (the session, the tools that ran, untrusted content read, a call waiting for the
owner's approval, a compaction, a reply cut at its length limit, a session busy with another turn).

With ``stream``, the `chat` asks for ``"stream": true`` and each `chat_delta` is printed as it comes, after
a quiet ``thinking…`` on a terminal's stderr until the first piece. Ctrl-C during a turn cancels it in
loopd (``loop_admin cancel``; closing the connection cancels too) and says what the turn had already done,
which is kept.
"""

from __future__ import annotations

import sys
import threading
import time
from pathlib import Path

import click

from boxmaker.bxctl import client
from boxmaker.bxctl.options import broker_socket_path
from boxmaker.bxctl.state import State
from boxmaker.proto.escape import escape, escape_line
from boxmaker.proto.messages import Body, Chat, ChatDelta, ChatReply, LoopAdmin, LoopAdminReply

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


def notices(reply: ChatReply) -> None:
    """What the owner should know about a finished turn, on stderr."""
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


class TurnInterrupted(Exception):
    """Raised when the owner pressed Ctrl-C during a turn; loopd was told to cancel it."""


class Printer:
    """Prints a streamed reply as it comes: a quiet ``thinking…`` on a terminal's stderr until the first
    piece, then each piece escaped on stdout."""

    def __init__(self) -> None:
        self.shown: list[str] = []
        self.thinking = sys.stderr.isatty()
        if self.thinking:
            click.echo("thinking…", nl=False, err=True)

    def clear(self) -> None:
        """Take the ``thinking…`` line away."""
        if self.thinking:
            click.echo("\r\x1b[K", nl=False, err=True)
            self.thinking = False

    def delta(self, body: Body) -> None:
        """Print one `chat_delta`."""
        if isinstance(body, ChatDelta) and body.text:
            self.clear()
            self.shown.append(body.text)
            click.echo(escape(body.text), nl=False)
            sys.stdout.flush()

    def finish(self, reply: str) -> None:
        """End the reply: print it whole when nothing (or something else) was streamed."""
        self.clear()
        streamed = "".join(self.shown)
        if not streamed:
            click.echo(escape(reply))
        elif streamed.endswith(reply):
            click.echo("")
        else:  # text before a tool call was streamed too: the reply is what the last request said
            click.echo("")
            click.echo(escape(reply))


def say_busy(path: Path, session: str) -> None:
    """When a turn of `session` is running already, say that this message waits for it, and for what."""
    try:
        reply = client.request("loopd", path, LoopAdmin(command="turns"), timeout=3.0)
    except click.ClickException:
        return
    rows = reply.data if isinstance(reply, LoopAdminReply) and isinstance(reply.data, list) else []
    for row in rows:
        if isinstance(row, dict) and row.get("session") == session:
            seconds, doing = row.get("seconds", 0), escape_line(str(row.get("doing", "?")))
            click.echo(
                f"[session {session} is busy: its previous turn has run {seconds} s and is waiting for "
                f"{doing}; this message waits for it (bxctl chat cancels with Ctrl-C)]",
                err=True,
            )
            return


def run_turn(state: State, path: Path, session: str, text: str, stream: bool) -> ChatReply:
    """Send one message and print the reply as it comes; return the reply.

    Raises:
        TurnInterrupted: Ctrl-C (loopd was asked to cancel, and what it said was printed).
        click.ClickException: the turn failed, or a role does not answer.
    """
    say_busy(path, session)
    printer = Printer() if stream else None
    on_delta = printer.delta if printer is not None else None
    started = time.monotonic()
    try:
        with ApprovalWatch(broker_socket_path(state, None), session, path):
            reply = client.request(
                "loopd", path, Chat(text=text, session=session, stream=stream), TURN_TIMEOUT, on_delta
            )
    except KeyboardInterrupt:
        if printer is not None:
            printer.clear()
        cancel(path, session, time.monotonic() - started)
        raise TurnInterrupted() from None
    except click.ClickException:
        if printer is not None:
            printer.clear()
        raise
    if not isinstance(reply, ChatReply):
        raise client.RoleRefused(f"loopd answered {type(reply).__name__} to chat")
    if printer is not None:
        printer.finish(reply.reply)
    else:
        click.echo(escape(reply.reply))
    return reply


def cancel(path: Path, session: str, seconds: float) -> None:
    """Ask loopd to cancel the turn of `session` and say what it had done."""
    click.echo("", err=True)
    try:
        reply = client.request("loopd", path, LoopAdmin(command="cancel", arg=session), timeout=35.0)
    except click.ClickException as exc:
        click.echo(
            f"[cancelled after {seconds:.0f} s; loopd did not say more: {exc.format_message()}]", err=True
        )
        return
    said = reply.text if isinstance(reply, LoopAdminReply) else "cancelled"
    click.echo(f"[{escape_line(said)}]", err=True)
