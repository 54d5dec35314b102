"""The options bxctl's commands share, and where each socket option points when it is not given
(DESIGN 10.5: commands that talk to a role take its socket path as an option; listings take ``--json``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from boxmaker.bxctl import roles
from boxmaker.bxctl.state import State


def memory_socket_option(func: Any) -> Any:
    """The ``--memory-socket PATH`` option every memory command takes."""
    return click.option(
        "--memory-socket",
        type=click.Path(path_type=Path, dir_okay=False),
        help="memoryd's admin socket (default: [sockets] admin in {home}/config/memoryd.toml, "
        "else {home}/run/owner-memory/admin.sock).",
    )(func)


def broker_socket_option(func: Any) -> Any:
    """The ``--broker-socket PATH`` option every broker command takes."""
    return click.option(
        "--broker-socket",
        type=click.Path(path_type=Path, dir_okay=False),
        help="brokerd's admin socket (default: [sockets] admin in {home}/config/brokerd.toml, "
        "else {home}/run/owner-broker/admin.sock).",
    )(func)


def loop_socket_option(func: Any) -> Any:
    """The ``--loop-socket PATH`` option of the commands that talk to loopd."""
    return click.option(
        "--loop-socket",
        type=click.Path(path_type=Path, dir_okay=False),
        help="loopd's owner socket (default: [sockets] owner in {home}/config/loopd.toml, "
        "else {home}/run/owner-loop/chat.sock).",
    )(func)


def json_option(func: Any) -> Any:
    """The ``--json`` flag of listing commands."""
    return click.option("--json", "as_json", is_flag=True, help="Print JSON instead of text.")(func)


#: The ``--kind`` of a memory item: a current value, or knowledge.
ITEM_KINDS = click.Choice(["state", "knowledge"])


def memory_socket_path(state: State, path: Path | None) -> Path:
    """``--memory-socket``, else ``[sockets] admin`` in {home}/config/memoryd.toml, else the default."""
    return path or roles.MEMORYD.socket(state.layout)


def broker_socket_path(state: State, path: Path | None) -> Path:
    """``--broker-socket``, else ``[sockets] admin`` in {home}/config/brokerd.toml, else the default."""
    if path is not None:
        return path
    configured = roles.configured_socket(state.layout.config / "brokerd.toml", "admin")
    return configured or state.layout.broker_admin_socket
