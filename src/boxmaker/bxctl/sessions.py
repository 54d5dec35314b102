"""``bxctl sessions``: the sessions under the home, their epochs and the summaries carried between them
(M5d section 3; issue 4).

Read straight from ``{home}/sessions/`` (loopd's files; nothing is changed), so it works while loopd is
down. Text from the logs is printed escaped.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import click

from boxmaker.bxctl.state import State, pass_state
from boxmaker.proto.escape import escape, escape_line
from boxmaker.proto.ids import OWNER_SESSION, is_session_id
from boxmaker.proto.records import (
    Assistant,
    EpochEnd,
    RecordError,
    SessionStart,
    ToolResult,
    Usage,
    User,
    read_log,
)


@dataclass
class Epoch:
    """One epoch of a session as its log tells it."""

    number: int
    started: str | None = None
    turns: int = 0
    records: int = 0
    depth: int | None = None
    summary: str | None = None
    ended: str | None = None
    untrusted: bool = False
    problem: str | None = None

    def data(self) -> dict[str, Any]:
        """As JSON data."""
        return {
            "epoch": self.number,
            "started": self.started,
            "ended": self.ended,
            "turns": self.turns,
            "records": self.records,
            "depth": self.depth,
            "untrusted": self.untrusted,
            "summary": self.summary,
            "problem": self.problem,
        }


@dataclass
class SessionView:
    """A session: its id and epochs."""

    id: str
    epochs: list[Epoch] = field(default_factory=list)

    @property
    def turns(self) -> int:
        """Owner messages across every epoch."""
        return sum(e.turns for e in self.epochs)

    @property
    def untrusted(self) -> bool:
        """Whether any epoch read untrusted content."""
        return any(e.untrusted for e in self.epochs)

    def data(self) -> dict[str, Any]:
        """As JSON data."""
        return {
            "session": self.id,
            "turns": self.turns,
            "untrusted": self.untrusted,
            "epochs": [e.data() for e in self.epochs],
        }


def read_session(folder: Path) -> SessionView:
    """Every epoch log of a session folder, summarised; a damaged log is reported, not raised."""
    view = SessionView(folder.name)
    numbers = sorted(
        int(stem)
        for name in os.listdir(folder)
        if (stem := name.removesuffix(".jsonl")) != name and stem.isdigit() and stem.isascii()
    )
    for number in numbers:
        epoch = Epoch(number)
        try:
            records, _ = read_log(folder / f"{number}.jsonl")
        except (RecordError, OSError) as exc:
            epoch.problem = str(exc)
            view.epochs.append(epoch)
            continue
        epoch.records = len(records)
        for record in records:
            if isinstance(record, SessionStart):
                epoch.started = record.time
            elif isinstance(record, User):
                epoch.turns += 1
            elif isinstance(record, Usage):
                epoch.depth = record.cache_n + record.prompt_n + record.predicted_n
            elif isinstance(record, ToolResult) and record.untrusted:
                epoch.untrusted = True
            elif isinstance(record, EpochEnd):
                epoch.summary, epoch.ended = record.summary, record.time
        view.epochs.append(epoch)
    return view


def session_folders(sessions: Path) -> list[Path]:
    """Session folders with a valid id, sorted by name."""
    try:
        entries = sorted(sessions.iterdir())
    except (FileNotFoundError, NotADirectoryError):
        return []
    return [p for p in entries if p.is_dir() and is_session_id(p.name) and p.name != OWNER_SESSION]


@click.group(name="sessions", invoke_without_command=True)
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of text.")
@click.pass_context
def sessions(ctx: click.Context, as_json: bool) -> None:
    """List the sessions: turns, epochs, and whether each has read untrusted content.

    \b
    Example:
        bxctl sessions
        bxctl sessions show chat-notes
    """
    if ctx.invoked_subcommand is not None:
        return
    state: State = ctx.obj
    views = [read_session(folder) for folder in session_folders(state.layout.sessions)]
    if as_json:
        click.echo(json.dumps([v.data() for v in views], ensure_ascii=True, indent=2))
        return
    if not views:
        click.echo("(no sessions)")
    for view in views:
        last = view.epochs[-1] if view.epochs else None
        flag = "  untrusted" if view.untrusted else ""
        when = f"  started {view.epochs[0].started}" if view.epochs and view.epochs[0].started else ""
        epoch = last.number if last else 0
        click.echo(
            f"{view.id}  {view.turns:,} turn{'s' if view.turns != 1 else ''}  epoch {epoch}{when}{flag}"
        )


def transcript_lines(folder: Path) -> list[str]:
    """Every message-bearing record of every epoch, one escaped line each (the owner's, the
    assistant's, tool calls and results, summaries)."""
    lines: list[str] = []
    for number in sorted(
        int(stem)
        for name in os.listdir(folder)
        if (stem := name.removesuffix(".jsonl")) != name and stem.isdigit()
    ):
        try:
            records, _ = read_log(folder / f"{number}.jsonl")
        except (RecordError, OSError) as exc:
            lines.append(f"-- epoch {number}: cannot be read ({escape_line(str(exc))})")
            continue
        lines.append(f"-- epoch {number}")
        for record in records:
            if isinstance(record, User):
                lines.append(f"{record.time} owner: {escape_line(record.content)}")
            elif isinstance(record, Assistant):
                if record.content:
                    lines.append(f"{record.time} assistant: {escape_line(record.content)}")
                for call in record.tool_calls:
                    called = f"{escape_line(call.name)} {escape_line(call.arguments)}"
                    lines.append(f"{record.time} assistant called {called}")
            elif isinstance(record, ToolResult):
                flag = ", untrusted" if record.untrusted else ""
                lines.append(
                    f"{record.time} {escape_line(record.call)} result ({record.data_class.value}{flag}): "
                    f"{escape_line(record.content[:2000])}"
                )
            elif isinstance(record, EpochEnd):
                lines.append(f"{record.time} compacted; summary: {escape_line(record.summary)}")
    return lines


@sessions.command(name="show")
@click.argument("session")
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of text.")
@click.option("--transcript", is_flag=True, help="Print every message of every epoch, one line each.")
@pass_state
def show(state: State, session: str, as_json: bool, transcript: bool) -> None:
    """Show SESSION's epochs and the summary each one carried into the next; with --transcript, what
    was said (a scheduled run's answer, say).

    \b
    Example:
        bxctl sessions show chat-notes
        bxctl sessions show heartbeat --transcript
    """
    if not is_session_id(session) or session == OWNER_SESSION:
        raise click.BadParameter(
            "not a session id (a-z, 0-9 and '-', 1 to 64 characters)", param_hint="SESSION"
        )
    folder = state.layout.sessions / session
    if not folder.is_dir():
        raise click.ClickException(f"no session {session} under {state.layout.sessions}")
    if transcript:
        for line in transcript_lines(folder):
            click.echo(line)
        return
    view = read_session(folder)
    if as_json:
        click.echo(json.dumps(view.data(), ensure_ascii=True, indent=2))
        return
    click.echo(f"session {view.id}: {view.turns:,} turns, {len(view.epochs)} epochs")
    for epoch in view.epochs:
        if epoch.problem:
            click.echo(f"\nepoch {epoch.number}: cannot be read ({escape_line(epoch.problem)})")
            continue
        depth = f", {epoch.depth:,} tokens deep" if epoch.depth is not None else ""
        flag = ", read untrusted content" if epoch.untrusted else ""
        click.echo(f"\nepoch {epoch.number}: started {epoch.started}, {epoch.turns:,} turns{depth}{flag}")
        if epoch.summary is not None:
            click.echo(f"summary carried into epoch {epoch.number + 1} ({len(epoch.summary):,} characters):")
            click.echo(escape(epoch.summary))
