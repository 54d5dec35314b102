"""bxctl's calls to the roles' owner sockets, and how their failures reach the owner (STYLE 7).

Every failure becomes a `click.ClickException` subclass with exit code 1: a role that does not answer
says how to start it; an `error` reply prints its sentence and runbook entry; a refused owner command
(``refused:<reason>``) prints its sentence. Under ``--json`` every failure also prints a JSON object
``{"code", "text", …}`` on stdout (`emit` for refusals, `JsonErrors` for the rest).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from boxmaker.proto import wire
from boxmaker.proto.errors import FrameTooLarge, PeerError
from boxmaker.proto.messages import Body, BrokerAdmin, BrokerAdminReply, MemoryAdmin, MemoryAdminReply

#: The start of an `invalid-body` error's sentence, which names the message kind (protocol internals).
_BODY_PREFIX = re.compile(r"^invalid [a-z_]+ body: ")

#: `click.Context.meta` key: True when the command line asked for ``--json`` (set by `JsonErrors`).
JSON_META = "bxctl.json"


class RoleUnreachable(click.ClickException):
    """Exit 1: nothing answers on a role's socket."""

    exit_code = 1
    code = "unreachable"

    def __init__(self, role: str, path: Path, why: str) -> None:
        detail = why if str(path) in why else f"{path}: {why}"
        super().__init__(f"{role} does not answer ({detail}); start it with `bxctl up`")


class RoleDown(click.ClickException):
    """Exit 1: a command that needs a role refuses, changing nothing, because it does not answer."""

    exit_code = 1
    code = "unreachable"


#: What the owner can do where memoryd's sentence (written for the model) says "consolidate", an action
#: of the model's `memory` tool that the owner does not have.
OWNER_CONSOLIDATE = (
    "(you can: bxctl memory remove --file FILE TEXT, bxctl memory edit --file FILE TEXT, or edit the file "
    "under {home}/memory/ by hand, keeping a line holding only § between entries)"
)


def for_owner(text: str) -> str:
    """`text`, with what the owner can do when it tells them to use consolidate."""
    if "consolidate" in text and ("use consolidate" in text or "with consolidate" in text):
        return f"{text}\n{OWNER_CONSOLIDATE}"
    return text


class RoleRefused(click.ClickException):
    """Exit 1: the role answered with an `error` frame, or refused the owner's command."""

    exit_code = 1
    code = "error"

    def __init__(self, message: str, runbook: str = "", *, printed: bool = False) -> None:
        message = for_owner(message)
        text = message if not runbook else f"{message}\nrunbook: {runbook} (docs/runbook.md)"
        super().__init__(text)
        self.printed = printed


def json_error(exc: click.ClickException) -> dict[str, Any]:
    """The ``{"code", "text", "exit_code"}`` object a failure prints on stdout under ``--json``:
    code ``unreachable`` (a role does not answer), ``usage`` (a bad argument or option), else the
    exception's ``code`` attribute or ``error``."""
    code = "usage" if isinstance(exc, click.UsageError) else str(getattr(exc, "code", "error"))
    return {"code": code, "text": exc.format_message(), "exit_code": exc.exit_code}


class JsonErrors(click.Group):
    """A group that, when the command line holds ``--json`` (before any ``--``), prints every
    failure of its commands as a JSON object (`json_error`) on stdout before click prints the
    sentence on stderr and exits with the usual code. Replies `emit` already printed are not
    printed twice."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        ahead = args[: args.index("--")] if "--" in args else args
        ctx.meta[JSON_META] = "--json" in ahead
        return super().parse_args(ctx, args)

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except click.ClickException as exc:
            if ctx.meta.get(JSON_META) and not getattr(exc, "printed", False):
                click.echo(json.dumps(json_error(exc), ensure_ascii=True, indent=2))
            raise


def request(
    role: str,
    path: Path,
    body: Body,
    timeout: float = 120.0,
    on_interim: Callable[[Body], None] | None = None,
) -> Body:
    """Send one request and return the reply (`on_interim` gets the frames before it, `wire.call`).

    Raises:
        RoleUnreachable: nothing answers at `path`.
        RoleRefused: the role answered with an `error` frame, or the request or its answer is larger
            than one frame.
    """
    try:
        return wire.call(path, body, timeout=timeout, on_interim=on_interim)
    except FrameTooLarge as exc:  # a request or an answer larger than one frame: say so, ask for less
        raise RoleRefused(
            f"{role}: a {exc.size:,}-byte message is over the {exc.limit:,}-byte limit of one frame"
            " (a shorter text, or a smaller --limit, fits)"
        ) from None
    except PeerError as exc:
        if exc.code == "unreachable":
            raise RoleUnreachable(role, path, exc.message) from None
        # the owner reads what was wrong with the argument, not which message carried it
        message = _BODY_PREFIX.sub("", exc.message) if exc.code == "invalid-body" else exc.message
        raise RoleRefused(message, exc.runbook) from None


def admin(path: Path, command: str, arg: str = "", args: dict[str, Any] | None = None) -> MemoryAdminReply:
    """Run one ``memory_admin`` command on memoryd's admin socket.

    Raises:
        RoleUnreachable, RoleRefused: see `request`; also an unexpected reply kind.
    """
    reply = request("memoryd", path, MemoryAdmin(command=command, arg=arg, args=args or {}))
    if not isinstance(reply, MemoryAdminReply):
        raise RoleRefused(f"memoryd answered {type(reply).__name__} to memory_admin")
    return reply


def broker_admin(path: Path, command: str, arg: str = "", timeout: float = 120.0) -> BrokerAdminReply:
    """Run one ``broker_admin`` command on brokerd's admin socket.

    Raises:
        RoleUnreachable, RoleRefused: see `request`; also an unexpected reply kind.
    """
    reply = request("brokerd", path, BrokerAdmin(command=command, arg=arg), timeout=timeout)
    if not isinstance(reply, BrokerAdminReply):
        raise RoleRefused(f"brokerd answered {type(reply).__name__} to broker_admin")
    return reply


def emit_call(ask: Callable[[], MemoryAdminReply | BrokerAdminReply], as_json: bool) -> None:
    """`emit` the reply of `ask` (a role's failure under `as_json` is printed by `JsonErrors`)."""
    emit(ask(), as_json)


def refusal_text(code: str, text: str) -> str:
    """A refusal as the owner reads it, in one form everywhere: ``refused:not-found: <the sentence>``
    (memoryd's sentences that begin ``refused (not-found): `` lose that beginning, the rest unchanged)."""
    rule = code.removeprefix("refused:")
    text = text.removeprefix(f"refused ({rule}): ")
    return text if f"({rule})" in text else f"{code}: {text}"


def emit(reply: MemoryAdminReply | BrokerAdminReply, as_json: bool) -> None:
    """Print a reply: its text, or its data as JSON. A refused command exits 1 with its sentence on
    stderr; with `as_json` it also prints ``{"code": "refused:…", "text": "…", …data}`` on stdout.

    Raises:
        RoleRefused: when ``data.code`` is ``refused:<reason>``.
    """
    code = reply.data.get("code") if isinstance(reply.data, dict) else None
    if isinstance(code, str) and code.startswith("refused:"):
        if as_json and isinstance(reply.data, dict):
            click.echo(
                json.dumps({"code": code, "text": reply.text, **reply.data}, ensure_ascii=True, indent=2)
            )
        raise RoleRefused(refusal_text(code, reply.text), printed=as_json)
    if as_json:
        click.echo(json.dumps(reply.data, ensure_ascii=True, indent=2))
    else:
        click.echo(for_owner(reply.text))
