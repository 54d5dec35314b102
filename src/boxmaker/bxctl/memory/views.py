"""``bxctl memory files``, ``show`` and ``search``, and ``bxctl reindex``: what memoryd holds and how
it finds it (M5a section 10).
"""

from __future__ import annotations

from pathlib import Path

import click

from boxmaker.bxctl import client
from boxmaker.bxctl.options import json_option, memory_socket_option, memory_socket_path
from boxmaker.bxctl.progress import with_progress
from boxmaker.bxctl.sessions import read_session, session_folders
from boxmaker.bxctl.state import State, pass_state
from boxmaker.proto.messages import Reindex, Reindexed


@click.command(name="files")
@memory_socket_option
@json_option
@pass_state
def memory_files(state: State, memory_socket: Path | None, as_json: bool) -> None:
    """Show each memory file's size against its limit, and entries the block leaves out.

    \b
    Example:
        bxctl memory files
    """
    reply = client.admin(memory_socket_path(state, memory_socket), "files")
    client.emit(reply, as_json)
    data = reply.data if isinstance(reply.data, dict) else {}
    rows = data.get("files")
    broken = [
        r
        for r in (rows if isinstance(rows, list) else [])
        if isinstance(r, dict) and ("problem" in r or _over(r.get("size"), r.get("limit")))
    ]
    if broken:
        raise SystemExit(1)  # a file a new session cannot be built from: said above, and exit 1


@click.command(name="show")
@memory_socket_option
@json_option
@pass_state
def memory_show(state: State, memory_socket: Path | None, as_json: bool) -> None:
    """Print the memory block a new session would get now.

    \b
    Example:
        bxctl memory show
    """
    reply = client.admin(memory_socket_path(state, memory_socket), "show")
    client.emit(reply, as_json)
    left = reply.data.get("left_out") if isinstance(reply.data, dict) else None
    if isinstance(left, list) and left:
        click.echo(
            f"[{_plural(len(left), 'entry', 'entries')} left out of the block by the write check: "
            "bxctl memory files lists them]",
            err=True,
        )


@click.command(name="search")
@click.argument("query")
@click.option("-k", "k", type=click.IntRange(1, 50), default=10, show_default=True, help="Hits to show.")
@memory_socket_option
@json_option
@pass_state
def memory_search(state: State, query: str, k: int, memory_socket: Path | None, as_json: bool) -> None:
    """Search what is remembered, identity entries included, with each hit's source tag.

    \b
    Example:
        bxctl memory search "what time zone" -k 5
    """
    reply = client.admin(memory_socket_path(state, memory_socket), "search", query, {"k": k})
    client.emit(reply, as_json)


@click.command(name="reindex")
@memory_socket_option
@pass_state
def reindex(state: State, memory_socket: Path | None) -> None:
    """Rebuild memoryd's index from sessions/ and notes.md.

    \b
    Example:
        bxctl reindex
        reindexed: 42 logs, 1,208 records, 7 notes
    """
    path = memory_socket_path(state, memory_socket)
    reply = with_progress(
        "reindexing sessions/ and notes.md",
        lambda: client.request("memoryd", path, Reindex(), timeout=3600.0),
    )
    if not isinstance(reply, Reindexed):
        raise client.RoleRefused(f"memoryd answered {type(reply).__name__} to reindex")
    click.echo(
        f"reindexed: {_plural(reply.logs, 'log')}, {_plural(reply.records, 'record')}, "
        f"{_plural(reply.notes, 'note')}"
    )
    damaged = [v.id for v in map(read_session, session_folders(state.layout.sessions)) if v.unreadable]
    if damaged:
        click.echo(
            f"{_plural(len(damaged), 'session')} with a damaged log, indexed only up to the damage: "
            f"{', '.join(damaged[:10])} (bxctl sessions show ID; runbook: session-damaged)"
        )


def _plural(count: int, word: str, many: str = "") -> str:
    return f"{count:,} {word if count == 1 else (many or word + 's')}"


def _over(size: object, limit: object) -> bool:
    return isinstance(size, int) and isinstance(limit, int) and size > limit
