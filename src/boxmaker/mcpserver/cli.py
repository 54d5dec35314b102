"""boxmaker-mcp's command line: ``boxmaker-mcp --client NAME [--home PATH]`` (issue 17).

Thin: check the arguments, ask memoryd once (`server.Shim.start`), then serve MCP on stdin and stdout
until the client closes stdin. Logs go to stderr (stdout carries only MCP messages).
"""

from __future__ import annotations

import logging
from pathlib import Path

import anyio
import click

from boxmaker.mcpserver.memoryd import MemorySocket
from boxmaker.mcpserver.server import Shim, serve
from boxmaker.mcpserver.session import Session
from boxmaker.proto.home import Layout, resolve_home
from boxmaker.proto.ids import is_mcp_client

#: Seconds a call waits for memoryd to answer a connect (a restart) before it is `memoryd-unreachable`.
DEFAULT_WAIT_S = 5.0


def _client(_ctx: click.Context, _param: click.Parameter, value: str) -> str:
    if not is_mcp_client(value):
        raise click.BadParameter(
            f"{value[:40]!r} is not a client name: 1 to 24 characters of a-z, 0-9 and '-' "
            "(for example claude-code)"
        )
    return value


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@click.option(
    "--client",
    required=True,
    callback=_client,
    help="The MCP client's name, for provenance and the owner's trust ([a-z0-9-], 1 to 24 characters).",
)
@click.option(
    "--home",
    envvar="BOXMAKER_HOME",
    type=click.Path(file_okay=False),
    help="The home folder (default: $BOXMAKER_HOME, else /var/lib/boxmaker or ~/.local/share/boxmaker).",
)
@click.option(
    "--socket",
    "socket_path",
    type=click.Path(dir_okay=False, path_type=Path),
    help="memoryd's MCP socket, when memoryd.toml sets [sockets] mcp (default: run/mcp-memory/mcp.sock).",
)
@click.option(
    "--wait",
    type=click.FloatRange(0, 120),
    default=DEFAULT_WAIT_S,
    show_default=True,
    help="Seconds a call waits for memoryd to come back (a restart) before it answers memoryd-unreachable.",
)
@click.option("--untrusted", is_flag=True, help="Start the session untrusted (as if it had declared taint).")
@click.option("-v", "--verbose", is_flag=True, help="Log debug lines too (on stderr).")
@click.version_option(package_name="boxmaker")
def cli(
    *, client: str, home: str | None, socket_path: Path | None, wait: float, untrusted: bool, verbose: bool
) -> None:
    """Serve boxmaker's memory to one MCP client over stdio: the tools recall and memory.

    memoryd must run (`bxctl up`); a model server is not needed. Every call is one request to memoryd,
    which decides the session's label from the owner's [mcp.clients.NAME] trust (untrusted by default).
    `bxctl mcp config CLIENT` prints the lines each client needs.

    \b
    Example:
        boxmaker-mcp --client claude-code
        BOXMAKER_HOME=~/agent boxmaker-mcp --client codex --wait 10
    """
    if home is not None and not home.strip():
        raise click.BadParameter("the home folder cannot be empty", param_hint="--home")
    logging.basicConfig(
        level=logging.DEBUG if verbose else logging.WARNING, format="boxmaker-mcp: %(levelname)s %(message)s"
    )
    layout = Layout(resolve_home(home))
    shim = Shim(Session(client, untrusted), MemorySocket(socket_path or layout.memory_mcp_socket, wait))
    shim.start()
    anyio.run(serve, shim)


def main() -> None:
    """Console-script entry point."""
    cli(prog_name="boxmaker-mcp")
