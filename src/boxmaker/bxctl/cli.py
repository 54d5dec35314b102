"""bxctl: the owner's command line (M5a section 10; DESIGN 10.5).

Noun groups and verb commands (STYLE 8); the home is resolved once in the group callback (STYLE 10):
``--home``, else ``$BOXMAKER_HOME``, else the system or user default (DESIGN 10.1).
"""

from __future__ import annotations

import os
import re
from concurrent.futures import ThreadPoolExecutor

import click

from boxmaker.bxctl import client, roles
from boxmaker.bxctl import model as model_keys
from boxmaker.bxctl.broker import approvals, approve, deny, grants
from boxmaker.bxctl.chat import chat
from boxmaker.bxctl.imports import import_
from boxmaker.bxctl.jobs import jobs
from boxmaker.bxctl.logs import logs
from boxmaker.bxctl.mcp import mcp
from boxmaker.bxctl.memory import memory
from boxmaker.bxctl.memory.views import reindex
from boxmaker.bxctl.sessions import sessions
from boxmaker.bxctl.state import State, pass_state
from boxmaker.bxctl.status import status
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
@click.option("--model", "model_name", help='The "model" name to send (Ollama, vLLM and LM Studio need one).')
@click.option("--api-key-env", help="An environment variable holding the server's API key (never written).")
@click.option(
    "--n-ctx",
    type=click.IntRange(256, 10_000_000),
    help="The server's context per slot, when it does not report it.",
)
@click.pass_context
def up(
    ctx: click.Context, model_url: str, model_name: str | None, api_key_env: str | None, n_ctx: int | None
) -> None:
    """Start memoryd, brokerd and loopd for the home in the background; a no-op for those running.

    Says what answers at the model URL. Writes each role's config under {home}/config only where none
    exists; on a home that has loopd.toml, changes the [model] keys given here in place and says what
    changed. No model server is needed: loopd waits for it. Makes {home}/grants and {home}/jobs.

    \b
    Example:
        bxctl up
        bxctl up --model-url http://127.0.0.1:11434 --model qwen2.5:1.5b --n-ctx 8192
        OPENAI_KEY=... bxctl up --model-url https://host/v1 --model m --api-key-env OPENAI_KEY --n-ctx 32768
    """
    state: State = ctx.obj
    explicit = ctx.get_parameter_source("model_url") not in (None, click.core.ParameterSource.DEFAULT)
    wanted = _wanted(model_url if explicit else None, model_name, api_key_env, n_ctx)
    try:
        # Made when missing, 0700; an existing folder's mode is left for the roles' start-up check to
        # judge (a home or grants/ another user could write is named, never silently fixed).
        ensure_home(state.layout.home, tighten=False)
        for folder in (state.layout.grants, state.layout.jobs):  # the owner's: made for them
            ensure_dir(folder, tighten=False)
    except (HomeError, OSError) as exc:
        raise click.ClickException(str(exc)) from None
    path = roles.LOOPD.config(state.layout)
    existed = path.exists()
    changes = model_keys.change_existing(path, wanted) if existed else []
    url = (roles.configured_model_url(path) if existed else None) or wanted.url or model_url
    probe = roles.model_probe(settings.model_url(url) if _url_ok(url) else url)
    click.echo(model_keys.found_line(probe))
    if not existed:
        model_keys.write_new(state, settings.model_url(model_url), wanted, probe)
    for line in changes:
        click.echo(f"changed {path}: {line}")
    _start_roles(state, restart_loopd=bool(changes))
    click.echo(f"home: {state.layout.home}")


def _wanted(url: str | None, name: str | None, key_env: str | None, n_ctx: int | None) -> model_keys.Wanted:
    """The model keys given on the command line, checked."""
    if url is not None:
        try:
            url = settings.model_url(url)
        except ValueError as exc:
            raise click.BadParameter(str(exc), param_hint="--model-url (or $BOXMAKER_MODEL_URL)") from None
    if name is not None and (not name.strip() or len(name) > 200 or not name.isprintable()):
        raise click.BadParameter("a model name is 1 to 200 printable characters", param_hint="--model")
    if key_env is not None:
        if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]{0,127}", key_env):
            raise click.BadParameter(
                "the name of an environment variable (letters, digits and _), not the key itself",
                param_hint="--api-key-env",
            )
        if key_env not in os.environ:
            click.echo(
                f"note: ${key_env} is not set in this shell; loopd reads the key from it when it starts"
            )
    return model_keys.Wanted(url, name, key_env, n_ctx)


def _url_ok(url: str) -> bool:
    try:
        settings.model_url(url)
    except ValueError:
        return False
    return True


def _start_roles(state: State, restart_loopd: bool) -> None:
    """Start each role that does not answer yet (loopd again when its model keys just changed)."""
    for role in roles.ROLES:
        current = roles.status(state.layout, role)
        if current.running and role is roles.LOOPD and restart_loopd:
            click.echo(roles.stop(state.layout, role) + " (its model settings changed)")
        elif current.running:
            click.echo(f"{role.name} already running (pid {current.pid})")
            continue
        if role is not roles.LOOPD:
            config, written = roles.write_config(state.layout, role)
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


@cli.command(name="down")
@pass_state
def down(state: State) -> None:
    """Stop the roles `bxctl up` started.

    \b
    Example:
        bxctl down
    """
    with ThreadPoolExecutor(max_workers=len(roles.ROLES)) as pool:  # all at once: each waits for its own
        messages = list(pool.map(lambda role: roles.stop(state.layout, role), reversed(roles.ROLES)))
    for message in messages:
        click.echo(message)
    if any("still running" in message for message in messages):
        raise click.ClickException("some roles did not stop")


cli.add_command(reindex)
cli.add_command(memory)
cli.add_command(import_)
cli.add_command(chat)
cli.add_command(sessions)
cli.add_command(jobs)
cli.add_command(approvals)
cli.add_command(approve)
cli.add_command(deny)
cli.add_command(grants)
cli.add_command(model_keys.model)
cli.add_command(status)
cli.add_command(logs)
cli.add_command(mcp)


def main() -> None:
    """Console-script entry point."""
    cli(prog_name="bxctl")
