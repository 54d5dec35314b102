"""``bxctl memory warm`` and ``bxctl memory dream show/apply/discard``: autodream's cooling undone, and its
staged passes (seed 003 section 14).
"""

from __future__ import annotations

from pathlib import Path

import click

from boxmaker.bxctl import client
from boxmaker.bxctl.options import json_option, memory_socket_option, memory_socket_path
from boxmaker.bxctl.state import State, pass_state


@click.command(name="warm")
@click.argument("item_id")
@memory_socket_option
@json_option
@pass_state
def memory_warm(state: State, item_id: str, memory_socket: Path | None, as_json: bool) -> None:
    """Undo autodream's cooling of knowledge item ITEM_ID: it goes back under Facts and lessons.

    \b
    Example:
        bxctl memory warm mem-2026-11-29-001
    """
    client.emit(client.admin(memory_socket_path(state, memory_socket), "warm", item_id), as_json)


@click.group(name="dream")
def memory_dream() -> None:
    """Staged autodream passes ([dream] stage = true in memoryd.toml): show, apply, discard.

    \b
    Example:
        bxctl memory dream show
    """


@memory_dream.command(name="show")
@click.argument("session", required=False, default="")
@memory_socket_option
@json_option
@pass_state
def memory_dream_show(state: State, session: str, memory_socket: Path | None, as_json: bool) -> None:
    """List the staged passes, or the actions SESSION (job-dream-t...) staged.

    \b
    Example:
        bxctl memory dream show
        bxctl memory dream show job-dream-t1790000000
    """
    client.emit(client.admin(memory_socket_path(state, memory_socket), "dream-show", session), as_json)


@memory_dream.command(name="apply")
@click.argument("session")
@memory_socket_option
@json_option
@pass_state
def memory_dream_apply(state: State, session: str, memory_socket: Path | None, as_json: bool) -> None:
    """Apply each action SESSION staged, with every check, against memory as it is now.

    Says per action what happened; a refused action changes nothing and the others still apply.

    \b
    Example:
        bxctl memory dream apply job-dream-t1790000000
    """
    client.emit(client.admin(memory_socket_path(state, memory_socket), "dream-apply", session), as_json)


@memory_dream.command(name="discard")
@click.argument("session")
@memory_socket_option
@json_option
@pass_state
def memory_dream_discard(state: State, session: str, memory_socket: Path | None, as_json: bool) -> None:
    """Close the staged pass SESSION without applying any of it.

    \b
    Example:
        bxctl memory dream discard job-dream-t1790000000
    """
    client.emit(client.admin(memory_socket_path(state, memory_socket), "dream-discard", session), as_json)
