"""``bxctl chat``: talk to the agent (DESIGN 10.5; issue 18).

``bxctl chat -m TEXT`` runs one turn and prints the reply (``-m -`` reads the message from standard
input, all of it); ``bxctl chat`` reads the owner's messages until end of input, ``/quit`` or Ctrl-D. On
a terminal it has line editing and history (readline; the history in ``{home}/run/chat-history``), a
pasted block of lines is one message, a line ending in ``\\`` goes on on the next line, and ``/help``,
``/new``, ``/session`` and ``/quit`` are commands; Ctrl-C cancels a turn, and at the prompt ends the chat.
Piped input is sent line by line.

``--session ID`` starts that session or goes on with it (the first notice says which); without it, a new
chat session id is made here (``chat-`` and 20 base32 characters). The reply goes to stdout (streamed as
it comes when stdout is a terminal, or with ``--stream``); notices go to stderr, escaped. Exit 1 with the
runbook pointer when a turn fails (``session_full``, ``memory-unavailable``, a role down) or is cancelled;
with piped input every line is still sent, and the exit status is 1 if any turn failed.
"""

from __future__ import annotations

import contextlib
import select
import sys
from pathlib import Path

import click

from boxmaker.bxctl import client, roles
from boxmaker.bxctl.chat_turn import LINE_BYTES, MAX_TEXT, TurnInterrupted, check_text, notices, run_turn
from boxmaker.bxctl.options import loop_socket_option
from boxmaker.bxctl.state import State, pass_state
from boxmaker.proto.ids import is_session_id, new_chat_session_id

#: What ``/help`` prints.
HELP = """\
/help      this list
/new       start a new session (the next message begins it)
/session   the session this chat goes on with
/quit      end the chat (also /exit, Ctrl-D, or Ctrl-C at the prompt)
A line ending in \\ goes on on the next line; a pasted block of lines is one message.
Ctrl-C during a turn cancels it (what it already did is kept)."""
#: Seconds to wait for more pasted lines after one line arrives on a terminal.
PASTE_S = 0.05


def describe_session(state: State, session: str) -> str:
    """``[session ID: new]`` or ``[session ID: goes on, N turns]`` from the session's log on disk."""
    log = state.layout.sessions / session / "0.jsonl"
    if not log.exists():
        return f"[session {session}: new]"
    folder = log.parent
    turns = 0
    for path in folder.glob("*.jsonl"):
        with contextlib.suppress(OSError):
            turns += path.read_bytes().count(b'"type":"user"')
    return f"[session {session}: goes on, {turns} turn{'' if turns == 1 else 's'} so far]"


@click.command(name="chat")
@click.option("-m", "--message", help="Send one message, print the reply and exit; - reads standard input.")
@click.option("--session", "session", help="Start or go on with this session id (e.g. chat-2026-work).")
@click.option(
    "--stream/--no-stream",
    default=None,
    help="Print the reply as it comes (default: when stdout is a terminal).",
)
@loop_socket_option
@pass_state
def chat(
    state: State, message: str | None, session: str | None, stream: bool | None, loop_socket: Path | None
) -> None:
    """Talk to the agent: one message with -m, else message by message until end of input or /quit.

    \b
    Example:
        bxctl chat -m "Remember that I deploy on Thursdays."
        git diff | bxctl chat -m -
        bxctl chat --session chat-notes
    """
    if session is not None and (not is_session_id(session) or session == "owner"):
        raise click.BadParameter(
            "a session id is 1 to 64 characters of a-z, 0-9 and '-', not starting with '-' (and not 'owner')",
            param_hint="--session",
        )
    if message == "-":
        message = _read_stdin()
    if message is not None:
        problem = check_text(message, "the message")
        if problem:
            raise click.BadParameter(problem, param_hint="-m")
    path = loop_socket or roles.LOOPD.socket(state.layout)
    streamed = sys.stdout.isatty() if stream is None else stream
    named = session is not None
    session = session or new_chat_session_id()
    click.echo(describe_session(state, session) if named else f"[session {session}]", err=True)
    if message is not None:
        try:
            notices(run_turn(state, path, session, message, streamed))
        except TurnInterrupted:
            raise SystemExit(1) from None
        return
    Conversation(state, path, session, streamed).run()


def _read_stdin() -> str:
    data = sys.stdin.buffer.read(LINE_BYTES)
    try:
        return data.decode("utf-8").removesuffix("\n")
    except UnicodeDecodeError as exc:
        raise click.BadParameter(
            f"standard input is not UTF-8 (byte {exc.start + 1})", param_hint="-m"
        ) from None


class Conversation:
    """The message-by-message chat: a terminal's (readline, pasted blocks, commands) or piped lines."""

    def __init__(self, state: State, path: Path, session: str, stream: bool) -> None:
        self.state, self.path, self.session, self.stream = state, path, session, stream
        self.interactive = sys.stdin.isatty()
        self.failed = 0
        self.number = 0

    def run(self) -> None:
        """Read and send messages until the end; exit 1 if a piped message failed."""
        history = self._readline()
        try:
            while (text := self._next()) is not None:
                if not self._command(text):
                    self._send(text)
        except _Quit:
            pass
        finally:
            if history is not None:
                _save_history(history)
        if self.failed and not self.interactive:
            raise SystemExit(1)

    def _readline(self) -> Path | None:
        """Turn on line editing and history on a terminal; the history file, or None."""
        if not self.interactive:
            return None
        try:
            import readline
        except ImportError:  # a Python without readline: plain input
            return None
        history = self.state.layout.run / "chat-history"
        with contextlib.suppress(OSError):
            readline.read_history_file(history)
        readline.set_history_length(1000)
        return history

    def _next(self) -> str | None:
        """The next message (None at the end): a piped line, or a terminal's line with what was pasted
        with it and its continuations."""
        if not self.interactive:
            return self._piped_line()
        try:
            lines = [input("you> ")]
            while lines[-1].endswith("\\") or _more_waiting():
                if lines[-1].endswith("\\"):
                    lines[-1] = lines[-1][:-1]
                lines.append(input("...> " if not _more_waiting() else ""))
        except (EOFError, KeyboardInterrupt):
            click.echo("", err=True)
            return None
        self.number += 1
        return "\n".join(lines)

    def _piped_line(self) -> str | None:
        while True:
            raw = sys.stdin.buffer.readline(LINE_BYTES)
            if not raw:
                return None
            self.number += 1
            if len(raw) == LINE_BYTES and not raw.endswith(b"\n"):
                while (rest := sys.stdin.buffer.readline(LINE_BYTES)) and not rest.endswith(b"\n"):
                    pass  # drop the rest of the over-long line, a piece at a time
                self._fail(f"line {self.number} is over {MAX_TEXT:,} characters; not sent")
                continue
            try:
                return raw.decode("utf-8").removesuffix("\n").removesuffix("\r")
            except UnicodeDecodeError as exc:
                self._fail(f"line {self.number} is not UTF-8 (byte {exc.start + 1}); not sent")

    def _fail(self, sentence: str) -> None:
        click.echo(f"Error: {sentence}", err=True)
        self.failed += 1

    def _command(self, text: str) -> bool:
        """Run a chat command; True when `text` was one (or is empty), so nothing is sent."""
        word = text.strip()
        if not word:
            return True
        if word in ("/quit", "/exit"):
            raise _Quit()
        if word == "/help":
            click.echo(HELP, err=True)
        elif word == "/session":
            click.echo(describe_session(self.state, self.session), err=True)
        elif word == "/new":
            self.session = new_chat_session_id()
            click.echo(f"[session {self.session}: new]", err=True)
        elif word.startswith("/") and word[1:].isalpha() and word[1:].islower():
            click.echo(f"[no command {word}; /help lists them]", err=True)
        else:
            return False
        return True

    def _send(self, text: str) -> None:
        problem = check_text(text, "the message" if self.interactive else f"line {self.number}")
        if problem:
            self._fail(f"{problem}; not sent")
            return
        try:
            notices(run_turn(self.state, self.path, self.session, text, self.stream))
        except TurnInterrupted:
            self.failed += 1
        except client.RoleUnreachable:
            raise
        except click.ClickException as exc:
            self._fail(exc.format_message())


class _Quit(Exception):
    pass


def _more_waiting() -> bool:
    """True when more typed or pasted input is already waiting on a terminal's standard input."""
    try:
        ready, _, _ = select.select([sys.stdin], [], [], PASTE_S)
    except (OSError, ValueError):
        return False
    return bool(ready)


def _save_history(path: Path) -> None:
    import readline

    with contextlib.suppress(OSError):
        readline.write_history_file(path)
        path.chmod(0o600)
