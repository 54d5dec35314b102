"""The model server loopd uses: what ``bxctl up`` learns and writes into loopd.toml, and ``bxctl model``
(DESIGN 10.5 as changed by issue 18, docs/decisions.md).

``bxctl up`` asks the server what it is (`roles.model_probe`) and says what it found in one line, a chat
template that cannot take tools included. On a new home it writes loopd.toml: the URL, the context per
slot as the server reports it (or ``--n-ctx``; neither is needed when no server answers yet: loopd learns
the context when the server first answers), ``[model] name`` and ``[model] api_key_env``. On a home that
has loopd.toml, the keys given on the command line (``--model-url``, ``--model``, ``--api-key-env``,
``--n-ctx``) are changed in place, every other line and comment kept, and each change is printed. The API
key itself is never written anywhere: loopd reads it from the named environment variable.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import click
import tomlkit
from tomlkit.exceptions import TOMLKitError

from boxmaker.bxctl import roles
from boxmaker.bxctl.state import State, pass_state
from boxmaker.proto import wire
from boxmaker.proto.errors import PeerError
from boxmaker.proto.messages import Status, StatusReply

#: The fix said when a llama-server's chat template cannot take tools.
NO_TOOLS_FIX = (
    "its chat template cannot take tools, so the model never sees memory or recall: restart llama-server "
    "with --jinja and a tool-capable --chat-template-file (runbook: model-no-tools)"
)


@dataclass(frozen=True, slots=True)
class Wanted:
    """What the owner gave ``bxctl up`` about the model (None: not given)."""

    url: str | None
    name: str | None
    api_key_env: str | None
    n_ctx: int | None


def found_line(probe: roles.ModelProbe) -> str:
    """One line saying what answers at the URL (or that nothing does yet)."""
    if probe.not_model:
        return f"model: {probe.detail}"
    if not probe.answered:
        return f"model: {probe.detail}; loopd starts and waits for it (chat works once it runs)"
    parts = [probe.detail]
    if probe.n_ctx:
        parts.append(f"n_ctx {probe.n_ctx:,} per slot")
    elif not probe.llama:
        parts.append("context not reported")
    if probe.slots:
        parts.append(f"{probe.slots} slot{'' if probe.slots == 1 else 's'}")
    if probe.models:
        parts.append(f"models: {', '.join(probe.models[:5])}")
    if probe.supports_tools is False:
        parts.append(NO_TOOLS_FIX)
    elif probe.supports_tools:
        parts.append("its chat template takes tools")
    return "model: " + "; ".join(parts)


def check_n_ctx(probe: roles.ModelProbe, n_ctx: int | None) -> None:
    """Refuse an `n_ctx` the server contradicts, and a server that answers without saying its context
    when none was given.

    Raises:
        click.ClickException: with what to give instead.
    """
    if probe.answered and probe.n_ctx is None and n_ctx is None:
        raise click.ClickException(
            f"{probe.detail} does not report its context size; give --n-ctx N (its context per slot)"
        )
    if probe.n_ctx is not None and n_ctx is not None and probe.n_ctx != n_ctx:
        raise click.ClickException(
            f"{probe.detail} has {probe.n_ctx:,} tokens of context per slot but --n-ctx says {n_ctx:,}; "
            f"drop --n-ctx or give --n-ctx {probe.n_ctx}"
        )


def write_new(state: State, url: str, wanted: Wanted, probe: roles.ModelProbe) -> None:
    """Write loopd.toml on a home that has none."""
    if probe.answered:
        check_n_ctx(probe, wanted.n_ctx)
    n_ctx = wanted.n_ctx or probe.n_ctx
    source = "as the server reported it" if probe.n_ctx else "from --n-ctx"
    text = roles.loopd_config_text(
        url, n_ctx, probe.slots, source, name=wanted.name, key_env=wanted.api_key_env
    )
    path, written = roles.write_config(state.layout, roles.LOOPD, text)
    if written:
        click.echo(f"wrote {path}")
    if probe.slots == 1:
        click.echo("the model server has one slot: live sessions and background work share slot 0")


def change_existing(path: Path, wanted: Wanted) -> list[str]:
    """Change the keys the owner gave in loopd.toml, in place (comments and other lines kept).

    Returns:
        One line per change (``[model] url: "A" -> "B"``); empty when nothing changed.

    Raises:
        click.ClickException: loopd.toml cannot be read, is not TOML, or cannot be written.
    """
    try:
        document = tomlkit.parse(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, TOMLKitError) as exc:
        raise click.ClickException(
            f"cannot change {path}: {exc}; fix it by hand (docs/configuration.md)"
        ) from None
    keys: list[tuple[str, str, Any]] = [
        ("model", "url", wanted.url),
        ("model", "name", wanted.name),
        ("model", "api_key_env", wanted.api_key_env),
        ("expect", "n_ctx", wanted.n_ctx),
    ]
    changes = []
    for table, key, value in keys:
        if value is None:
            continue
        section = document.setdefault(table, tomlkit.table())
        before = section.get(key)
        if before == value:
            continue
        section[key] = value
        was = json.dumps(before) if before is not None else "(not set)"
        changes.append(f"[{table}] {key}: {was} -> {json.dumps(value)}")
    if changes:
        _replace(path, tomlkit.dumps(document))
    return changes


def _replace(path: Path, text: str) -> None:
    temp = path.with_name(f".{path.name}.tmp")
    try:
        fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temp, path)
    except OSError as exc:
        temp.unlink(missing_ok=True)
        raise click.ClickException(f"cannot write {path}: {exc}") from None


def loopd_model(state: State) -> tuple[dict[str, Any], str]:
    """What loopd says it uses (its status data) and its one-line detail; ({}, why) when it is down."""
    try:
        reply = wire.call(roles.LOOPD.socket(state.layout), Status(), timeout=5.0)
    except PeerError as exc:
        return {}, f"loopd is not running ({exc.message})"
    if not isinstance(reply, StatusReply) or not isinstance(reply.data, dict):
        return {}, "loopd gave an unexpected reply to status"
    return reply.data, reply.detail


@click.command(name="model")
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of text.")
@pass_state
def model(state: State, as_json: bool) -> None:
    """Show the model server loopd uses, and what it answers now (an API key is never shown).

    \b
    Example:
        bxctl model
        bxctl up --model-url http://127.0.0.1:11434 --model qwen2.5:1.5b   # to change it
    """
    data, detail = loopd_model(state)
    url = data.get("model_url") or roles.configured_model_url(roles.LOOPD.config(state.layout))
    probe = roles.model_probe(url, timeout=3.0) if url else None
    key_env = data.get("api_key_env")
    info = {
        "loopd": detail,
        "url": url,
        "name": data.get("model_name"),
        "api_key_env": key_env,
        "api_key": ("set" if data.get("api_key_set") else "not set") if key_env else None,
        "n_ctx": data.get("n_ctx"),
        "answers_now": probe.answered if probe else None,
        "found": found_line(probe) if probe else None,
        "config": str(roles.LOOPD.config(state.layout)),
    }
    if as_json:
        click.echo(json.dumps(info, indent=2))
        return
    click.echo(f"loopd: {detail}")
    click.echo(f"url: {url or '(no loopd.toml)'}")
    click.echo(f"name: {info['name'] or '(not sent)'}")
    if key_env:
        click.echo(f"api key: from ${key_env} in loopd's environment ({info['api_key']}; never shown)")
    if info["found"]:
        click.echo(info["found"])
    click.echo(f"change it: bxctl up --model-url URL [--model NAME] [--api-key-env VAR] ({info['config']})")
