"""``bxctl memory archive``, ``export``, ``import``, ``replay``, ``repair`` and ``verify``: the archive,
bundles of the item store, the journal replayed (seed 003; issue 6), damaged files restored from it, and
the journal's hash chain checked with the files against its replay (issue 19).
"""

from __future__ import annotations

from pathlib import Path

import click

from boxmaker.bxctl import client
from boxmaker.bxctl.options import json_option, memory_socket_option, memory_socket_path
from boxmaker.bxctl.progress import with_progress
from boxmaker.bxctl.state import State, pass_state


@click.command(name="archive")
@memory_socket_option
@json_option
@pass_state
def memory_archive(state: State, memory_socket: Path | None, as_json: bool) -> None:
    """Archive every captured item not yet archived, now (memoryd's timer does it daily).

    Appends to memory/archive/YYYY-MM-DD.md (the capture's date); files are never rewritten.

    \b
    Example:
        bxctl memory archive
        archived 3 items to archive/2026-09-24.md (2026-09-24-0007)
    """
    client.emit(client.admin(memory_socket_path(state, memory_socket), "archive"), as_json)


@click.command(name="export")
@click.argument("file", type=click.Path(path_type=Path, dir_okay=False))
@click.option(
    "--omit-withdrawn",
    is_flag=True,
    help="Leave withdrawn items out (by default they go with the controls that withdraw them).",
)
@memory_socket_option
@json_option
@pass_state
def memory_export(
    state: State, file: Path, omit_withdrawn: bool, memory_socket: Path | None, as_json: bool
) -> None:
    """Write the item store, with its withdrawal controls, to FILE (a new file; JSON, 0600).

    memoryd writes the file and journals the export; erased items are never exported.

    \b
    Example:
        bxctl memory export ~/memory-2026-09-24.json
    """
    args = {"omit_withdrawn": omit_withdrawn}
    path = memory_socket_path(state, memory_socket)
    reply = with_progress(
        f"exporting the item store to {file}",
        lambda: client.admin(path, "export", str(file.absolute()), args),
    )
    client.emit(reply, as_json)


@click.command(name="import")
@click.argument("file", type=click.Path(path_type=Path, dir_okay=False))
@click.option(
    "--trusted",
    is_flag=True,
    help="The bundle is yours and unmodified: keep its labels (by default every item is untrusted).",
)
@memory_socket_option
@json_option
@pass_state
def memory_import(state: State, file: Path, trusted: bool, memory_socket: Path | None, as_json: bool) -> None:
    """Import a bundle written by bxctl memory export: checked whole first, or refused.

    Every imported item is untrusted unless --trusted, and is marked imported. Items already here
    with the same text are skipped; withdrawn items come with their controls; a control that would
    reinstate or replace a withdrawal of this memory is refused. The answer lists the withdrawals
    added and any scope left conflicting.

    \b
    Example:
        bxctl memory import ~/memory-2026-09-24.json

    \b
    See also: bxctl import SOURCE PATH (another product's memory: Hermes, ChatGPT, Claude, Gemini).
    """
    args = {"trusted": trusted}
    reply = client.admin(memory_socket_path(state, memory_socket), "import", str(file.absolute()), args)
    client.emit(reply, as_json)


@click.command(name="replay")
@click.option(
    "--into",
    "into",
    type=click.Path(path_type=Path, file_okay=False),
    required=True,
    help="A new or empty folder.",
)
@memory_socket_option
@json_option
@pass_state
def memory_replay(state: State, into: Path, memory_socket: Path | None, as_json: bool) -> None:
    """Rebuild the memory files from the edit journal alone into DIR, to compare with memory/.

    \b
    Example:
        bxctl memory replay --into /tmp/replayed && diff -r /tmp/replayed ~/.local/share/boxmaker/memory
    """
    client.emit(
        client.admin(memory_socket_path(state, memory_socket), "replay", str(into.absolute())), as_json
    )


@click.command(name="repair")
@click.option(
    "--yes", is_flag=True, help="Restore the files the plan names (journalled); without it, nothing changes."
)
@memory_socket_option
@json_option
@pass_state
def memory_repair(state: State, yes: bool, memory_socket: Path | None, as_json: bool) -> None:
    """Show what the journal would restore of the damage memoryd finds in its files (a file cut short,
    garbage in items.jsonl, …); with --yes, restore it, each file one journalled edit.

    Without --yes nothing changes. What the journal does not hold (soul.md, the journal itself) is
    named with what to do instead (docs/runbook.md, memory-damaged).

    \b
    Example:
        bxctl memory repair
        found: notes.md ends at byte 620, inside what edit 2026-09-24-0005 appended (bytes 512 to 640): ...
        notes.md: restore it from the journal (620 -> 640 bytes: 1 note put back, ...)
        bxctl memory repair --yes
    """
    client.emit(client.admin(memory_socket_path(state, memory_socket), "repair", args={"yes": yes}), as_json)


@click.command(name="verify")
@click.option(
    "--head",
    default="",
    metavar="HEAD",
    help="A head an earlier verify printed: prove the history up to it is unchanged.",
)
@memory_socket_option
@json_option
@pass_state
def memory_verify(state: State, head: str, memory_socket: Path | None, as_json: bool) -> None:
    """Check the journal's hash chain, and that the memory files and items.jsonl are what the
    journal's replay gives; print the chain's head. Changes nothing.

    Names the first journal line or file that disagrees and exits 1. Write the head down (or publish
    it) somewhere other than this machine: a later `verify --head HEAD` proves the history up to it
    was not rewritten. A process running as you can rewrite the whole chain; only a head kept
    elsewhere proves anything.

    \b
    Example:
        bxctl memory verify
        journal: 42 lines in 2 files (edits/2026-09.jsonl, edits/2026-10.jsonl)
        ...
        head: 3f5c…
        bxctl memory verify --head 3f5c…
    """
    reply = client.admin(memory_socket_path(state, memory_socket), "verify", args={"head": head})
    client.emit(reply, as_json)
    if isinstance(reply.data, dict) and reply.data.get("intact") is False:
        raise SystemExit(1)
