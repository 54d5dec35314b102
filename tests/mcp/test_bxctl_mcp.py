"""``bxctl mcp config`` and Claude Code's taint hooks (issue 17), in process (no daemon needed)."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

import pytest
from click.testing import CliRunner

from boxmaker.bxctl.cli import cli
from boxmaker.bxctl.mcp import CLIENTS


def bxctl(home: Path, *args: str, stdin: str | None = None) -> tuple[int, str]:
    done = CliRunner().invoke(cli, ["--home", str(home), *args], input=stdin)
    return done.exit_code, done.output


def body(output: str) -> str:
    """The snippet without its comment lines."""
    return "\n".join(line for line in output.splitlines() if not line.startswith("#"))


@pytest.mark.parametrize("name", CLIENTS)
def test_config_prints_the_absolute_command_the_client_and_the_home(home: Path, name: str) -> None:
    code, output = bxctl(home, "mcp", "config", name)
    assert code == 0, output
    assert "boxmaker-mcp" in output
    assert f'"{name}"' in output or f" {name} " in output
    assert str(home) in output
    if name == "codex":
        table = tomllib.loads(body(output))["mcp_servers"]["boxmaker"]
        assert Path(table["command"]).is_absolute()
        assert table["args"] == ["--client", "codex", "--home", str(home)]
        assert table["startup_timeout_sec"] == 20
    elif name == "claude-code":
        assert "claude mcp add --scope user boxmaker -- /" in output
    else:
        parsed = json.loads(body(output))
        assert parsed  # the JSON the client reads, as printed
    if name == "vscode":
        assert "servers" in json.loads(body(output))


def test_hooks_are_for_claude_code_only(home: Path) -> None:
    code, output = bxctl(home, "mcp", "config", "cursor", "--hooks")
    assert code == 2
    assert "--hooks is for claude-code only" in output


def test_the_taint_hooks_mark_a_session_and_add_taint_to_boxmakers_calls(home: Path) -> None:
    code, output = bxctl(home, "mcp", "config", "claude-code", "--hooks")
    assert code == 0
    assert '"PreToolUse"' in output
    assert '"matcher": "mcp__boxmaker__.*"' in output
    call = {
        "session_id": "cc-1",
        "tool_name": "mcp__boxmaker__memory",
        "tool_input": {"action": "note", "text": "x"},
    }
    assert bxctl(home, "mcp", "hook", "pre", stdin=json.dumps(call)) == (0, "")  # not marked: unchanged
    boxmaker_own = {"session_id": "cc-1", "tool_name": "mcp__boxmaker__recall"}
    assert bxctl(home, "mcp", "hook", "post", stdin=json.dumps(boxmaker_own)) == (0, "")
    assert bxctl(home, "mcp", "hook", "pre", stdin=json.dumps(call)) == (0, "")  # its own tools do not taint
    web = {"session_id": "cc-1", "tool_name": "WebFetch"}
    assert bxctl(home, "mcp", "hook", "post", stdin=json.dumps(web)) == (0, "")
    code, output = bxctl(home, "mcp", "hook", "pre", stdin=json.dumps(call))
    assert code == 0
    updated = json.loads(output)["hookSpecificOutput"]
    assert updated["hookEventName"] == "PreToolUse"
    assert updated["updatedInput"] == {"action": "note", "text": "x", "taint": "untrusted"}
    other = {**call, "session_id": "cc-2"}
    assert bxctl(home, "mcp", "hook", "pre", stdin=json.dumps(other)) == (0, "")  # another session: clean
    assert bxctl(home, "mcp", "hook", "pre", stdin="not json") == (0, "")
