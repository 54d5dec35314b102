"""The owner's view of the MCP clients (issue 17): ``mcp-clients``.

Every client that has called memoryd over its MCP socket (from ``memory/mcp/``, `files.mcp_sessions`)
and every client the config names (``[mcp.clients.<name>]``), with the owner's trust in it, its sessions
and how many of them are untrusted, the first and latest session start, and the last peer seen.
"""

from __future__ import annotations

from typing import Any

from boxmaker.memoryd.admin.command import Command
from boxmaker.memoryd.memory import Memory
from boxmaker.proto.messages import MemoryAdmin, MemoryAdminReply


def clients(memory: Memory) -> list[dict[str, Any]]:
    """One record per client, by name: ``{"client", "trust", "configured", "sessions", "untrusted",
    "first", "latest", "peer_uid", "peer_pid"}`` (the times RFC 3339 UTC, "" when never seen)."""
    found: dict[str, dict[str, Any]] = {}
    config = memory.config
    for name in config.mcp_trust:
        found[name] = _empty(name)
    for session in memory.mcp_sessions.all():
        record = found.setdefault(session.client, _empty(session.client))
        record["sessions"] += 1
        record["untrusted"] += 1 if session.label.untrusted else 0
        record["first"] = record["first"] or session.first
        record["latest"] = max(record["latest"], session.first)
        record["peer_uid"], record["peer_pid"] = session.peer_uid, session.peer_pid
    for name, record in found.items():
        record["trust"] = config.trust_of(name)
        record["configured"] = name in config.mcp_trust
    return [found[name] for name in sorted(found)]


def _empty(name: str) -> dict[str, Any]:
    return {
        "client": name,
        "trust": "untrusted",
        "configured": False,
        "sessions": 0,
        "untrusted": 0,
        "first": "",
        "latest": "",
        "peer_uid": None,
        "peer_pid": None,
    }


def _clients(memory: Memory, _request: MemoryAdmin) -> MemoryAdminReply:
    found = clients(memory)
    if not found:
        return MemoryAdminReply("no MCP client has called memoryd yet, and none is configured", [])
    lines = []
    for record in found:
        seen = (
            f"{record['sessions']} session(s), {record['untrusted']} untrusted, latest {record['latest']}"
            if record["sessions"]
            else "never seen"
        )
        where = "" if record["configured"] else " (not in the config: untrusted)"
        lines.append(f"{record['client']}: trust {record['trust']}{where}; {seen}")
    return MemoryAdminReply("\n".join(lines), found)


COMMANDS = (Command("mcp-clients", _clients, takes_arg=False),)
