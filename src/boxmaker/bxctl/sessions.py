"""``bxctl sessions``: the sessions under the home, their epochs and the summaries carried between them
(M5d section 3; issue 4).

Read straight from ``{home}/sessions/`` (loopd's files; nothing is changed), so it works while loopd is
down. Text from the logs is printed escaped.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import click

from boxmaker.bxctl.options import json_option
from boxmaker.bxctl.state import State, pass_state
from boxmaker.proto.escape import escape, escape_line
from boxmaker.proto.ids import OWNER_SESSION, is_session_id
from boxmaker.proto.records import (
    Assistant,
    EpochEnd,
    Flush,
    RecordError,
    SessionStart,
    ToolResult,
    TurnEnd,
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
    flush: Flush | None = None
    #: The log itself cannot be read whole (the index stops at the damage); other problems are
    #: loopd's (a baseline missing or changed, no carry), which the index does not depend on.
    unreadable: bool = False

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
            "flush": None if self.flush is None else {"outcome": self.flush.outcome, "why": self.flush.why},
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

    @property
    def damaged(self) -> bool:
        """Whether an epoch has a problem (`Epoch.problem`: loopd would not resume it as it is)."""
        return any(e.problem for e in self.epochs)

    @property
    def unreadable(self) -> bool:
        """Whether an epoch's log cannot be read whole (the index holds it only up to the damage)."""
        return any(e.unreadable for e in self.epochs)

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
            epoch.problem, epoch.unreadable = str(exc), True
            view.epochs.append(epoch)
            continue
        epoch.records = len(records)
        epoch.problem = _check(folder, number, records, view.epochs)
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
            elif isinstance(record, Flush):
                epoch.flush = record
        view.epochs.append(epoch)
    return view


def _check(folder: Path, number: int, records: list[Any], earlier: list[Epoch]) -> str | None:
    """What is wrong with epoch `number` as loopd would see it, or None (the same checks loopd makes
    when it opens a session; read only)."""
    first = records[0] if records else None
    if not isinstance(first, SessionStart) or first.epoch != number:
        return f"{number}.jsonl does not start with session_start of epoch {number}"
    try:
        data = (folder / f"{number}.baseline.json").read_bytes()
    except OSError as exc:
        return f"{number}.baseline.json cannot be read ({exc.strerror or exc})"
    if first.baseline != "sha256:" + hashlib.sha256(data).hexdigest():
        return f"{number}.baseline.json changed since the epoch started"
    if number > 0 and (not earlier or earlier[-1].summary is None):
        return f"epoch {number} has no carry: {number - 1}.jsonl does not end with epoch_end"
    return None


def session_folders(sessions: Path) -> list[Path]:
    """Session folders with a valid id, newest first (by their last write), then by name."""
    try:
        entries = sorted(sessions.iterdir())
    except (FileNotFoundError, NotADirectoryError):
        return []
    found = [p for p in entries if p.is_dir() and is_session_id(p.name) and p.name != OWNER_SESSION]
    return sorted(found, key=lambda p: -last_write(p))


def last_write(folder: Path) -> float:
    """When a session last wrote a log (seconds since the epoch; 0 when unreadable)."""
    try:
        return max((e.stat().st_mtime for e in folder.iterdir() if e.name.endswith(".jsonl")), default=0.0)
    except OSError:
        return 0.0


@click.group(name="sessions", invoke_without_command=True)
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of text.")
@click.pass_context
def sessions(ctx: click.Context, as_json: bool) -> None:
    """List the sessions, newest first: turns, epochs, and whether each has read untrusted content.

    \b
    Example:
        bxctl sessions
        bxctl sessions show chat-notes
    """
    if ctx.invoked_subcommand is not None:
        return
    state: State = ctx.obj
    if not state.layout.home.is_dir():
        raise click.ClickException(
            f"the home {state.layout.home} does not exist; check --home or $BOXMAKER_HOME"
        )
    views = [read_session(folder) for folder in session_folders(state.layout.sessions)]
    if as_json:
        click.echo(json.dumps([v.data() for v in views], ensure_ascii=True, indent=2))
        return
    if not views:
        click.echo("(no sessions)")
    for view in views:
        last = view.epochs[-1] if view.epochs else None
        flag = "  untrusted" if view.untrusted else ""
        if any(e.problem for e in view.epochs):
            flag += "  DAMAGED (bxctl sessions show)"
        elif last is not None and last.summary is not None:
            flag += "  compaction pending"
        when = f"  started {view.epochs[0].started}" if view.epochs and view.epochs[0].started else ""
        epoch = last.number if last else 0
        click.echo(f"{view.id}  {_count(view.turns, 'turn')}  epoch {epoch}{when}{flag}")


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
                who = escape_line(record.speaker) if record.speaker else "owner"
                lines.append(f"{record.time} {who}: {escape_line(record.content)}")
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
            elif isinstance(record, TurnEnd):
                how = "was cancelled" if record.reason == "cancelled" else "failed"
                lines.append(f"{record.time} the turn {how} ({escape_line(record.code)})")
            elif isinstance(record, Flush):
                lines.append(f"{record.time} {flush_line(record)}")
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
    click.echo(f"session {view.id}: {_count(view.turns, 'turn')}, {_count(len(view.epochs), 'epoch')}")
    for epoch in view.epochs:
        if epoch.problem:
            click.echo(
                f"\nepoch {epoch.number}: DAMAGED: {escape_line(epoch.problem)} (runbook: session-damaged)"
            )
            if epoch.records == 0:
                continue
        depth = f", {epoch.depth:,} tokens deep" if epoch.depth is not None else ""
        flag = ", read untrusted content" if epoch.untrusted else ""
        started = epoch.started or "?"
        click.echo(f"\nepoch {epoch.number}: started {started}, {_count(epoch.turns, 'turn')}{depth}{flag}")
        if epoch.flush is not None:
            click.echo(flush_line(epoch.flush))
        if epoch.summary is not None:
            pending = (
                "" if epoch is not view.epochs[-1] else " (pending: loopd finishes it before the next turn)"
            )
            click.echo(
                f"summary carried into epoch {epoch.number + 1}{pending} ({len(epoch.summary):,} characters):"
            )
            click.echo(escape(epoch.summary))
    if any(e.problem for e in view.epochs):
        raise SystemExit(1)


def flush_line(record: Flush) -> str:
    """The memory flush before compaction (issue 19), in one line: done, or failed and why."""
    if record.outcome == "done":
        return "memory flush before compaction: done"
    return f"memory flush before compaction: failed: {escape_line(record.why)}"


def _count(number: int, word: str) -> str:
    return f"{number:,} {word}{'' if number == 1 else 's'}"


@sessions.command(name="prune")
@click.option("--job", "job", metavar="NAME", help="Only the runs of this job (default: every job's runs).")
@click.option(
    "--keep", type=click.IntRange(0, 100_000), default=20, show_default=True, help="Newest runs kept per job."
)
@click.option(
    "--yes", is_flag=True, help="Erase them (without it, only the list is printed; nothing changes)."
)
@json_option
@click.pass_context
def prune(ctx: click.Context, job: str | None, keep: int, yes: bool, as_json: bool) -> None:
    """Erase old runs of cron jobs (sessions job-NAME-t...), keeping the newest --keep of each job.

    Runs go through `bxctl memory erase --session` (every holder: logs, index, audit), with the
    authority `owner-prune`; run it without --yes first to see the plan. With --json it prints what
    `bxctl memory erase --json` prints (the plan, or with --yes the receipt; the runs are its
    ``scope_refs``), and ``{"scope_refs": [], "changed": false}`` when there is nothing to prune.

    \b
    Example:
        bxctl sessions prune --job morning --keep 5
        bxctl sessions prune --keep 5 --yes
    """
    from boxmaker.bxctl.memory.erase import memory_erase

    state: State = ctx.obj
    runs: dict[str, list[str]] = {}
    for folder in session_folders(state.layout.sessions):  # newest first
        name = _job_of(folder.name)
        if name is not None and (job is None or name == job):
            runs.setdefault(name, []).append(folder.name)
    old = sorted(s for sessions_of_job in runs.values() for s in sessions_of_job[keep:])
    if not old:
        if as_json:
            click.echo(json.dumps({"scope_refs": [], "changed": False}, indent=2))
        else:
            click.echo(f"nothing to prune: no job has more than {keep:,} run{'' if keep == 1 else 's'}")
        return
    if not as_json:
        more = " …" if len(old) > 10 else ""
        click.echo(f"{_count(len(old), 'old job run')}: {', '.join(old[:10])}{more}")
    ctx.invoke(memory_erase, sessions=tuple(old), authority="owner-prune", yes=yes, as_json=as_json)


def _job_of(session: str) -> str | None:
    """The job name of a cron run's session id (``job-<name>-t<unix seconds>``), else None."""
    if not session.startswith("job-"):
        return None
    name, sep, stamp = session[4:].rpartition("-t")
    return name if sep and stamp.isdigit() and name else None
