"""loopd's command line: ``loopd serve [--config PATH] [--home PATH]`` (M5a section 9).

Thin: parse, then `proto.daemon.serve` builds the frozen config and calls `server.run` (STYLE 11).
"""

from __future__ import annotations

from pathlib import Path

import click

from boxmaker.loopd import config, server
from boxmaker.proto import daemon
from boxmaker.proto.errors import CannotStart, EmptyHome

ROLE = daemon.Role("loopd", config.load, server.run, server.StartFailed, quiet=("httpx",))


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="boxmaker")
def cli() -> None:
    """loopd: the agent loop, the only role that calls the model.

    \b
    Example:
        loopd serve --config ~/.config/boxmaker/loopd.toml
    """


@cli.command(name="serve")
@click.option(
    "--config",
    "config_path",
    type=click.Path(dir_okay=False, path_type=Path),
    help="loopd.toml (defaults apply without it).",
)
@click.option(
    "--home",
    help="The home folder (else [paths] home, else $BOXMAKER_HOME, else the system or user default).",
)
@click.option("-v", "--verbose", is_flag=True, help="Log debug lines too.")
def serve(config_path: Path | None, home: str | None, verbose: bool) -> None:
    """Run loopd in the foreground until SIGTERM or Ctrl-C.

    \b
    Example:
        loopd serve --home /tmp/agent-home
    """
    try:
        daemon.serve(ROLE, config_path, home, verbose)
    except EmptyHome as exc:
        raise click.BadParameter(str(exc), param_hint="--home") from None
    except CannotStart as exc:
        raise click.ClickException(str(exc)) from None


def main() -> None:
    """Console-script entry point."""
    cli(prog_name="loopd")
