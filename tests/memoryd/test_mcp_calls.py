"""memoryd's side of an MCP client's calls, without sockets (issue 17): the session's label is memoryd's,
kept durably, only ever stricter; a broken record fails closed; the config names the clients' trust."""

from __future__ import annotations

from pathlib import Path

import pytest

from boxmaker.memoryd.config import load
from boxmaker.memoryd.service import Memoryd
from boxmaker.proto.errors import ConfigError, InvalidBody
from boxmaker.proto.ids import mcp_client_of, new_mcp_session_id
from boxmaker.proto.labels import DataClass, Label
from boxmaker.proto.messages import McpCall, McpHello, McpHelloReply, MemoryCall, ToolRequest, ToolResponse


def note(service: Memoryd, session: str, text: str, untrusted: bool = False) -> ToolResponse:
    request = ToolRequest(session, "c1", "memory", {"action": "note", "text": text})
    reply = service.handle(
        "mcp_call", McpCall(client="cli-x", session=session, untrusted=untrusted, request=request)
    )
    assert isinstance(reply, ToolResponse)
    return reply


def test_session_ids_name_their_client() -> None:
    session = new_mcp_session_id("claude-code")
    assert session.startswith("mcp-claude-code-")
    assert len(session) == len("mcp-claude-code-") + 20
    assert mcp_client_of(session) == "claude-code"
    assert mcp_client_of("chat-abcdefghijklmnopqrst") is None


def test_a_label_recorded_untrusted_is_never_lowered_and_a_broken_record_fails_closed(
    service: Memoryd, home: Path
) -> None:
    session = new_mcp_session_id("cli-x")
    first = note(service, session, "One.", untrusted=True)
    assert first.session_label == Label(DataClass.PRIVATE, True)
    again = note(service, session, "Two.")
    assert again.output.endswith("(untrusted)")
    record = home / "memory" / "mcp" / f"{session}.json"
    assert record.stat().st_mode & 0o777 == 0o600
    fresh = Memoryd(load(None, str(home)))  # what a restart reads
    assert fresh.memory.mcp_sessions.all()[0].label.untrusted
    other = new_mcp_session_id("cli-x")
    note(service, other, "Three.")
    (record.parent / f"{other}.json").write_text("{not json", encoding="utf-8")
    service.memory.mcp_sessions._cache.clear()
    assert note(service, other, "Four.").session_label == Label(DataClass.SECRET, True)


def test_a_brokerd_session_may_not_take_an_mcp_session_id(service: Memoryd) -> None:
    session = new_mcp_session_id("cli-x")
    call = MemoryCall(
        ToolRequest(session, "c1", "memory", {"action": "note", "text": "x"}), DataClass.PRIVATE, False
    )
    with pytest.raises(InvalidBody, match="reserved for MCP clients"):
        service.handle("memory_call", call)


def test_hello_says_the_trust_and_serves_the_block(home: Path) -> None:
    config = home.parent / "memoryd.toml"
    config.write_text('[mcp.clients.desk]\ntrust = "clean"\n', encoding="utf-8")
    service = Memoryd(load(config, str(home)))
    service.open()
    try:
        reply = service.handle("mcp_hello", McpHello("desk"))
        assert isinstance(reply, McpHelloReply)
        assert reply.trust == "clean"
        assert "# soul.md" in reply.block
        other = service.handle("mcp_hello", McpHello("someone"))
        assert isinstance(other, McpHelloReply)
        assert other.trust == "untrusted"
    finally:
        service.close()


def test_a_client_name_the_config_cannot_hold_is_an_error_naming_it(home: Path) -> None:
    config = home.parent / "memoryd.toml"
    config.write_text('[mcp.clients."Claude Code"]\ntrust = "clean"\n', encoding="utf-8")
    with pytest.raises(ConfigError, match=r"\[mcp.clients.Claude Code\]"):
        load(config, str(home))
    config.write_text('[mcp.clients.x]\ntrust = "trusted"\n', encoding="utf-8")
    with pytest.raises(ConfigError, match="trust"):
        load(config, str(home))
