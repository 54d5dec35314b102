"""brokerd's command line: ``brokerd serve [--config PATH] [--home PATH] [-v]`` (DESIGN 10.1).

Thin: parse, build the frozen config, call `server.run` (STYLE 11).
"""

from __future__ import annotations

import logging
import sys
from pathlib import Path

import click

from boxmaker.brokerd import config as brokerd_config
from boxmaker.brokerd.server import StartFailed, run
from boxmaker.proto.errors import ConfigError


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
def cli() -> None:
    """brokerd: decides, runs and audits the agent's tool calls.

    \b
    Example:
        brokerd serve --config ~/.config/boxmaker/brokerd.toml
    """


@cli.command(name="serve")
@click.option(
    "--config",
    "config_path",
    type=click.Path(dir_okay=False, path_type=Path),
    help="brokerd.toml (defaults apply without it).",
)
@click.option(
    "--home",
    help="The home folder (else [paths] home, else $BOXMAKER_HOME, else the system or user default).",
)
@click.option("-v", "--verbose", is_flag=True, help="Log debug lines too.")
def serve(config_path: Path | None, home: str | None, verbose: bool) -> None:
    """Run brokerd in the foreground until SIGTERM or Ctrl-C.

    \b
    Example:
        brokerd serve --home /tmp/agent-home
    """
    logging.basicConfig(
        level=logging.DEBUG if verbose else logging.INFO,
        format="%(asctime)s brokerd %(levelname)s %(message)s",
        stream=sys.stderr,
    )
    if home is not None and not home.strip():
        raise click.BadParameter("the home folder cannot be empty", param_hint="--home")
    try:
        config = brokerd_config.load(config_path, home)
    except ConfigError as exc:
        raise click.ClickException(f"brokerd cannot start: {exc} (runbook: brokerd-start-failed)") from None
    try:
        run(config)
    except StartFailed as exc:
        raise click.ClickException(str(exc)) from None


def main() -> None:
    """Console-script entry point."""
    cli(prog_name="brokerd")
