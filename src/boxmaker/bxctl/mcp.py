"""``bxctl mcp``: connect MCP clients to boxmaker's memory (issue 17).

- ``bxctl mcp config CLIENT [--hooks]``: the exact lines each client needs, with the absolute path of
  ``boxmaker-mcp`` and this home (GUI apps may not have ``~/.local/bin`` on their PATH); printed, never
  written. ``--hooks`` (claude-code) adds the hooks that declare taint after web or MCP tool use.
- ``bxctl mcp clients [--json]``: the clients memoryd has seen or its config names, with the owner's trust.
- ``bxctl mcp hook post|pre``: the hook commands Claude Code runs (stdin: its hook JSON). ``post`` marks a
  Claude Code session that used a web or another MCP server's tool; ``pre`` adds ``"taint": "untrusted"``
  to boxmaker's tool calls of a marked session (`updatedInput`). Marks live in ``{home}/run/cc-taint/``
  (0700, one empty file per session, named by a hash of its id).
"""

from __future__ import annotations

import hashlib
import json
import shlex
import shutil
import sys
from pathlib import Path
from typing import Any

import click

from boxmaker.bxctl import client, roles
from boxmaker.bxctl.options import json_option, memory_socket_option, memory_socket_path
from boxmaker.bxctl.state import State, pass_state
from boxmaker.proto import fsio

#: The clients `config` knows, in the README's order.
CLIENTS = ("claude-code", "codex", "cursor", "vscode", "gemini", "opencode", "llama-server")
#: The tools whose use in a Claude Code session declares taint (the hooks' PostToolUse matcher).
TAINTING_TOOLS = "WebFetch|WebSearch|mcp__.*"
SERVER = "boxmaker"


def executable(name: str) -> str:
    """The absolute path of one of boxmaker's console scripts: beside this Python's, else on PATH,
    else the bare name."""
    beside = Path(sys.executable).with_name(name)
    if beside.exists():
        return str(beside)
    return shutil.which(name) or name


def server_args(state: State, name: str) -> list[str]:
    """``boxmaker-mcp``'s arguments for client `name` on this home (and the MCP socket the memoryd
    config sets, when it sets one)."""
    args = ["--client", name, "--home", str(state.layout.home)]
    socket = roles.configured_socket(roles.MEMORYD.config(state.layout), "mcp")
    return [*args, "--socket", str(socket)] if socket is not None else args


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, indent=2)


def snippet(state: State, name: str) -> str:
    """What the owner adds to client `name`'s configuration (module docstring)."""
    command, args = executable("boxmaker-mcp"), server_args(state, name)
    stdio = {"command": command, "args": args}
    if name == "claude-code":
        line = shlex.join(["claude", "mcp", "add", "--scope", "user", SERVER, "--", command, *args])
        return f'# run once (or put the JSON under "mcpServers" in .mcp.json):\n{line}\n' + _json(
            {"mcpServers": {SERVER: {"type": "stdio", **stdio}}}
        )
    if name == "codex":
        quoted = ", ".join(json.dumps(a) for a in args)
        return (
            "# ~/.codex/config.toml\n"
            f"[mcp_servers.{SERVER}]\ncommand = {json.dumps(command)}\nargs = [{quoted}]\n"
            "startup_timeout_sec = 20\n"
        )
    if name == "cursor":
        return "# ~/.cursor/mcp.json (or .cursor/mcp.json in a project)\n" + _json(
            {"mcpServers": {SERVER: stdio}}
        )
    if name == "vscode":
        return '# .vscode/mcp.json (or the user mcp.json): the key is "servers"\n' + _json(
            {"servers": {SERVER: {"type": "stdio", **stdio}}}
        )
    if name == "gemini":
        return "# ~/.gemini/settings.json (or .gemini/settings.json in a project)\n" + _json(
            {"mcpServers": {SERVER: {**stdio, "trust": False}}}
        )
    if name == "opencode":
        local = {"type": "local", "command": [command, *args]}
        return (
            "# opencode.json(c) or ~/.config/opencode/opencode.json (older versions: the server directly\n"
            '# under "mcp", with "enabled": true)\n'
            + _json({"$schema": "https://opencode.ai/config.json", "mcp": {"servers": {SERVER: local}}})
        )
    return (
        "# mcp.json, then: llama-server -m MODEL.gguf --jinja --mcp-servers-config mcp.json\n"
        "# (its tools appear as boxmaker_recall and boxmaker_memory)\n"
        + _json({"mcpServers": {SERVER: stdio}})
    )


def hooks(state: State) -> str:
    """Claude Code's hooks that declare taint (module docstring), for ``~/.claude/settings.json``."""
    bxctl = shlex.join([executable("bxctl"), "--home", str(state.layout.home), "mcp", "hook"])
    return "# ~/.claude/settings.json: declare taint after web or other MCP tools\n" + _json(
        {
            "hooks": {
                "PostToolUse": [
                    {"matcher": TAINTING_TOOLS, "hooks": [{"type": "command", "command": f"{bxctl} post"}]}
                ],
                "PreToolUse": [
                    {
                        "matcher": f"mcp__{SERVER}__.*",
                        "hooks": [{"type": "command", "command": f"{bxctl} pre"}],
                    }
                ],
            }
        }
    )


@click.group(name="mcp")
def mcp() -> None:
    """Connect MCP clients (Claude Code, Codex, Cursor, ...) to boxmaker's memory.

    \b
    Example:
        bxctl mcp config claude-code
        bxctl mcp clients
    """


@mcp.command(name="config")
@click.argument("client_name", metavar="CLIENT", type=click.Choice(CLIENTS))
@click.option("--hooks", "with_hooks", is_flag=True, help="claude-code: also the hooks that declare taint.")
@pass_state
def config(state: State, client_name: str, with_hooks: bool) -> None:
    """Print the lines CLIENT needs to use boxmaker's memory (nothing is written).

    Each client starts its own boxmaker-mcp, which asks memoryd (start it with `bxctl up`; no model
    server is needed). A client is untrusted until memoryd.toml says otherwise:
    [mcp.clients.CLIENT] trust = "declared" or "clean" (docs/configuration.md).

    \b
    Example:
        bxctl mcp config codex >> ~/.codex/config.toml
        bxctl mcp config claude-code --hooks
    """
    if with_hooks and client_name != "claude-code":
        raise click.UsageError("--hooks is for claude-code only (the other clients' hooks cannot add taint)")
    click.echo(snippet(state, client_name))
    if with_hooks:
        click.echo(hooks(state))


@mcp.command(name="clients")
@json_option
@memory_socket_option
@pass_state
def clients(state: State, as_json: bool, memory_socket: Path | None) -> None:
    """List the MCP clients memoryd has seen or its config names, with the owner's trust in each.

    \b
    Example:
        bxctl mcp clients
        bxctl mcp clients --json
    """
    client.emit_call(lambda: client.admin(memory_socket_path(state, memory_socket), "mcp-clients"), as_json)


def _mark(state: State, session: object) -> Path | None:
    if not isinstance(session, str) or not session:
        return None
    name = hashlib.sha256(session.encode("utf-8", "surrogatepass")).hexdigest()[:32]
    return state.layout.run / "cc-taint" / name


def _hook_input() -> dict[str, Any]:
    try:
        data = json.loads(sys.stdin.read() or "{}")
    except ValueError:
        return {}
    return data if isinstance(data, dict) else {}


@mcp.command(name="hook")
@click.argument("event", type=click.Choice(["post", "pre"]))
@pass_state
def hook(state: State, event: str) -> None:
    """Claude Code's taint hooks (`bxctl mcp config claude-code --hooks` prints where they go).

    post (PostToolUse): marks the Claude Code session when a web tool or another MCP server's tool ran.
    pre (PreToolUse on boxmaker's tools): in a marked session, adds "taint": "untrusted" to the call.
    Reads the hook's JSON on stdin; never blocks a tool.

    \b
    Example:
        echo '{"session_id": "s1", "tool_name": "WebFetch"}' | bxctl mcp hook post
    """
    data = _hook_input()
    mark = _mark(state, data.get("session_id"))
    if mark is None:
        return
    if event == "post":
        tool = str(data.get("tool_name", ""))
        if tool.startswith(f"mcp__{SERVER}__"):
            return
        try:
            fsio.ensure_dir(mark.parent)
            fsio.ensure_file(mark)
        except OSError as exc:  # a hook never blocks a tool; the next boxmaker call stays undeclared
            click.echo(f"bxctl mcp hook post: cannot mark the session in {mark.parent}: {exc}", err=True)
        return
    tool_input = data.get("tool_input")
    if not mark.exists() or not isinstance(tool_input, dict):
        return
    updated = {**tool_input, "taint": "untrusted"}
    output = {"hookSpecificOutput": {"hookEventName": "PreToolUse", "updatedInput": updated}}
    click.echo(json.dumps(output, ensure_ascii=True))
