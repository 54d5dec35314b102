"""bxctl: the owner's command line (M5a section 10; DESIGN 10.5).

Noun groups and verb commands (STYLE 8); the home is resolved once in the group callback (STYLE 10):
``--home``, else ``$BOXMAKER_HOME``, else the system or user default (DESIGN 10.1).
"""

from __future__ import annotations

import json

import click

from boxmaker.bxctl import client, roles
from boxmaker.bxctl.broker import approvals, approve, deny, grants
from boxmaker.bxctl.chat import chat
from boxmaker.bxctl.jobs import jobs
from boxmaker.bxctl.memory import memory
from boxmaker.bxctl.memory.views import reindex
from boxmaker.bxctl.sessions import sessions
from boxmaker.bxctl.state import State, pass_state
from boxmaker.proto import settings
from boxmaker.proto.errors import HomeError
from boxmaker.proto.fsio import ensure_dir
from boxmaker.proto.home import Layout, ensure_home, resolve_home


@click.group(cls=client.JsonErrors, context_settings={"help_option_names": ["-h", "--help"]})
@click.option(
    "--home",
    envvar="BOXMAKER_HOME",
    type=click.Path(file_okay=False),
    help="The home folder (default: $BOXMAKER_HOME, else /var/lib/boxmaker or ~/.local/share/boxmaker).",
)
@click.version_option(package_name="boxmaker")
@click.pass_context
def cli(ctx: click.Context, home: str | None) -> None:
    """bxctl: start boxmaker's roles and look after the agent's memory.

    \b
    Example:
        bxctl up
        bxctl memory files
        bxctl memory search "deploy day"
    """
    if home is not None and not home.strip():
        raise click.BadParameter("the home folder cannot be empty", param_hint="--home")
    ctx.obj = State(Layout(resolve_home(home)))


@cli.command(name="up")
@click.option(
    "--model-url",
    envvar="BOXMAKER_MODEL_URL",
    default=roles.DEFAULT_MODEL_URL,
    show_default=True,
    help="The model server (llama-server or any OpenAI-compatible one); also $BOXMAKER_MODEL_URL.",
)
@click.option(
    "--n-ctx",
    type=click.IntRange(256, 10_000_000),
    help="The server's context per slot, when it does not report it (or is not running yet).",
)
@click.pass_context
def up(ctx: click.Context, model_url: str, n_ctx: int | None) -> None:
    """Start memoryd, brokerd and loopd for the home in the background; a no-op for those running.

    Writes each role's config under {home}/config only where none exists. loopd's records the model
    server's URL and per-slot context, read from the server's /props or /slots. Makes {home}/grants
    and {home}/jobs for the owner's grant and job files.

    \b
    Example:
        bxctl up --model-url http://127.0.0.1:8080
    """
    state: State = ctx.obj
    try:
        model_url = settings.model_url(model_url)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--model-url (or $BOXMAKER_MODEL_URL)") from None
    try:
        ensure_home(state.layout.home)
        for folder in (state.layout.grants, state.layout.jobs):  # the owner's: made for them, 0700
            ensure_dir(folder)
    except (HomeError, OSError) as exc:
        raise click.ClickException(str(exc)) from None
    _loopd_config(
        state,
        model_url,
        n_ctx,
        explicit=ctx.get_parameter_source("model_url") is not None
        and ctx.get_parameter_source("model_url") != click.core.ParameterSource.DEFAULT,
    )
    for role in roles.ROLES:
        current = roles.status(state.layout, role)
        if current.running:
            click.echo(f"{role.name} already running (pid {current.pid})")
            continue
        config, written = (
            roles.write_config(state.layout, role)
            if role is not roles.LOOPD
            else (
                role.config(state.layout),
                False,
            )
        )
        if written:
            click.echo(f"wrote {config}")
        try:
            started = roles.start(state.layout, role)
        except roles.AlreadyRunning as exc:
            click.echo(str(exc))
            continue
        except roles.StartError as exc:
            raise click.ClickException(str(exc)) from None
        click.echo(f"{role.name} started (pid {started.pid}): {started.detail}")
    click.echo(f"home: {state.layout.home}")


def _loopd_config(state: State, model_url: str, n_ctx: int | None, explicit: bool) -> None:
    """Write loopd.toml from what the model server says, unless the owner already has one."""
    path = roles.LOOPD.config(state.layout)
    if path.exists():
        if explicit:
            click.echo(f"kept {path}: its [model] url is the one loopd uses (edit it to change)")
        return
    probe = roles.model_probe(model_url)
    if not probe.answered and n_ctx is None:
        raise click.ClickException(
            f"{probe.detail}; start the model server first (README, 'The model server'), "
            "or give --n-ctx N to write loopd's config without asking it"
        )
    if probe.answered and probe.n_ctx is None and n_ctx is None:
        raise click.ClickException(
            f"{probe.detail} does not report its context size; give --n-ctx N (its context per slot)"
        )
    if probe.n_ctx is not None and n_ctx is not None and probe.n_ctx != n_ctx:
        raise click.ClickException(
            f"{probe.detail} has {probe.n_ctx:,} tokens of context per slot but --n-ctx says {n_ctx:,}; "
            f"drop --n-ctx or give --n-ctx {probe.n_ctx}"
        )
    source = "as the server reported it" if probe.n_ctx else "from --n-ctx"
    _, written = roles.write_config(
        state.layout,
        roles.LOOPD,
        roles.loopd_config_text(model_url, n_ctx or probe.n_ctx, probe.slots, source),
    )
    if written:
        click.echo(f"wrote {path} ({probe.detail if probe.answered else model_url})")
    if probe.slots == 1:
        click.echo("the model server has one slot: live sessions and background work share slot 0")


@cli.command(name="down")
@pass_state
def down(state: State) -> None:
    """Stop the roles `bxctl up` started.

    \b
    Example:
        bxctl down
    """
    failed = False
    for role in reversed(roles.ROLES):
        message = roles.stop(state.layout, role)
        failed = failed or "still running" in message
        click.echo(message)
    if failed:
        raise click.ClickException("some roles did not stop")


@cli.command(name="status")
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of text.")
@pass_state
def status(state: State, as_json: bool) -> None:
    """Say which roles run for the home; exit 1 when one is down.

    \b
    Example:
        bxctl status --json
    """
    rows = [roles.status(state.layout, role) for role in roles.ROLES]
    if as_json:
        data = {
            "home": str(state.layout.home),
            "roles": [{"name": r.name, "running": r.running, "pid": r.pid, "detail": r.detail} for r in rows],
        }
        click.echo(json.dumps(data, indent=2))
    else:
        for row in rows:
            click.echo(f"{row.name}: {'running' if row.running else 'down'} - {row.detail}")
    if not all(r.running for r in rows):
        raise SystemExit(1)


cli.add_command(reindex)
cli.add_command(memory)
cli.add_command(chat)
cli.add_command(sessions)
cli.add_command(jobs)
cli.add_command(approvals)
cli.add_command(approve)
cli.add_command(deny)
cli.add_command(grants)


def main() -> None:
    """Console-script entry point."""
    cli(prog_name="bxctl")
