"""loopd's command line: ``loopd serve [--config PATH] [--home PATH]`` (M5a section 9).

Thin: parse, build the frozen config, call `server.run` (STYLE 11).
"""

from __future__ import annotations

import logging
import sys
from pathlib import Path

import click

from boxmaker.loopd import config as loopd_config
from boxmaker.loopd.server import StartFailed, run
from boxmaker.proto.errors import ConfigError


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
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
    logging.basicConfig(
        level=logging.DEBUG if verbose else logging.INFO,
        format="%(asctime)s loopd %(levelname)s %(message)s",
        stream=sys.stderr,
    )
    logging.getLogger("httpx").setLevel(logging.WARNING)
    if home is not None and not home.strip():
        raise click.BadParameter("the home folder cannot be empty", param_hint="--home")
    try:
        config = loopd_config.load(config_path, home)
    except ConfigError as exc:
        raise click.ClickException(f"{exc} (runbook: loopd-start-failed)") from None
    try:
        run(config)
    except StartFailed as exc:
        raise click.ClickException(str(exc)) from None


def main() -> None:
    """Console-script entry point."""
    cli(prog_name="loopd")
