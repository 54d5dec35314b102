"""memoryd's command line: ``memoryd serve [--config PATH] [--home PATH]`` (M5a section 11).

Thin: parse, then `proto.daemon.serve` builds the frozen config and calls `server.run` (STYLE 11).
"""

from __future__ import annotations

from pathlib import Path

import click

from boxmaker.memoryd import config, server
from boxmaker.proto import daemon
from boxmaker.proto.errors import CannotStart, EmptyHome

ROLE = daemon.Role("memoryd", config.load, server.run, server.StartFailed)


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="boxmaker")
def cli() -> None:
    """memoryd: the local memory daemon.

    \b
    Example:
        memoryd serve --config ~/.config/boxmaker/memoryd.toml
    """


@cli.command(name="serve")
@click.option(
    "--config",
    "config_path",
    type=click.Path(dir_okay=False, path_type=Path),
    help="memoryd.toml (defaults apply without it).",
)
@click.option(
    "--home",
    help="The home folder (else [paths] home, else $BOXMAKER_HOME, else the system or user default).",
)
@click.option("-v", "--verbose", is_flag=True, help="Log debug lines too.")
def serve(config_path: Path | None, home: str | None, verbose: bool) -> None:
    """Run memoryd in the foreground until SIGTERM or Ctrl-C.

    \b
    Example:
        memoryd serve --home /tmp/agent-home
    """
    try:
        daemon.serve(ROLE, config_path, home, verbose)
    except EmptyHome as exc:
        raise click.BadParameter(str(exc), param_hint="--home") from None
    except CannotStart as exc:
        raise click.ClickException(str(exc)) from None


def main() -> None:
    """Console-script entry point."""
    cli(prog_name="memoryd")
