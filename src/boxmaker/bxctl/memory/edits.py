"""``bxctl memory log``, ``undo``, ``revert``, ``pending``, ``accept``, ``reject``, ``add`` and ``note``:
the edits of the memory files, the agent's and yours (M5a section 10; DESIGN 10.4; issue 19).
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import click

from boxmaker.bxctl import client
from boxmaker.bxctl.options import ITEM_KINDS, json_option, memory_socket_option, memory_socket_path
from boxmaker.bxctl.state import State, pass_state


@click.command(name="log")
@click.argument("count", required=False, type=click.IntRange(1, 100_000), default=20)
@memory_socket_option
@json_option
@pass_state
def memory_log(state: State, count: int, memory_socket: Path | None, as_json: bool) -> None:
    """List the newest COUNT memory edits (default 20), oldest first.

    An edit that `bxctl memory revert` can take back now is marked (revertable); with --json each
    line has "revertable": true or false.

    \b
    Example:
        bxctl memory log 5
    """
    client.emit(client.admin(memory_socket_path(state, memory_socket), "log", str(count)), as_json)


@click.command(name="undo")
@click.argument("edit_id", required=False, default="")
@memory_socket_option
@json_option
@pass_state
def memory_undo(state: State, edit_id: str, memory_socket: Path | None, as_json: bool) -> None:
    """Undo EDIT_ID (default: the latest edit of memory.md or user.md).

    It must be the latest edit of its file, and the file must still hold what it left. To take
    back an older edit while later edits of other entries stand, use `bxctl memory revert`.

    \b
    Example:
        bxctl memory undo 2026-09-24-0003
    """
    client.emit(client.admin(memory_socket_path(state, memory_socket), "undo", edit_id), as_json)


@click.command(name="revert")
@click.argument("edit_id")
@click.option(
    "--yes",
    is_flag=True,
    help="Put back text that came from an untrusted or above-private origin (it reaches every session).",
)
@memory_socket_option
@json_option
@pass_state
def memory_revert(state: State, edit_id: str, yes: bool, memory_socket: Path | None, as_json: bool) -> None:
    """Revert the edit EDIT_ID of memory.md, user.md or conventions.md, however old.

    The entries it wrote are taken out and the entries it took out come back at their old place, as
    long as no later edit changed those entries (later edits of other entries stay). Otherwise it is
    refused, naming the later edit: revert that one first, or edit by hand. What comes back passes
    every check and the limit; entries moved to notes.md stay there. The revert is journalled and
    can itself be reverted. `bxctl memory log` marks the edits that can be reverted now.

    \b
    Example:
        bxctl memory log
        bxctl memory revert 2026-09-17-0004
    """
    args = {"yes": True} if yes else {}
    client.emit(client.admin(memory_socket_path(state, memory_socket), "revert", edit_id, args), as_json)


@click.command(name="pending")
@memory_socket_option
@json_option
@pass_state
def memory_pending(state: State, memory_socket: Path | None, as_json: bool) -> None:
    """List writes waiting for review (when [memory] review = true).

    \b
    Example:
        bxctl memory pending --json
    """
    client.emit(client.admin(memory_socket_path(state, memory_socket), "pending"), as_json)


@click.command(name="accept")
@click.argument("pending_id")
@click.option(
    "--yes",
    is_flag=True,
    help="Accept a write held back from an untrusted or above-private origin (it reaches every session).",
)
@memory_socket_option
@json_option
@pass_state
def memory_accept(
    state: State, pending_id: str, yes: bool, memory_socket: Path | None, as_json: bool
) -> None:
    """Apply the staged write PENDING_ID, with every check, to the file as it is now.

    A write the identity-write rule held back (from a session that read untrusted content or data
    above private) becomes your own edit; `bxctl memory pending` shows its origin, and accepting one
    from an untrusted or above-private origin needs --yes.

    \b
    Example:
        bxctl memory accept p-2026-09-24-0001
        bxctl memory accept --yes p-2026-09-24-0002
    """
    args = {"yes": True} if yes else {}
    client.emit(client.admin(memory_socket_path(state, memory_socket), "accept", pending_id, args), as_json)


@click.command(name="reject")
@click.argument("pending_id")
@memory_socket_option
@json_option
@pass_state
def memory_reject(state: State, pending_id: str, memory_socket: Path | None, as_json: bool) -> None:
    """Discard the staged write PENDING_ID (journalled).

    \b
    Example:
        bxctl memory reject p-2026-09-24-0001
    """
    client.emit(client.admin(memory_socket_path(state, memory_socket), "reject", pending_id), as_json)


_UNDECODABLE = re.compile("[\udc80-\udcff]")


def owner_text(text: str) -> str:
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


@click.command(name="add")
@click.option(
    "--file",
    "file",
    type=click.Choice(["memory", "user"]),
    required=True,
    help="memory.md (about the work) or user.md (about you).",
)
@click.argument("text")
@memory_socket_option
@json_option
@pass_state
def memory_add(state: State, file: str, text: str, memory_socket: Path | None, as_json: bool) -> None:
    """Add TEXT as an entry of memory.md or user.md yourself ("-" reads standard input).

    The same rules apply as to the agent's writes; the journal names you as the writer.

    \b
    Example:
        bxctl memory add --file user "Prefers answers in UTC."
    """
    args = {"file": file, "text": owner_text(text)}
    client.emit(client.admin(memory_socket_path(state, memory_socket), "add", "", args), as_json)


_CONFIDENCES = click.Choice(["confirmed", "observed-once", "inferred", "unknown"])


@click.command(name="note")
@click.argument("text")
@click.option("--kind", type=ITEM_KINDS, help="state (a current value) or knowledge (the default).")
@click.option("--subject", help="What a state note is the current value of, e.g. host:public-ip.")
@click.option("--confidence", type=_CONFIDENCES, help="epistemic-status-v1.")
@click.option("--scope", help="Where the note applies, e.g. environment.")
@memory_socket_option
@json_option
@pass_state
def memory_note(
    state: State,
    *,
    text: str,
    kind: str | None,
    subject: str | None,
    confidence: str | None,
    scope: str | None,
    memory_socket: Path | None,
    as_json: bool,
) -> None:
    """Append TEXT to notes.md as your own note ("-" reads standard input); it becomes an item.

    A state note needs --subject; two state items of one subject are linked by supersede.

    \b
    Example:
        bxctl memory note "The staging server moved to rack 4."
        bxctl memory note --kind state --subject host:staging "Staging is 10.0.0.7."
    """
    args = {"kind": kind, "subject": subject, "confidence": confidence, "scope": scope}
    fields = {k: v for k, v in args.items() if v is not None}
    client.emit(
        client.admin(memory_socket_path(state, memory_socket), "note", owner_text(text), fields), as_json
    )
