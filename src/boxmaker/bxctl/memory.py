"""``bxctl memory …`` and ``bxctl reindex``: the owner's view of memoryd (M5a section 10; DESIGN 10.5).

Each command talks to memoryd's admin socket (``--memory-socket``, default
``{home}/run/owner-memory/admin.sock``). Entries are printed escaped; listings take ``--json``.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import Any

import click

from boxmaker.bxctl import client, roles
from boxmaker.bxctl.state import State, pass_state
from boxmaker.proto.messages import Reindex, Reindexed


def memory_socket_option(func: Any) -> Any:
    """The ``--memory-socket PATH`` option every memory command takes."""
    return click.option(
        "--memory-socket",
        type=click.Path(path_type=Path, dir_okay=False),
        help="memoryd's admin socket (default: [sockets] admin in {home}/config/memoryd.toml, "
        "else {home}/run/owner-memory/admin.sock).",
    )(func)


def json_option(func: Any) -> Any:
    """The ``--json`` flag of listing commands."""
    return click.option("--json", "as_json", is_flag=True, help="Print JSON instead of text.")(func)


def _socket(state: State, path: Path | None) -> Path:
    """``--memory-socket``, else ``[sockets] admin`` in {home}/config/memoryd.toml, else the default."""
    return path or roles.MEMORYD.socket(state.layout)


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
    path = _socket(state, memory_socket)
    reply = client.request("memoryd", path, Reindex(), timeout=3600.0)
    if not isinstance(reply, Reindexed):
        raise client.RoleRefused(f"memoryd answered {type(reply).__name__} to reindex")
    click.echo(
        f"reindexed: {_plural(reply.logs, 'log')}, {_plural(reply.records, 'record')}, "
        f"{_plural(reply.notes, 'note')}"
    )


def _plural(count: int, word: str) -> str:
    return f"{count:,} {word}{'' if count == 1 else 's'}"


@click.group(name="memory")
def memory() -> None:
    """Look at and steer the agent's memory.

    \b
    Example:
        bxctl memory files
        bxctl memory search "launch window"
    """


@memory.command(name="log")
@click.argument("count", required=False, type=click.IntRange(1, 100_000), default=20)
@memory_socket_option
@json_option
@pass_state
def memory_log(state: State, count: int, memory_socket: Path | None, as_json: bool) -> None:
    """List the newest COUNT memory edits (default 20), oldest first.

    \b
    Example:
        bxctl memory log 5
    """
    client.emit(client.admin(_socket(state, memory_socket), "log", str(count)), as_json)


@memory.command(name="undo")
@click.argument("edit_id", required=False, default="")
@memory_socket_option
@pass_state
def memory_undo(state: State, edit_id: str, memory_socket: Path | None) -> None:
    """Undo EDIT_ID (default: the latest edit of memory.md or user.md).

    It must be the latest edit of its file, and the file must still hold what it left.

    \b
    Example:
        bxctl memory undo 2026-09-24-0003
    """
    client.emit(client.admin(_socket(state, memory_socket), "undo", edit_id), False)


@memory.command(name="pending")
@memory_socket_option
@json_option
@pass_state
def memory_pending(state: State, memory_socket: Path | None, as_json: bool) -> None:
    """List writes waiting for review (when [memory] review = true).

    \b
    Example:
        bxctl memory pending --json
    """
    client.emit(client.admin(_socket(state, memory_socket), "pending"), as_json)


@memory.command(name="accept")
@click.argument("pending_id")
@memory_socket_option
@pass_state
def memory_accept(state: State, pending_id: str, memory_socket: Path | None) -> None:
    """Apply the staged write PENDING_ID, with every check, to the file as it is now.

    \b
    Example:
        bxctl memory accept p-2026-09-24-0001
    """
    client.emit(client.admin(_socket(state, memory_socket), "accept", pending_id), False)


@memory.command(name="reject")
@click.argument("pending_id")
@memory_socket_option
@pass_state
def memory_reject(state: State, pending_id: str, memory_socket: Path | None) -> None:
    """Discard the staged write PENDING_ID (journalled).

    \b
    Example:
        bxctl memory reject p-2026-09-24-0001
    """
    client.emit(client.admin(_socket(state, memory_socket), "reject", pending_id), False)


@memory.command(name="files")
@memory_socket_option
@json_option
@pass_state
def memory_files(state: State, memory_socket: Path | None, as_json: bool) -> None:
    """Show each memory file's size against its limit, and entries the block leaves out.

    \b
    Example:
        bxctl memory files
    """
    client.emit(client.admin(_socket(state, memory_socket), "files"), as_json)


@memory.command(name="show")
@memory_socket_option
@json_option
@pass_state
def memory_show(state: State, memory_socket: Path | None, as_json: bool) -> None:
    """Print the memory block a new session would get now.

    \b
    Example:
        bxctl memory show
    """
    client.emit(client.admin(_socket(state, memory_socket), "show"), as_json)


@memory.command(name="search")
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
    reply = client.admin(_socket(state, memory_socket), "search", query, {"k": k})
    client.emit(reply, as_json)


_UNDECODABLE = re.compile("[\udc80-\udcff]")


def _text(text: str) -> str:
    """The owner's TEXT: the argument, or standard input for "-", as UTF-8. Standard input is read
    as files edited by hand are (a leading BOM dropped, CRLF as LF); an argument is taken as it is.

    Raises:
        click.BadParameter: the bytes are not UTF-8 (Python carries them as lone surrogates).
    """
    if text == "-":
        data = sys.stdin.buffer.read()
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise click.BadParameter(
                f"standard input is not UTF-8 (byte {exc.start:,})", param_hint="TEXT"
            ) from None
        return text.removeprefix("\ufeff").replace("\r\n", "\n")
    if _UNDECODABLE.search(text):
        raise click.BadParameter("the argument is not UTF-8", param_hint="TEXT")
    return text


@memory.command(name="add")
@click.option(
    "--file",
    "file",
    type=click.Choice(["memory", "user"]),
    required=True,
    help="memory.md (about the work) or user.md (about you).",
)
@click.argument("text")
@memory_socket_option
@pass_state
def memory_add(state: State, file: str, text: str, memory_socket: Path | None) -> None:
    """Add TEXT as an entry of memory.md or user.md yourself ("-" reads standard input).

    The same rules apply as to the agent's writes; the journal names you as the writer.

    \b
    Example:
        bxctl memory add --file user "Prefers answers in UTC."
    """
    args = {"file": file, "text": _text(text)}
    client.emit(client.admin(_socket(state, memory_socket), "add", "", args), False)


@memory.command(name="note")
@click.argument("text")
@memory_socket_option
@pass_state
def memory_note(state: State, text: str, memory_socket: Path | None) -> None:
    """Append TEXT to notes.md as your own note ("-" reads standard input).

    \b
    Example:
        bxctl memory note "The staging server moved to rack 4."
    """
    client.emit(client.admin(_socket(state, memory_socket), "note", _text(text)), False)


@memory.command(name="tiers")
@click.option(
    "--untrusted",
    is_flag=True,
    help="Include the text of untrusted notes (by default they are listed by key and header only).",
)
@memory_socket_option
@json_option
@pass_state
def memory_tiers(state: State, untrusted: bool, memory_socket: Path | None, as_json: bool) -> None:
    """List each identity entry and note with how often agent recalls found it.

    Hits count recalls made by agent sessions only (not your searches, not benchmark runs); notes
    are listed most found first, then newest. The first line is the strictest label of what the
    listing shows.

    \b
    Example:
        bxctl memory tiers
        bxctl memory tiers --untrusted --json
    """
    reply = client.admin(_socket(state, memory_socket), "tiers", "", {"untrusted": untrusted})
    client.emit(reply, as_json)


# Erasure (seed 003 section 12.3): `bxctl memory erase`, `bxctl memory erasures` (module `erase`).
from boxmaker.bxctl.erase import memory_erase, memory_erasures  # noqa: E402

memory.add_command(memory_erase)
memory.add_command(memory_erasures)
