"""``bxctl memory remove``, ``replace`` and ``edit``: the owner changes an entry of memory.md or user.md
from the command line (issue 18), through memoryd's writer with every rule of the write check and the
limit, journalled as the owner's: a removed entry moves to notes.md, a replaced one stays in the journal
(``bxctl memory undo`` restores it), so nothing is lost. soul.md and
conventions.md stay the owner's files, edited by hand and never checked (M5a section 4).
"""

from __future__ import annotations

import os
import shlex
import subprocess
import tempfile
from pathlib import Path

import click

from boxmaker.bxctl import client
from boxmaker.bxctl.memory.edits import owner_text
from boxmaker.bxctl.options import json_option, memory_socket_option, memory_socket_path
from boxmaker.bxctl.state import State, pass_state

_FILE = click.option(
    "--file",
    "file",
    type=click.Choice(["memory", "user"]),
    required=True,
    help="memory.md (about the work) or user.md (about you).",
)


@click.command(name="remove")
@_FILE
@click.argument("old")
@memory_socket_option
@json_option
@pass_state
def memory_remove(state: State, file: str, old: str, memory_socket: Path | None, as_json: bool) -> None:
    """Remove the entry of memory.md or user.md whose full text is OLD (it moves to notes.md).

    bxctl memory show prints the entries; OLD is one of them, exactly.

    \b
    Example:
        bxctl memory remove --file user "Prefers answers in UTC."
    """
    args = {"file": file, "old": old}
    client.emit(client.admin(memory_socket_path(state, memory_socket), "remove", "", args), as_json)


@click.command(name="replace")
@_FILE
@click.argument("old")
@click.argument("text")
@memory_socket_option
@json_option
@pass_state
def memory_replace(
    state: State, *, file: str, old: str, text: str, memory_socket: Path | None, as_json: bool
) -> None:
    """Replace the entry whose full text is OLD with TEXT ("-" reads standard input).

    \b
    Example:
        bxctl memory replace --file user "Prefers answers in UTC." "Prefers answers in UTC and CET."
    """
    args = {"file": file, "old": old, "text": owner_text(text)}
    client.emit(client.admin(memory_socket_path(state, memory_socket), "replace", "", args), as_json)


@click.command(name="edit")
@_FILE
@click.argument("old")
@memory_socket_option
@json_option
@pass_state
def memory_edit(state: State, file: str, old: str, memory_socket: Path | None, as_json: bool) -> None:
    """Edit the one entry that holds OLD (part of its text) in $EDITOR (else $VISUAL, else vi); saving it
    replaces the entry through the write check (bxctl memory undo restores the old text).

    \b
    Example:
        EDITOR=nano bxctl memory edit --file memory "deploy"
    """
    path = memory_socket_path(state, memory_socket)
    client.admin(path, "status")  # memoryd answers, before the owner spends time in the editor
    entry = _entry(state, file, old)
    edited = _in_editor(entry)
    if edited.strip() == entry.strip():
        click.echo("unchanged: nothing was written")
        return
    args = {"file": file, "old": entry, "text": edited.strip("\n")}
    client.emit(client.admin(path, "replace", "", args), as_json)


def _entry(state: State, file: str, old: str) -> str:
    """The one entry of the file that holds `old`, as it is on disk (read for the editor only; memoryd
    checks the replacement against the file as it is then)."""
    source = state.layout.home / "memory" / f"{file}.md"
    try:
        text = source.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise click.ClickException(f"cannot read {source}: {exc}") from None
    found = [e.strip("\n") for e in text.replace("\r\n", "\n").split("\n§\n") if old in e]
    if len(found) != 1:
        many = "no entry" if not found else f"{len(found)} entries"
        raise click.ClickException(f"{many} of {file}.md hold {old!r}; give text that names one entry")
    return found[0]


def _in_editor(text: str) -> str:
    editor = os.environ.get("EDITOR") or os.environ.get("VISUAL") or "vi"
    fd, name = tempfile.mkstemp(prefix="bxctl-entry-", suffix=".md")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text + "\n")
        try:
            done = subprocess.run([*shlex.split(editor), name], check=False)
        except OSError as exc:
            raise click.ClickException(f"cannot run the editor {editor!r}: {exc}") from None
        if done.returncode != 0:
            raise click.ClickException(
                f"the editor {editor!r} exited with status {done.returncode}; nothing written"
            )
        try:
            return Path(name).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise click.ClickException(
                f"what the editor saved cannot be read ({exc}); nothing was written"
            ) from None
    finally:
        Path(name).unlink(missing_ok=True)
