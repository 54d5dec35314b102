"""``bxctl logs ROLE``: the end of a role's log, ``{home}/run/<role>.log`` (what `bxctl up` started it
with), and with ``--follow`` what it writes next (issue 18)."""

from __future__ import annotations

import time

import click

from boxmaker.bxctl import roles
from boxmaker.bxctl.state import State, pass_state
from boxmaker.proto.escape import escape

_ROLES = {role.name: role for role in roles.ROLES}


@click.command(name="logs")
@click.argument("role", type=click.Choice(sorted(_ROLES)))
@click.option(
    "-n", "--lines", type=click.IntRange(1, 100_000), default=40, show_default=True, help="Lines to show."
)
@click.option("-f", "--follow", is_flag=True, help="Go on printing what the role writes (Ctrl-C stops).")
@pass_state
def logs(state: State, role: str, lines: int, follow: bool) -> None:
    """Print the end of a role's log (memoryd, brokerd or loopd).

    \b
    Example:
        bxctl logs loopd -n 100
        bxctl logs memoryd --follow
    """
    path = _ROLES[role].log_file(state.layout)
    try:
        handle = path.open("rb")
    except FileNotFoundError:
        raise click.ClickException(
            f"{path} does not exist: {role} was not started by `bxctl up` for this home"
        ) from None
    with handle:
        data = handle.read()
        for line in data.decode("utf-8", errors="replace").splitlines()[-lines:]:
            click.echo(escape(line))
        if not follow:
            return
        try:
            while True:
                more = handle.read()
                if more:
                    click.echo(escape(more.decode("utf-8", errors="replace")), nl=False)
                time.sleep(0.5)
        except KeyboardInterrupt:
            return
